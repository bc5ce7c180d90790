#include "models/sequence_state.h"

#include <algorithm>
#include <cstring>

namespace mx::models {
namespace {

constexpr uint32_t kStateMagic = 0x5153584d;  // "MXSQ" little-endian
constexpr uint32_t kStateFormatVersion = 1;
constexpr size_t kHeaderBytes = 4 + 4 + 8 + 8;

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

void PutU32(std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); }
void PutU64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

StateLayout StateLayout::ForModel(const ModelConfig& c, DType kv_type, int64_t n_ctx) {
  StateLayout l;
  l.kv_type = kv_type;
  l.n_ctx = n_ctx;
  for (const auto& layer : c.layers) {
    if (layer.has_attention()) l.kv_dims.push_back(layer.n_kv_head * c.head_dim_k);
  }
  l.n_recurrent = c.n_recurrent_layers();
  if (l.n_recurrent > 0) {
    l.conv_floats = (c.ssm_d_conv - 1) * c.ssm_conv_channels();
    l.ssm_floats = c.ssm_d_state * c.ssm_d_inner;
  }
  l.use_rope = c.use_rope;
  l.rope = c.rope;
  l.head_dim = c.head_dim_k;
  return l;
}

size_t StateLayout::kv_row_bytes(size_t attn_layer) const {
  return RowBytes(kv_type, kv_dims[attn_layer]);
}

size_t StateLayout::kv_bytes_per_token() const {
  size_t n = 0;
  for (size_t i = 0; i < kv_dims.size(); ++i) n += 2 * kv_row_bytes(i);
  return n;
}

size_t StateLayout::recurrent_bytes() const {
  return static_cast<size_t>(n_recurrent * (conv_floats + ssm_floats)) * sizeof(float);
}

uint64_t StateLayout::Fingerprint() const {
  uint64_t h = 14695981039346656037ull;
  h = Mix(h, kStateLayoutVersion);
  h = Mix(h, static_cast<uint32_t>(kv_type));
  h = Mix(h, static_cast<uint64_t>(kv_dims.size()));
  for (int64_t d : kv_dims) h = Mix(h, d);
  h = Mix(h, n_recurrent);
  h = Mix(h, conv_floats);
  h = Mix(h, ssm_floats);
  h = Mix(h, static_cast<uint8_t>(use_rope));
  h = Mix(h, rope.n_rot);
  h = Mix(h, rope.freq_base);
  h = Mix(h, rope.freq_scale);
  h = Mix(h, static_cast<int>(rope.mode));
  h = Mix(h, head_dim);
  return h;
}

SequenceState::SequenceState(std::shared_ptr<const StateLayout> layout)
    : layout_(std::move(layout)) {
  k_.resize(layout_->kv_dims.size());
  v_.resize(layout_->kv_dims.size());
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

float* SequenceState::PendingSnapshot(int64_t n, size_t rec_layer) {
  for (auto& s : snapshots_) {
    if (s.n_tokens == n && !s.complete) {
      return s.data.data() + rec_layer * static_cast<size_t>(layout_->conv_floats + layout_->ssm_floats);
    }
  }
  return nullptr;
}

size_t SequenceState::CapacityBytes() const {
  size_t n = recurrent_.capacity() * sizeof(float);
  for (size_t i = 0; i < k_.size(); ++i) n += k_[i].capacity() + v_[i].capacity();
  return n;
}

Status SequenceState::Reserve(int64_t n) {
  if (n > layout_->n_ctx) {
    return Status::ResourceExhausted("sequence needs " + std::to_string(n) +
                                     " positions, context holds " +
                                     std::to_string(layout_->n_ctx));
  }
  if (n <= capacity_) return Status::Ok();
  int64_t cap = std::max(n, capacity_ + capacity_ / 2);
  cap = (cap + kGrowTokens - 1) / kGrowTokens * kGrowTokens;
  cap = std::min(cap, layout_->n_ctx);
  for (size_t i = 0; i < k_.size(); ++i) {
    size_t bytes = static_cast<size_t>(cap) * layout_->kv_row_bytes(i);
    k_[i].resize(bytes);
    v_[i].resize(bytes);
  }
  capacity_ = cap;
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
  // Exact-size allocation: a copy is sized for what it holds, and grows later.
  for (size_t i = 0; i < k_.size(); ++i) {
    size_t bytes = static_cast<size_t>(n) * layout_->kv_row_bytes(i);
    out->k_[i].assign(k_[i].begin(), k_[i].begin() + static_cast<std::ptrdiff_t>(bytes));
    out->v_[i].assign(v_[i].begin(), v_[i].begin() + static_cast<std::ptrdiff_t>(bytes));
  }
  out->capacity_ = n;
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
  for (size_t i = 0; i < k_.size(); ++i) {
    const size_t rb = layout_->kv_row_bytes(i);
    std::memmove(k_[i].data() + p0 * rb, k_[i].data() + p1 * rb, static_cast<size_t>(n_move) * rb);
    std::memmove(v_[i].data() + p0 * rb, v_[i].data() + p1 * rb, static_cast<size_t>(n_move) * rb);
    if (!layout_->use_rope) continue;
    const int64_t dims = layout_->kv_dims[i];
    const int n_heads = static_cast<int>(dims / layout_->head_dim);
    row.resize(static_cast<size_t>(dims));
    for (int64_t p = p0; p < p0 + n_move; ++p) {
      uint8_t* k = k_[i].data() + p * rb;
      kernels::LoadKvRow(layout_->kv_type, k, dims, row.data());
      kernels::Rope(row.data(), n_heads, static_cast<int>(layout_->head_dim), layout_->rope, -d);
      kernels::StoreKvRow(layout_->kv_type, row.data(), dims, k);
    }
  }
  n_tokens_ -= d;
  return Status::Ok();
}

std::string SequenceState::Serialize() const {
  std::string out;
  out.reserve(kHeaderBytes + SizeBytes());
  PutU32(out, kStateMagic);
  PutU32(out, kStateFormatVersion);
  PutU64(out, layout_->Fingerprint());
  PutU64(out, static_cast<uint64_t>(n_tokens_));
  for (size_t i = 0; i < k_.size(); ++i) {
    size_t bytes = static_cast<size_t>(n_tokens_) * layout_->kv_row_bytes(i);
    out.append(reinterpret_cast<const char*>(k_[i].data()), bytes);
    out.append(reinterpret_cast<const char*>(v_[i].data()), bytes);
  }
  out.append(reinterpret_cast<const char*>(recurrent_.data()), recurrent_.size() * sizeof(float));
  // Complete snapshots: count, then (n_tokens, data) each.
  std::vector<const RecurrentSnapshot*> done;
  for (const auto& s : snapshots_) {
    if (s.complete) done.push_back(&s);
  }
  PutU32(out, static_cast<uint32_t>(done.size()));
  for (const RecurrentSnapshot* s : done) {
    PutU64(out, static_cast<uint64_t>(s->n_tokens));
    out.append(reinterpret_cast<const char*>(s->data.data()), s->data.size() * sizeof(float));
  }
  return out;
}

Result<std::unique_ptr<SequenceState>> SequenceState::Deserialize(
    std::shared_ptr<const StateLayout> layout, std::string_view bytes) {
  if (bytes.size() < kHeaderBytes) {
    return Status::Corruption("state of " + std::to_string(bytes.size()) +
                              " bytes is shorter than its " + std::to_string(kHeaderBytes) +
                              "-byte header");
  }
  if (GetU32(bytes.data()) != kStateMagic) return Status::Corruption("state has a wrong magic");
  uint32_t version = GetU32(bytes.data() + 4);
  if (version != kStateFormatVersion) {
    return Status::NotSupported("state format version " + std::to_string(version) +
                                ", this engine reads version " +
                                std::to_string(kStateFormatVersion));
  }
  uint64_t fingerprint = GetU64(bytes.data() + 8);
  if (fingerprint != layout->Fingerprint()) {
    return Status::InvalidArgument("state layout does not match this model (fingerprint " +
                                   std::to_string(fingerprint) + ", expected " +
                                   std::to_string(layout->Fingerprint()) + ")");
  }
  uint64_t n = GetU64(bytes.data() + 16);
  if (n > static_cast<uint64_t>(layout->n_ctx)) {
    return Status::Corruption("state holds " + std::to_string(n) + " tokens, context is " +
                              std::to_string(layout->n_ctx));
  }
  const size_t body = kHeaderBytes + n * layout->kv_bytes_per_token() + layout->recurrent_bytes();
  if (bytes.size() < body + 4) {
    return Status::Corruption("state of " + std::to_string(n) + " tokens needs at least " +
                              std::to_string(body + 4) + " bytes, got " + std::to_string(bytes.size()));
  }
  const uint32_t n_snap = GetU32(bytes.data() + body);
  const size_t snap_bytes = 8 + layout->recurrent_bytes();
  if (n_snap > SequenceState::kMaxSnapshots || (n_snap > 0 && layout->n_recurrent == 0)) {
    return Status::Corruption("state lists " + std::to_string(n_snap) + " snapshots (at most " +
                              std::to_string(layout->n_recurrent > 0 ? SequenceState::kMaxSnapshots : 0) + ")");
  }
  size_t expected = body + 4 + n_snap * snap_bytes;
  if (bytes.size() != expected) {
    return Status::Corruption("state of " + std::to_string(n) + " tokens should be " +
                              std::to_string(expected) + " bytes, got " +
                              std::to_string(bytes.size()));
  }
  auto state = std::make_unique<SequenceState>(layout);
  MX_RETURN_IF_ERROR(state->Reserve(static_cast<int64_t>(n)));
  const char* p = bytes.data() + kHeaderBytes;
  for (size_t i = 0; i < state->k_.size(); ++i) {
    size_t rb = n * layout->kv_row_bytes(i);
    std::memcpy(state->k_[i].data(), p, rb);
    p += rb;
    std::memcpy(state->v_[i].data(), p, rb);
    p += rb;
  }
  // Dense models have no recurrent state (an empty vector: data() may be null).
  if (layout->recurrent_bytes() > 0) std::memcpy(state->recurrent_.data(), p, layout->recurrent_bytes());
  p += layout->recurrent_bytes() + 4;
  int64_t prev = 0;
  for (uint32_t i = 0; i < n_snap; ++i) {
    RecurrentSnapshot s;
    s.n_tokens = static_cast<int64_t>(GetU64(p));
    if (s.n_tokens <= prev || s.n_tokens > static_cast<int64_t>(n)) {
      return Status::Corruption("snapshot " + std::to_string(i) + " at " + std::to_string(s.n_tokens) +
                                " tokens is out of order or past the state's " + std::to_string(n) + " tokens");
    }
    prev = s.n_tokens;
    s.data.resize(state->recurrent_.size());
    std::memcpy(s.data.data(), p + 8, layout->recurrent_bytes());
    s.complete = true;
    p += snap_bytes;
    state->snapshots_.push_back(std::move(s));
  }
  state->n_tokens_ = static_cast<int64_t>(n);
  return state;
}

}  // namespace mx::models
