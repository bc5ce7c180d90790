// Runner: runs a Model's forward pass over a batch of tokens from one or
// more sequences. It owns the compute threads and scratch buffers, so there
// is one Runner per compute loop (per loaded model).
//
// A batch lists (sequence, token) entries. Each sequence's entries are read
// in order and continue that sequence: the first takes row seq->n_tokens(),
// the next one more, and so on. A row's RoPE position is its row number
// unless the entry gives one (prompts with images: an image's rows share a
// time position and the text after it continues past the image's largest
// side, so positions fall behind rows). An entry may carry an embedding
// instead of a token (an image row). Logits come back for the entries that
// ask for them, in batch order.
//
// Batch invariance: the logits of an entry are bit-identical whether its
// sequence was read in one batch, in chunks of any size, or next to other
// sequences (every kernel reduces in a fixed per-token order).
//
// Thread-safety: one Forward() at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "models/model.h"
#include "models/sequence_state.h"

namespace mx::models {

struct BatchEntry {
  BatchEntry() = default;
  BatchEntry(SequenceState* s, int32_t t, bool logits) : seq(s), token(t), want_logits(logits) {}
  // An image row at RoPE position p.
  static BatchEntry Embedding(SequenceState* s, const float* row, kernels::RopePos p, bool logits) {
    BatchEntry e(s, 0, logits);
    e.embedding = row;
    e.has_pos = true;
    e.pos = p;
    return e;
  }

  SequenceState* seq = nullptr;
  int32_t token = 0;  // ignored when `embedding` is set
  bool want_logits = false;
  // An image row: [n_embd] floats fed in place of a token's embedding
  // (unscaled). REQUIRES: valid until Forward returns.
  const float* embedding = nullptr;
  // The row's RoPE position when has_pos; else its row number.
  bool has_pos = false;
  kernels::RopePos pos;
};

// The experts one entry of a batch was routed to in one mixture-of-experts
// layer (Runner::set_routing_log): best first, with their weights and the
// margin of the decision (ranked score of the k-th minus the next expert).
struct RoutingDecision {
  int64_t layer = 0;
  int64_t entry = 0;  // index in the batch
  std::vector<int32_t> experts;
  std::vector<float> weights;
  float gap = 0.0f;
};

class MoeRouter;

struct RunnerOptions {
  int n_threads = 1;
  // Attention KV rows: F16 (default), F32, Q8_0 or Q4_0 for keys and values;
  // k_type / v_type, when set, override it for one of them.
  DType kv_type = DType::kF16;
  int64_t n_ctx = 0;  // 0: the model's training context, capped at 8192
  std::optional<DType> k_type = std::nullopt;
  std::optional<DType> v_type = std::nullopt;
};

class Runner {
 public:
  // REQUIRES: model outlives the runner. InvalidArgument when a KV type is
  // not one of the four, or is quantized and the model's attention heads
  // are not a multiple of its 32-value blocks (the message names the dims).
  static Result<std::unique_ptr<Runner>> Create(const Model& model, const RunnerOptions& options);

  const Model& model() const { return model_; }
  const std::shared_ptr<const StateLayout>& layout() const { return layout_; }
  int64_t n_ctx() const { return layout_->n_ctx; }
  int64_t n_vocab() const { return model_.config().n_vocab; }
  ThreadPool& pool() { return pool_; }

  // A fresh, empty state for this model.
  std::unique_ptr<SequenceState> NewSequence() const;
  // Takes a state made elsewhere (a restored saved cache; a chat that waited
  // in the write queue while its model was unloaded, or that another runner
  // of the same file made) as one of this runner's: rebinds it to this
  // runner's layout (SequenceState::Rebind; its error, nothing changed,
  // when the state does not fit) and lends it this runner's threads for
  // its copies and growth, as NewSequence's states have them.
  Status Adopt(SequenceState* seq) const;

  // Runs the batch. `logits` is resized to [n_wanted, n_vocab]. The batch is
  // validated first (tokens in range, states of this model, room in the
  // context); on error nothing is changed.
  Status Forward(std::span<const BatchEntry> batch, std::vector<float>* logits);

  // Every routing decision of the following Forward calls is appended to
  // `log` (null: none are kept). For tests and diagnostics.
  void set_routing_log(std::vector<RoutingDecision>* log) { routing_log_ = log; }

  ~Runner();

 private:
  Runner(const Model& model, const RunnerOptions& options, std::shared_ptr<const StateLayout> l);

  // Per entry: its sequence, its row there and its RoPE position, filled by
  // Prepare.
  struct Planned {
    SequenceState* seq;
    int64_t pos;  // the row (KV row, keys attended: rows [0, pos])
    kernels::RopePos rope;
  };
  Status Prepare(std::span<const BatchEntry> batch);
  // h_ = rms(x_, w) for the n entries.
  void Norm(const std::vector<float>& w, int64_t n);
  // out_ = rms(out_, w) for the n entries (ModelConfig::post_norms).
  void PostNorm(const std::vector<float>& w, int64_t n);
  // x_ += residual_scale * out_ for the n entries.
  void AddResidual(int64_t n);
  // The blocks (architecture.h): each reads the normed input h_ of the n
  // entries and writes its output to out_ (the caller adds it to x_).
  // attn_index / rec_index count the layers of that kind before this one.
  void AttentionMixer(size_t layer, size_t attn_index, int64_t n);  // runner_attention.cc
  void Mamba2Mixer(size_t layer, size_t rec_index, int64_t n);      // runner_mamba2.cc
  void DeltaNetMixer(size_t layer, size_t rec_index, int64_t n);    // runner_delta_net.cc
  void FfnBlock(size_t layer, int64_t n);                            // runner.cc
  void MoeBlock(size_t layer, int64_t n);                            // runner_moe.cc
  void SharedExpert(size_t layer, int64_t n);  // into out_ (runner_moe.cc)
  // Long-context generation attention in two phases; false (nothing done)
  // when the batch does not qualify (runner_attention.cc).
  bool SplitAttention(size_t attn_index, int n_head, int n_kv_head, int64_t hd, float scale);
  // Sliding-window attention (LayerConfig::window): each query over its
  // last `window` rows only, one query per task.
  void WindowAttention(size_t attn_index, int n_head, int n_kv_head, int64_t hd, float scale,
                       int64_t window);
  // Attention sinks (gpt-oss): rescales att_ as if each head's softmax had
  // one more logit, sinks[h], without a value (runner_attention.cc).
  void ApplySinks(size_t attn_index, int n_head, int n_kv_head, int64_t hd, float scale,
                  int64_t window, const std::vector<float>& sinks);
  void Output(std::span<const BatchEntry> batch, std::vector<float>* logits);

  const Model& model_;
  std::shared_ptr<const StateLayout> layout_;
  mutable ThreadPool pool_;  // also lends threads to its states' copies (SequenceState::set_copy_pool)

  // Scratch, resized per batch.
  std::vector<Planned> plan_;
  std::vector<float> x_;     // [n, n_embd] residual stream
  std::vector<float> h_;     // [n, n_embd] normed input
  std::vector<float> q_;     // [n, q_dim]
  std::vector<float> k_;     // [n, kv_dim]
  std::vector<float> v_;     // [n, kv_dim]
  std::vector<float> att_;   // [n, q_dim]
  std::vector<float> ff1_;   // [n, n_ff] (or a mixer's input projection)
  std::vector<float> ff2_;   // [n, n_ff] (or a mixer's second buffer)
  std::vector<float> gate_;  // [n, q_dim] gated attention's gate / DeltaNet's z
  std::vector<float> mix_;   // [n, ...] DeltaNet's per-token scalars (beta, decay)
  // Per sequence of the batch: its entries' batch indices, in order
  // (recurrent mixers run each sequence's tokens in order).
  std::vector<std::vector<int64_t>> seq_entries_;
  std::vector<float> out_;   // [n, n_embd]
  // Attention tasks of this batch: up to kAttentionRowTile / group
  // consecutive entries of one sequence (built once per Forward).
  struct QueryTile {
    int64_t first;  // batch index of the first query
    int64_t n_q;    // queries in the tile
  };
  std::vector<QueryTile> query_tiles_;
  int64_t tile_tokens_ = 1;  // most entries per QueryTile (fixed by the model's head groups)
  std::vector<int64_t> n_pos_;  // [n] positions each entry attends to (pos + 1)
  std::vector<std::vector<float>> att_scratch_;  // [thread][AttentionScratchFloats]
  std::vector<float> scores_;  // [tile][query][head][positions, padded to 16] (SplitAttention)
  // Mixture of experts (runner_moe.cc): routing, the slots (entry, choice)
  // grouped by expert, their gathered inputs and outputs.
  std::unique_ptr<MoeRouter> router_;
  std::vector<RoutingDecision>* routing_log_ = nullptr;
  std::vector<float> moe_logits_;     // [n, n_expert]
  std::vector<int32_t> moe_experts_;  // [n, k] chosen experts, best first
  std::vector<float> moe_weights_;    // [n, k]
  std::vector<int64_t> moe_first_;    // [n_expert + 1] first row of each expert
  std::vector<int64_t> moe_next_;     // [n_expert] scratch
  std::vector<int64_t> moe_slots_;    // [n k] row -> slot t * k + j
  std::vector<int64_t> moe_row_;      // [n k] slot -> row
  std::vector<float> moe_x_;          // [n k, n_embd] gathered inputs
  std::vector<float> moe_y_;          // [n k, n_embd] expert outputs
  std::vector<float> moe_acc_;        // [n_embd]
  std::vector<float> moe_sh1_, moe_sh2_, moe_gate_;  // the shared expert's
  std::vector<kernels::MatMulJob> moe_jobs_;
};

}  // namespace mx::models
