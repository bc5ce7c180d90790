#include "models/sequence_state.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace mx::models {
namespace {

uint64_t Fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}
template <typename T>
uint64_t Mix(uint64_t h, T v) {
  return Fnv1a(h, &v, sizeof(v));
}

}  // namespace

StateLayout StateLayout::ForModel(const ModelConfig& c, DType k_type, DType v_type, int64_t n_ctx) {
  StateLayout l;
  l.k_type = k_type;
  l.v_type = v_type;
  l.n_ctx = n_ctx;
  for (const auto& layer : c.layers) {
    if (!layer.has_attention()) continue;
    l.kv_dims.push_back(layer.n_kv_head * c.head_dim_k);
    l.rope_layers.push_back(layer.rope ? 1 : 0);
    l.windows.push_back(layer.window);
    l.rope_local_layers.push_back(layer.rope_local ? 1 : 0);
  }
  const auto nonzero = [](auto v) { return v != 0; };
  if (std::none_of(l.windows.begin(), l.windows.end(), nonzero)) l.windows.clear();
  if (std::none_of(l.rope_local_layers.begin(), l.rope_local_layers.end(), nonzero)) {
    l.rope_local_layers.clear();
  }
  for (const auto& layer : c.layers) {
    if (!layer.is_recurrent()) continue;
    RecurrentLayerLayout r;
    r.kind = layer.mixer == Mixer::kDeltaNet ? RecurrentKind::kDeltaNet : RecurrentKind::kMamba2;
    r.conv_floats = (c.ssm_d_conv - 1) * c.ssm_conv_channels();
    r.state_floats = c.ssm_d_state * c.ssm_d_inner;
    r.offset = l.recurrent_floats;
    l.recurrent_floats += r.conv_floats + r.state_floats;
    l.recurrent.push_back(r);
  }
  l.n_recurrent = static_cast<int64_t>(l.recurrent.size());
  l.use_rope = c.use_rope;
  l.rope = c.rope;
  l.rope.freq_factors = nullptr;
  l.rope_freq_factors = c.RopeFactorsFor(n_ctx);
  l.head_dim = c.head_dim_k;
  l.rope_local = l.rope;
  if (!l.rope_local_layers.empty()) {
    l.rope_local.freq_base = c.rope_local_base;
    if (!c.rope_local_scaled) l.rope_local.freq_scale = 1.0f;
  }
  return l;
}

kernels::RopeParams StateLayout::rope_params() const {
  kernels::RopeParams p = rope;
  p.freq_factors = rope_freq_factors.empty() ? nullptr : rope_freq_factors.data();
  return p;
}

kernels::RopeParams StateLayout::rope_params(size_t attn_layer) const {
  if (attn_layer >= rope_local_layers.size() || rope_local_layers[attn_layer] == 0)
    return rope_params();
  kernels::RopeParams p = rope_local;
  p.freq_factors = rope_freq_factors.empty() ? nullptr : rope_freq_factors.data();
  return p;
}

size_t StateLayout::k_row_bytes(size_t attn_layer) const {
  return RowBytes(k_type, kv_dims[attn_layer]);
}

size_t StateLayout::v_row_bytes(size_t attn_layer) const {
  return RowBytes(v_type, kv_dims[attn_layer]);
}

std::string StateLayout::KvTypesText() const {
  if (k_type == v_type) return DTypeLowerName(k_type);
  return "K " + DTypeLowerName(k_type) + ", V " + DTypeLowerName(v_type);
}

size_t StateLayout::kv_bytes_per_token() const {
  size_t n = 0;
  for (size_t i = 0; i < kv_dims.size(); ++i) n += k_row_bytes(i) + v_row_bytes(i);
  return n;
}

size_t StateLayout::recurrent_bytes() const {
  return static_cast<size_t>(recurrent_floats) * sizeof(float);
}

uint64_t StateLayout::Fingerprint() const {
  uint64_t h = 14695981039346656037ull;
  h = Mix(h, kStateLayoutVersion);
  h = Mix(h, static_cast<uint32_t>(k_type));
  if (v_type != k_type) h = Mix(h, static_cast<uint32_t>(v_type) | 0x80000000u);
  h = Mix(h, static_cast<uint64_t>(kv_dims.size()));
  for (int64_t d : kv_dims) h = Mix(h, d);
  h = Mix(h, n_recurrent);
  for (const RecurrentLayerLayout& r : recurrent) {
    h = Mix(h, static_cast<uint8_t>(r.kind));
    h = Mix(h, r.conv_floats);
    h = Mix(h, r.state_floats);
  }
  h = Mix(h, static_cast<uint8_t>(use_rope));
  h = Mix(h, rope.n_rot);
  h = Mix(h, rope.freq_base);
  h = Mix(h, rope.freq_scale);
  h = Mix(h, static_cast<int>(rope.mode));
  h = Mix(h, head_dim);
  // What came after: mixed in only when not at its default, so that the
  // layouts without it keep the fingerprint their saved states carry.
  if (rope.ext_factor != 0.0f) {
    h = Mix(h, uint32_t{0x5941524e});  // "YARN"
    h = Mix(h, rope.ext_factor);
    h = Mix(h, rope.beta_fast);
    h = Mix(h, rope.beta_slow);
    h = Mix(h, rope.n_ctx_orig);
  }
  if (rope.attn_factor != 1.0f) {
    h = Mix(h, uint32_t{0x4154544e});  // "ATTN"
    h = Mix(h, rope.attn_factor);
  }
  if (!rope_freq_factors.empty()) {
    h = Mix(h, uint32_t{0x46524551});  // "FREQ"
    h = Mix(h, static_cast<uint64_t>(rope_freq_factors.size()));
    for (float f : rope_freq_factors) h = Mix(h, f);
  }
  if (std::find(rope_layers.begin(), rope_layers.end(), 0) != rope_layers.end()) {
    h = Mix(h, uint32_t{0x4e4f5045});  // "NOPE"
    for (uint8_t r : rope_layers) h = Mix(h, r);
  }
  if (!windows.empty() || !rope_local_layers.empty()) {
    h = Mix(h, uint32_t{0x53574131});  // "SWA1"
    h = Mix(h, static_cast<uint64_t>(windows.size()));
    for (int64_t w : windows) h = Mix(h, w);
    h = Mix(h, static_cast<uint64_t>(rope_local_layers.size()));
    for (uint8_t r : rope_local_layers) h = Mix(h, r);
    h = Mix(h, rope_local.freq_base);
    h = Mix(h, rope_local.freq_scale);
  }
  return h;
}

bool StateLayout::KvTypesOf(uint64_t fingerprint, DType* k, DType* v) const {
  constexpr DType kTypes[] = {DType::kF16, DType::kF32, DType::kQ8_0, DType::kQ4_0};
  StateLayout other = *this;
  for (DType kt : kTypes) {
    for (DType vt : kTypes) {
      other.k_type = kt;
      other.v_type = vt;
      if (other.Fingerprint() == fingerprint) {
        *k = kt;
        *v = vt;
        return true;
      }
    }
  }
  return false;
}

SequenceState::SequenceState(std::shared_ptr<const StateLayout> layout)
    : layout_(std::move(layout)) {
  size_t offset = 0;
  for (size_t i = 0; i < layout_->kv_dims.size(); ++i) {
    k_row_bytes_.push_back(layout_->k_row_bytes(i));
    v_row_bytes_.push_back(layout_->v_row_bytes(i));
    layer_offset_.push_back(offset);
    offset += k_row_bytes_.back() + v_row_bytes_.back();
  }
  recurrent_.assign(layout_->recurrent_bytes() / sizeof(float), 0.0f);
}

size_t SequenceState::SizeBytes() const {
  size_t n = static_cast<size_t>(n_tokens_) * layout_->kv_bytes_per_token() + layout_->recurrent_bytes();
  for (const auto& s : snapshots_) n += s.data.size() * sizeof(float);
  return n;
}

void SequenceState::CommitTokens(int64_t n) {
  n_tokens_ = n;
  for (auto& s : snapshots_) {
    if (s.n_tokens <= n) s.complete = true;
  }
}

bool SequenceState::CanCutAt(int64_t n) const {
  if (n < 0 || n > n_tokens_) return false;
  if (!has_recurrent() || n == n_tokens_ || n == 0) return true;
  for (const auto& s : snapshots_) {
    if (s.complete && s.n_tokens == n) return true;
  }
  return false;
}

int64_t SequenceState::NewestCutAtOrBefore(int64_t n) const {
  n = std::clamp<int64_t>(n, 0, n_tokens_);
  if (!has_recurrent()) return n;
  int64_t cut = 0;
  if (n == n_tokens_) return n;
  for (const auto& s : snapshots_) {
    if (s.complete && s.n_tokens <= n) cut = std::max(cut, s.n_tokens);
  }
  return cut;
}

void SequenceState::RequestSnapshot(int64_t n) {
  if (!has_recurrent() || n <= n_tokens_) return;
  for (const auto& s : snapshots_) {
    if (s.n_tokens == n) return;
  }
  if (snapshots_.size() >= kMaxSnapshots) snapshots_.erase(snapshots_.begin());
  RecurrentSnapshot snap;
  snap.n_tokens = n;
  snap.data.resize(recurrent_.size());
  auto at = std::upper_bound(snapshots_.begin(), snapshots_.end(), n,
                             [](int64_t v, const RecurrentSnapshot& s) { return v < s.n_tokens; });
  snapshots_.insert(at, std::move(snap));
}

std::vector<int64_t> SequenceState::SnapshotPositions() const {
  std::vector<int64_t> out;
  for (const auto& s : snapshots_) {
    if (s.complete) out.push_back(s.n_tokens);
  }
  return out;
}

bool SequenceState::DropSnapshot(int64_t n) {
  return std::erase_if(snapshots_, [n](const RecurrentSnapshot& s) { return s.n_tokens == n; }) > 0;
}

float* SequenceState::PendingSnapshot(int64_t n, size_t rec_layer) {
  for (auto& s : snapshots_) {
    if (s.n_tokens == n && !s.complete) {
      return s.data.data() + layout_->recurrent[rec_layer].offset;
    }
  }
  return nullptr;
}

size_t SequenceState::MemoryBytes() const {
  size_t n = recurrent_.capacity() * sizeof(float);
  for (const auto& snap : snapshots_) n += snap.data.capacity() * sizeof(float);
  if (!kv_.lazy()) return n + kv_.allocated();
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto pages = [&](size_t bytes) { return (bytes + page - 1) / page * page; };
  for (size_t i = 0; i < k_row_bytes_.size(); ++i) {
    n += pages(static_cast<size_t>(populated_) * k_row_bytes_[i]);
    n += pages(static_cast<size_t>(populated_) * v_row_bytes_[i]);
  }
  return n;
}

void SequenceState::DiscardRowsFrom(int64_t n) {
  if (!kv_.lazy() || n >= populated_) return;
  for (size_t i = 0; i < k_row_bytes_.size(); ++i) {
    const size_t k_at = static_cast<size_t>(capacity_) * layer_offset_[i];
    const size_t v_at = k_at + static_cast<size_t>(capacity_) * k_row_bytes_[i];
    const auto rows = static_cast<size_t>(populated_ - n);
    kv_.Discard(k_at + static_cast<size_t>(n) * k_row_bytes_[i], rows * k_row_bytes_[i]);
    kv_.Discard(v_at + static_cast<size_t>(n) * v_row_bytes_[i], rows * v_row_bytes_[i]);
  }
  populated_ = n;
}

size_t SequenceState::CapacityBytes() const {
  size_t n = recurrent_.capacity() * sizeof(float);
  // A lazy block holds memory only for the rows written so far.
  n += kv_.lazy() ? static_cast<size_t>(populated_) * layout_->kv_bytes_per_token() : kv_.allocated();
  return n;
}

Status SequenceState::Reserve(int64_t n) {
  if (n > layout_->n_ctx) {
    return Status::ResourceExhausted("sequence needs " + std::to_string(n) +
                                     " positions, context holds " +
                                     std::to_string(layout_->n_ctx));
  }
  auto out_of_memory = [&](int64_t rows) {
    return Status::ResourceExhausted("out of memory: " + std::to_string(rows) + " more KV rows (" +
                                     std::to_string(static_cast<size_t>(rows) * layout_->kv_bytes_per_token() >> 20) +
                                     " MiB) cannot be backed for a state of " + std::to_string(n_tokens_) +
                                     " tokens");
  };
  if (n <= capacity_) {
    if (kv_.lazy() && n > populated_) {
      if (!PopulateRows(kv_, capacity_, populated_, n)) {
        // Whatever was backed now is given back; the state is unchanged.
        const int64_t had = populated_;
        populated_ = n;
        DiscardRowsFrom(had);
        return out_of_memory(n - had);
      }
      populated_ = n;
    }
    return Status::Ok();
  }
  // Grow once, to room for the whole context in address space that is backed
  // only where rows are written: no state ever moves again, whatever its
  // chat grows to (a move copies every row). Only where that address space
  // is refused, grow by half in real memory.
  int64_t cap = layout_->n_ctx;
  LargeBuffer next = LargeBuffer::Lazy(static_cast<size_t>(cap) * layout_->kv_bytes_per_token());
  if (next.data() == nullptr) {
    cap = std::max(n, capacity_ + capacity_ / 2);
    cap = (cap + kGrowTokens - 1) / kGrowTokens * kGrowTokens;
    cap = std::min(cap, layout_->n_ctx);
    next = LargeBuffer::TryAllocate(static_cast<size_t>(cap) * layout_->kv_bytes_per_token());
    if (next.data() == nullptr) return out_of_memory(cap - capacity_);
  }
  // Every row of the old capacity moves (a forward pass may have written
  // rows it has not committed yet).
  const int64_t backed = std::max(capacity_, n);
  if (!PopulateRows(next, cap, 0, backed)) return out_of_memory(backed);
  CopyRows(capacity_, next, cap);
  kv_ = std::move(next);
  capacity_ = cap;
  populated_ = kv_.lazy() ? backed : 0;
  return Status::Ok();
}

bool SequenceState::PopulateRows(const LargeBuffer& buf, int64_t capacity, int64_t from,
                                 int64_t to) const {
  if (!buf.lazy() || to <= from) return true;
  const auto n = static_cast<int64_t>(k_row_bytes_.size()) * 2;
  std::atomic<bool> ok{true};
  ForEachPiece(n, static_cast<size_t>(to - from) * layout_->kv_bytes_per_token(), [&](int64_t piece) {
    const size_t i = static_cast<size_t>(piece / 2);
    size_t at = static_cast<size_t>(capacity) * layer_offset_[i];
    if (piece % 2 == 1) at += static_cast<size_t>(capacity) * k_row_bytes_[i];
    const size_t rb = piece % 2 == 1 ? v_row_bytes_[i] : k_row_bytes_[i];
    if (!buf.Populate(at + static_cast<size_t>(from) * rb, static_cast<size_t>(to - from) * rb)) {
      ok = false;
    }
  });
  return ok;
}

void SequenceState::ForEachPiece(int64_t n, size_t bytes, const std::function<void(int64_t)>& fn) const {
  constexpr size_t kParallelBytes = size_t{4} << 20;
  if (pool_ != nullptr && pool_->n_threads() > 1 && bytes >= kParallelBytes) {
    pool_->ParallelFor(n, [&](int64_t i, int) { fn(i); });
  } else {
    for (int64_t i = 0; i < n; ++i) fn(i);
  }
}

void SequenceState::CopyRows(int64_t n_rows, const LargeBuffer& to, int64_t to_capacity) const {
  // One piece per (layer, K or V).
  const auto n = static_cast<int64_t>(k_row_bytes_.size()) * 2;
  ForEachPiece(n, static_cast<size_t>(n_rows) * layout_->kv_bytes_per_token(), [&](int64_t piece) {
    const size_t i = static_cast<size_t>(piece / 2);
    const size_t bytes =
        static_cast<size_t>(n_rows) * (piece % 2 == 0 ? k_row_bytes_[i] : v_row_bytes_[i]);
    if (bytes == 0) return;
    uint8_t* k_to = to.data() + static_cast<size_t>(to_capacity) * layer_offset_[i];
    if (piece % 2 == 0) {
      std::memcpy(k_to, k_base(i), bytes);
    } else {
      std::memcpy(k_to + static_cast<size_t>(to_capacity) * k_row_bytes_[i], v_base(i), bytes);
    }
  });
}

Status SequenceState::Rebind(std::shared_ptr<const StateLayout> layout) {
  if (layout.get() == layout_.get()) return Status::Ok();
  if (layout->Fingerprint() != layout_->Fingerprint()) {
    return Status::InvalidArgument("the sequence state is laid out for another model or KV type (" +
                                   layout_->KvTypesText() + " rows) than the runner's (" +
                                   layout->KvTypesText() + " rows)");
  }
  if (n_tokens_ > layout->n_ctx) {
    return Status::InvalidArgument("the sequence state holds " + std::to_string(n_tokens_) +
                                   " tokens, more than the context size " + std::to_string(layout->n_ctx));
  }
  layout_ = std::move(layout);
  return Status::Ok();
}

Status SequenceState::Truncate(int64_t n) {
  if (n < 0 || n > n_tokens_) {
    return Status::InvalidArgument("truncate to " + std::to_string(n) + " tokens, state holds " +
                                   std::to_string(n_tokens_));
  }
  if (has_recurrent() && n != n_tokens_) {
    if (!CanCutAt(n)) {
      return Status::InvalidArgument("recurrent state cannot be rewound from " +
                                     std::to_string(n_tokens_) + " to " + std::to_string(n) +
                                     " tokens (no snapshot there)");
    }
    if (n == 0) {
      std::fill(recurrent_.begin(), recurrent_.end(), 0.0f);
    } else {
      for (const auto& s : snapshots_) {
        if (s.complete && s.n_tokens == n) recurrent_ = s.data;
      }
    }
  }
  // Snapshots after the cut (and pending ones) describe tokens that are gone.
  std::erase_if(snapshots_, [n](const RecurrentSnapshot& s) { return s.n_tokens > n || !s.complete; });
  n_tokens_ = n;
  DiscardRowsFrom(n);
  return Status::Ok();
}

Result<std::unique_ptr<SequenceState>> SequenceState::ClonePrefix(int64_t n) const {
  if (n < 0 || n > n_tokens_) {
    return Status::InvalidArgument("copy of " + std::to_string(n) + " tokens, state holds " +
                                   std::to_string(n_tokens_));
  }
  if (!CanCutAt(n)) {
    return Status::InvalidArgument("recurrent state describes " + std::to_string(n_tokens_) +
                                   " tokens and has no snapshot at " + std::to_string(n) +
                                   ": it cannot be copied as a prefix of that length");
  }
  auto out = std::make_unique<SequenceState>(layout_);
  out->pool_ = pool_;
  // A copy continues its chat at once: give it room for the whole context
  // (backed only where written, see Reserve) so its next turn never moves it;
  // exact size where that address space is refused.
  out->kv_ = LargeBuffer::Lazy(static_cast<size_t>(layout_->n_ctx) * layout_->kv_bytes_per_token());
  out->capacity_ = layout_->n_ctx;
  if (out->kv_.data() == nullptr) {
    out->kv_ = LargeBuffer::TryAllocate(static_cast<size_t>(n) * layout_->kv_bytes_per_token());
    out->capacity_ = n;
    if (n > 0 && out->kv_.data() == nullptr) {
      return Status::ResourceExhausted("out of memory: a copy of " + std::to_string(n) + " tokens (" +
                                       std::to_string(static_cast<size_t>(n) * layout_->kv_bytes_per_token() >> 20) +
                                       " MiB) cannot be had");
    }
  }
  if (!out->PopulateRows(out->kv_, out->capacity_, 0, n)) {
    return Status::ResourceExhausted("out of memory: a copy of " + std::to_string(n) + " tokens (" +
                                     std::to_string(static_cast<size_t>(n) * layout_->kv_bytes_per_token() >> 20) +
                                     " MiB) cannot be backed");
  }
  out->populated_ = out->kv_.lazy() ? n : 0;
  CopyRows(n, out->kv_, out->capacity_);
  out->n_tokens_ = n;
  if (has_recurrent() && n != 0) {
    if (n == n_tokens_) {
      out->recurrent_ = recurrent_;
    } else {
      for (const auto& s : snapshots_) {
        if (s.complete && s.n_tokens == n) out->recurrent_ = s.data;
      }
    }
  }
  for (const auto& s : snapshots_) {
    if (s.complete && s.n_tokens <= n) out->snapshots_.push_back(s);
  }
  return out;
}

Status SequenceState::RemoveSpan(int64_t p0, int64_t p1) {
  if (p0 < 0 || p1 < p0 || p1 > n_tokens_) {
    return Status::InvalidArgument("remove span [" + std::to_string(p0) + ", " +
                                   std::to_string(p1) + ") of a state holding " +
                                   std::to_string(n_tokens_) + " tokens");
  }
  if (has_recurrent() && p1 > p0) {
    return Status::InvalidArgument("recurrent state cannot drop a span of tokens");
  }
  const int64_t d = p1 - p0;
  if (d == 0) return Status::Ok();
  const int64_t n_move = n_tokens_ - p1;
  std::vector<float> row;
  for (size_t i = 0; i < k_row_bytes_.size(); ++i) {
    // The keys carry their scale (attention factor, YaRN) already: rotate
    // only, with the layer's own RoPE (local layers: their base).
    kernels::RopeParams shift = layout_->rope_params(i);
    shift.rotation_only = true;
    std::memmove(k_row(i, p0), k_row(i, p1), static_cast<size_t>(n_move) * k_row_bytes_[i]);
    std::memmove(v_row(i, p0), v_row(i, p1), static_cast<size_t>(n_move) * v_row_bytes_[i]);
    if (!layout_->rope_on(i)) continue;
    const int64_t dims = layout_->kv_dims[i];
    const int n_heads = static_cast<int>(dims / layout_->head_dim);
    row.resize(static_cast<size_t>(dims));
    for (int64_t p = p0; p < p0 + n_move; ++p) {
      uint8_t* k = k_row(i, p);
      // Quantized keys are dequantized, rotated and quantized again: one
      // more rounding (docs/state_format.md "Context shift").
      kernels::LoadKvRow(layout_->k_type, k, dims, row.data());
      kernels::Rope(row.data(), n_heads, static_cast<int>(layout_->head_dim), shift, -d);
      kernels::StoreKvRow(layout_->k_type, row.data(), dims, k);
    }
  }
  n_tokens_ -= d;
  DiscardRowsFrom(n_tokens_);
  return Status::Ok();
}

}  // namespace mx::models
