// SequenceState: everything the engine remembers about one sequence (one
// chat): the attention KV rows of every attention layer, token p in row p (its keys
// rotated by its RoPE position: p, or less after a picture, see runner.h),
// plus the fixed-size recurrent state (conv + SSM) of every Mamba2 layer.
// It is the unit the prompt cache keeps, copies, shifts and saves.
//
// Memory is explicit: the KV buffers grow with the tokens held (in steps of
// kGrowTokens), SizeBytes() is the exact byte count of the state's content,
// CapacityBytes() what is allocated. Copies are explicit (ClonePrefix).
//
// Thread-safety: none; a state is used by one compute loop at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/large_buffer.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"
#include "models/model_config.h"

namespace mx::models {

// Bumped whenever the in-memory or serialized state layout changes, so that a
// saved state is never read by an engine that lays it out differently.
inline constexpr uint32_t kStateLayoutVersion = 3;

// The recurrent state of one recurrent layer: its conv window, then its
// state matrix, as floats. Every recurrent kind has this shape; what the
// matrix means is the mixer's business (models/runner_*.cc).
enum class RecurrentKind : uint8_t { kMamba2 = 1, kDeltaNet = 2 };
struct RecurrentLayerLayout {
  RecurrentKind kind = RecurrentKind::kMamba2;
  int64_t conv_floats = 0;   // [d_conv - 1][channels], oldest first
  int64_t state_floats = 0;  // Mamba2: [n_head][head_dim][d_state]; DeltaNet: [n_v_head][d_k][d_v]
  int64_t offset = 0;        // floats before this layer in the recurrent state
};

// The shape of a model's per-sequence state (derived from its config).
struct StateLayout {
  DType k_type = DType::kF16;        // key rows: F16, F32, Q8_0 or Q4_0 (kernels::KvTypeSupported)
  DType v_type = DType::kF16;        // value rows: the same choice
  std::vector<int64_t> kv_dims;      // per attention layer: n_kv_head * head_dim
  int64_t n_ctx = 0;                 // most tokens a state may hold
  std::vector<RecurrentLayerLayout> recurrent;  // per recurrent layer, in layer order
  int64_t n_recurrent = 0;           // recurrent layers (recurrent.size())
  int64_t recurrent_floats = 0;      // all recurrent layers together
  bool use_rope = false;             // keys carry RoPE (shift re-rotates them)
  kernels::RopeParams rope;          // freq_factors always null here: see rope_params()
  int64_t head_dim = 0;
  // The frequency divisors this context rotates with ([n_rot / 2], or empty:
  // Llama 3.1 rope_freqs, or LongRoPE's table chosen for n_ctx), a copy
  // owned by the layout so that a state never points into a model's weights.
  std::vector<float> rope_freq_factors;
  // Per attention layer: 0 when its keys carry no RoPE (NoPE layers); a
  // layout without entries (hand-made) rotates every layer.
  std::vector<uint8_t> rope_layers;
  // Per attention layer: its sliding window (0: full attention), and 1 when
  // it rotates with rope_local (gemma3's local layers); empty when no layer
  // has either. A state keeps every position's rows on windowed layers too
  // (the window is a mask, docs/state_format.md "Sliding-window layers").
  std::vector<int64_t> windows;
  std::vector<uint8_t> rope_local_layers;
  kernels::RopeParams rope_local;  // rope with the local base and frequency scale 1

  // The RoPE of this context's keys and queries (rope + rope_freq_factors),
  // valid while this layout lives; per attention layer (local layers'
  // own base) or the global one.
  kernels::RopeParams rope_params() const;
  kernels::RopeParams rope_params(size_t attn_layer) const;
  // The sliding window of attention layer attn_layer (0: none).
  int64_t window(size_t attn_layer) const {
    return attn_layer < windows.size() ? windows[attn_layer] : 0;
  }
  // True when attention layer attn_layer rotates its queries and keys.
  bool rope_on(size_t attn_layer) const {
    return use_rope && (attn_layer >= rope_layers.size() || rope_layers[attn_layer] != 0);
  }

  static StateLayout ForModel(const ModelConfig& config, DType k_type, DType v_type, int64_t n_ctx);
  // K and V of one type.
  static StateLayout ForModel(const ModelConfig& config, DType kv_type, int64_t n_ctx) {
    return ForModel(config, kv_type, kv_type, n_ctx);
  }
  // Bytes of one K (V) row of an attention layer: kv_dims[layer] values in
  // k_type's (v_type's) blocks (Q8_0: 34 bytes per 32, Q4_0: 18 per 32).
  size_t k_row_bytes(size_t attn_layer) const;
  size_t v_row_bytes(size_t attn_layer) const;
  // "f16", or "K q8_0, V q4_0" when the two differ (log lines, errors).
  std::string KvTypesText() const;
  // Bytes of KV content per token, all attention layers, K and V.
  size_t kv_bytes_per_token() const;
  size_t recurrent_bytes() const;
  // Hash of everything that determines the serialized layout, including
  // kStateLayoutVersion and both KV types (one value when K and V share a
  // type, so states of one type keep the fingerprint they had before K and V
  // could differ).
  uint64_t Fingerprint() const;
  // The KV types a state of `fingerprint` was made with, when it is this
  // layout with other KV types (a saved cache written under another
  // MATRICXON_KV_TYPE); false when no pair of KV types gives it.
  bool KvTypesOf(uint64_t fingerprint, DType* k_type, DType* v_type) const;
};

// The recurrent state (all recurrent layers) as it was after n_tokens tokens.
// Hybrid models keep a few of these per sequence so that a later prompt that
// shares only part of the chat can restart from the newest one at or before
// the shared start (SPEC §3).
struct RecurrentSnapshot {
  int64_t n_tokens = 0;
  std::vector<float> data;  // [recurrent_floats], laid out like the live state
  bool complete = false;    // false while the forward pass that fills it is pending
};

// Serialize() as views: the state's own rows plus a few small owned pieces
// (header, snapshot count and positions), in order; concatenated they are
// exactly Serialize(). Lets a writer seal a state without copying it. The
// views are valid while the state is neither changed nor destroyed (and
// while this object lives).
struct SerializedView {
  std::vector<std::span<const uint8_t>> parts;
  size_t bytes = 0;  // sum of the parts' sizes
  std::vector<uint8_t> small;  // backing store of the small pieces
};

class SequenceState;

// Loading a serialized state in place (saved caches): Prepare() makes a state
// sized for a serialized form of `bytes` bytes that holds `n_tokens` tokens
// and says where each of those bytes goes (KV rows and recurrent state
// straight into the state's memory, header and snapshot list into small
// buffers); the caller writes exactly those bytes there (e.g. decrypts a
// saved cache into them); Finish() checks them as Deserialize() does and
// hands the state over. Not thread-safe, but the buffers may be filled from
// several threads at once.
class StateLoader {
 public:
  // InvalidArgument when n_tokens is outside [0, n_ctx]; Corruption when
  // `bytes` cannot be a state of n_tokens tokens of this layout.
  static Result<StateLoader> Prepare(std::shared_ptr<const StateLayout> layout, int64_t n_tokens, size_t bytes);
  // The buffers in serialized order, covering exactly `bytes` bytes.
  const std::vector<std::span<uint8_t>>& buffers() const { return buffers_; }
  // Checks magic, version, layout fingerprint, token count and snapshots;
  // Corruption / NotSupported / InvalidArgument naming the mismatch.
  // REQUIRES: every byte of buffers() written; called once.
  Result<std::unique_ptr<SequenceState>> Finish();

 private:
  StateLoader() = default;
  std::unique_ptr<SequenceState> state_;
  int64_t n_tokens_ = 0;
  std::vector<uint8_t> header_;
  std::vector<uint8_t> snapshots_;  // count, then (n_tokens, data) each
  std::vector<std::span<uint8_t>> buffers_;
};

class SequenceState {
 public:
  static constexpr int64_t kGrowTokens = 256;
  // Most snapshots a state keeps; requesting more drops the oldest.
  static constexpr size_t kMaxSnapshots = 8;

  explicit SequenceState(std::shared_ptr<const StateLayout> layout);
  SequenceState(const SequenceState&) = delete;
  SequenceState& operator=(const SequenceState&) = delete;

  const StateLayout& layout() const { return *layout_; }
  int64_t n_tokens() const { return n_tokens_; }
  bool has_recurrent() const { return layout_->n_recurrent > 0; }

  // Exact bytes of content: KV rows of the held tokens + recurrent state.
  size_t SizeBytes() const;
  // Bytes allocated (>= SizeBytes()).
  size_t CapacityBytes() const;
  // The memory the state holds now: its KV block's backed pages (for a lazy
  // block, every row written so far, rounded up to pages per layer; rows
  // given back by Truncate / RemoveSpan no longer count), the recurrent state
  // and its snapshots. What the prompt cache's budget counts.
  size_t MemoryBytes() const;
  // Threads for this state's big memory work (a copy of its rows, backing
  // the pages of a growth) and for its copies'. REQUIRES: the pool is idle
  // whenever this state is copied or grown — true for the runner's pool,
  // which only the model's compute loop uses, between forward passes.
  void set_copy_pool(ThreadPool* pool) { pool_ = pool; }
  // Hands the state to another runner of the same model file (the model
  // was unloaded and loaded again, or a second copy of its file continues
  // the chat): from now on the state is laid out by `layout`, which must
  // lay its rows out exactly as the state's own does (the same
  // Fingerprint) and have room for its tokens. InvalidArgument naming the
  // mismatch otherwise; nothing changes then.
  Status Rebind(std::shared_ptr<const StateLayout> layout);

  // The most tokens <= n this state can be cut (or copied) at: n itself for
  // attention-only states; for recurrent ones the newest complete snapshot
  // or the end at or before n (0 when none).
  int64_t NewestCutAtOrBefore(int64_t n) const;

  // Makes room for n tokens in total, backed by memory now. ResourceExhausted
  // when n > n_ctx or the memory cannot be had (nothing changes then).
  Status Reserve(int64_t n);
  // Marks positions [n_tokens, n) as written (the forward pass filled them);
  // pending snapshots at or before n become complete.
  // REQUIRES: n <= capacity.
  void CommitTokens(int64_t n);

  // Drops positions >= n. Recurrent state cannot be rewound: for a model with
  // recurrent layers n must be n_tokens(), 0 (reset) or the position of a
  // complete snapshot (which then becomes the live recurrent state; newer
  // snapshots are dropped); anything else is InvalidArgument.
  Status Truncate(int64_t n);
  // A new state holding a copy of positions [0, n) and of the snapshots at or
  // before n. For hybrids n must be n_tokens(), 0 or a snapshot position.
  // Costs a memory copy of n rows per layer.
  Result<std::unique_ptr<SequenceState>> ClonePrefix(int64_t n) const;
  // True when Truncate(n) / ClonePrefix(n) can cut here.
  bool CanCutAt(int64_t n) const;

  // Hybrid models: asks the next forward passes to save the recurrent state
  // as it is after `n` tokens. REQUIRES n > n_tokens(). No-op without
  // recurrent layers. Keeps at most kMaxSnapshots (oldest dropped first).
  void RequestSnapshot(int64_t n);
  // Positions of the complete snapshots, oldest first.
  std::vector<int64_t> SnapshotPositions() const;
  // Drops the snapshot (complete or pending) taken after `n` tokens and frees
  // its memory; false when there is none. Lets a caller choose which
  // snapshots a state keeps (the prompt cache's snapshot policy) instead of
  // RequestSnapshot dropping the oldest.
  bool DropSnapshot(int64_t n);
  // For the forward pass: the slice of the pending snapshot taken after
  // `n` tokens for recurrent layer `rec_layer`, or null when none is pending.
  float* PendingSnapshot(int64_t n, size_t rec_layer);
  // Removes positions [p0, p1) and moves later positions down by p1 - p0,
  // re-rotating their keys by -(p1 - p0) (RoPE is relative). Not possible
  // for recurrent layers (InvalidArgument).
  Status RemoveSpan(int64_t p0, int64_t p1);

  // Serialized form (docs/state_format.md): header with the layout
  // fingerprint and token count, then the rows. Deserialize checks magic,
  // version, layout and exact size, and returns Corruption / NotSupported
  // naming the mismatch.
  std::string Serialize() const;
  SerializedView SerializeView() const;
  static Result<std::unique_ptr<SequenceState>> Deserialize(
      std::shared_ptr<const StateLayout> layout, std::string_view bytes);

  // Raw access for the forward pass. Rows of a layer are contiguous
  // (row p at k_data(layer) + p * row bytes); rows at or past n_tokens()
  // hold whatever was last written there (uninitialized when never).
  uint8_t* k_row(size_t attn_layer, int64_t pos) {
    return k_base(attn_layer) + static_cast<size_t>(pos) * k_row_bytes_[attn_layer];
  }
  uint8_t* v_row(size_t attn_layer, int64_t pos) {
    return v_base(attn_layer) + static_cast<size_t>(pos) * v_row_bytes_[attn_layer];
  }
  const uint8_t* k_data(size_t attn_layer) const { return k_base(attn_layer); }
  const uint8_t* v_data(size_t attn_layer) const { return v_base(attn_layer); }
  // Recurrent layer rec_layer's conv window and state matrix (see
  // RecurrentLayerLayout).
  float* conv_state(size_t rec_layer) {
    return recurrent_.data() + layout_->recurrent[rec_layer].offset;
  }
  float* ssm_state(size_t rec_layer) {
    return conv_state(rec_layer) + layout_->recurrent[rec_layer].conv_floats;
  }
  const std::vector<float>& recurrent() const { return recurrent_; }

 private:
  std::shared_ptr<const StateLayout> layout_;
  int64_t n_tokens_ = 0;
  int64_t capacity_ = 0;
  friend class StateLoader;

  uint8_t* k_base(size_t attn_layer) const {
    return kv_.data() + static_cast<size_t>(capacity_) * layer_offset_[attn_layer];
  }
  uint8_t* v_base(size_t attn_layer) const {
    return k_base(attn_layer) + static_cast<size_t>(capacity_) * k_row_bytes_[attn_layer];
  }
  // Copies rows [0, n_rows) of every layer into `to`, laid out for `to_capacity`.
  void CopyRows(int64_t n_rows, const LargeBuffer& to, int64_t to_capacity) const;
  // Runs fn(i) for i in [0, n): on pool_ when the work (`bytes`) is large
  // enough to be worth it, else on this thread.
  void ForEachPiece(int64_t n, size_t bytes, const std::function<void(int64_t)>& fn) const;
  // Backs rows [from, to) of every layer of a lazy `buf` laid out for
  // `capacity`. False when the memory could not be had.
  bool PopulateRows(const LargeBuffer& buf, int64_t capacity, int64_t from, int64_t to) const;
  // Gives the pages of rows [n, populated_) of a lazy kv_ back (after a cut).
  void DiscardRowsFrom(int64_t n);

  // All KV rows in one block: [attn layer][K: capacity rows, then V:
  // capacity rows]. A restored state gets an exact-size block (huge pages
  // when large, so that it faults in fast); a state that grows, and a copy
  // of a shared start, get the whole context's rows as lazily backed address
  // space (LargeBuffer::Lazy), so they never move again. Never zeroed: rows
  // are written before they are read.
  LargeBuffer kv_;
  int64_t populated_ = 0;  // rows of a lazy kv_ backed so far (see Reserve)
  std::vector<size_t> k_row_bytes_;   // [attn layer] bytes of one K row
  std::vector<size_t> v_row_bytes_;   // [attn layer] bytes of one V row
  std::vector<size_t> layer_offset_;  // [attn layer] sum of K + V row bytes of the layers before
  ThreadPool* pool_ = nullptr;  // see set_copy_pool
  std::vector<float> recurrent_;         // [recurrent_floats] (StateLayout::recurrent)
  std::vector<RecurrentSnapshot> snapshots_;  // sorted by n_tokens
};

}  // namespace mx::models
