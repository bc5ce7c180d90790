// SequenceState's serialized form (docs/state_format.md): Serialize and its
// copy-free views, Deserialize, and StateLoader (loading a saved state in
// place). The state itself is in sequence_state.cc.
#include <algorithm>
#include <cstring>

#include "models/sequence_state.h"

namespace mx::models {
namespace {

constexpr uint32_t kStateMagic = 0x5153584d;  // "MXSQ" little-endian
constexpr uint32_t kStateFormatVersion = 2;
constexpr size_t kHeaderBytes = 4 + 4 + 8 + 8;

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

std::string SequenceState::Serialize() const {
  std::string out;
  out.reserve(kHeaderBytes + SizeBytes());
  PutU32(out, kStateMagic);
  PutU32(out, kStateFormatVersion);
  PutU64(out, layout_->Fingerprint());
  PutU64(out, static_cast<uint64_t>(n_tokens_));
  for (size_t i = 0; i < k_row_bytes_.size(); ++i) {
    const auto n = static_cast<size_t>(n_tokens_);
    out.append(reinterpret_cast<const char*>(k_data(i)), n * k_row_bytes_[i]);
    out.append(reinterpret_cast<const char*>(v_data(i)), n * v_row_bytes_[i]);
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

SerializedView SequenceState::SerializeView() const {
  SerializedView view;
  // Small pieces first, so that their bytes no longer move: the header,
  // then the snapshot count and each complete snapshot's position.
  std::vector<const RecurrentSnapshot*> done;
  for (const auto& s : snapshots_) {
    if (s.complete) done.push_back(&s);
  }
  std::string small;
  PutU32(small, kStateMagic);
  PutU32(small, kStateFormatVersion);
  PutU64(small, layout_->Fingerprint());
  PutU64(small, static_cast<uint64_t>(n_tokens_));
  PutU32(small, static_cast<uint32_t>(done.size()));
  for (const RecurrentSnapshot* s : done) PutU64(small, static_cast<uint64_t>(s->n_tokens));
  view.small.assign(small.begin(), small.end());
  const uint8_t* sp = view.small.data();
  auto add = [&view](const void* p, size_t n) {
    if (n == 0) return;
    view.parts.emplace_back(static_cast<const uint8_t*>(p), n);
    view.bytes += n;
  };
  add(sp, kHeaderBytes);
  for (size_t i = 0; i < k_row_bytes_.size(); ++i) {
    const auto n = static_cast<size_t>(n_tokens_);
    add(k_data(i), n * k_row_bytes_[i]);
    add(v_data(i), n * v_row_bytes_[i]);
  }
  add(recurrent_.data(), recurrent_.size() * sizeof(float));
  add(sp + kHeaderBytes, 4);
  for (size_t i = 0; i < done.size(); ++i) {
    add(sp + kHeaderBytes + 4 + 8 * i, 8);
    add(done[i]->data.data(), done[i]->data.size() * sizeof(float));
  }
  return view;
}

namespace {

// Why a state of `fingerprint` cannot load into `layout`: its KV types when
// the two differ only there, else the fingerprints.
Status LayoutMismatch(const StateLayout& layout, uint64_t fingerprint) {
  StateLayout other = layout;
  if (layout.KvTypesOf(fingerprint, &other.k_type, &other.v_type)) {
    return Status::InvalidArgument("state was made with KV cache type " + other.KvTypesText() +
                                   ", this model runs " + layout.KvTypesText());
  }
  return Status::InvalidArgument("state layout does not match this model (fingerprint " +
                                 std::to_string(fingerprint) + ", expected " +
                                 std::to_string(layout.Fingerprint()) + ")");
}

}  // namespace

Result<StateLoader> StateLoader::Prepare(std::shared_ptr<const StateLayout> layout, int64_t n_tokens,
                                         size_t bytes) {
  if (n_tokens < 0 || n_tokens > layout->n_ctx) {
    return Status::InvalidArgument("state holds " + std::to_string(n_tokens) + " tokens, context is " +
                                   std::to_string(layout->n_ctx));
  }
  const size_t n = static_cast<size_t>(n_tokens);
  const size_t rows = n * layout->kv_bytes_per_token();
  const size_t body = kHeaderBytes + rows + layout->recurrent_bytes();
  const size_t snap_bytes = 8 + layout->recurrent_bytes();
  const size_t max_snap = layout->n_recurrent > 0 ? SequenceState::kMaxSnapshots : 0;
  if (bytes < body + 4 || bytes > body + 4 + max_snap * snap_bytes || (bytes - body - 4) % snap_bytes != 0) {
    return Status::Corruption("state of " + std::to_string(n) + " tokens cannot be " + std::to_string(bytes) +
                              " bytes (" + std::to_string(body + 4) + " plus " + std::to_string(snap_bytes) +
                              " per snapshot, at most " + std::to_string(max_snap) + ")");
  }
  StateLoader loader;
  loader.n_tokens_ = n_tokens;
  loader.state_ = std::make_unique<SequenceState>(layout);
  SequenceState& st = *loader.state_;
  // An exact-size block (huge pages when large): a restore writes every row
  // at once, and fresh huge pages fault in far faster than normal ones. The
  // chat's next turn moves it into lazy room for the whole context (Reserve).
  st.kv_ = LargeBuffer::TryAllocate(static_cast<size_t>(n_tokens) * layout->kv_bytes_per_token());
  if (n_tokens > 0 && st.kv_.data() == nullptr) {
    return Status::ResourceExhausted("out of memory: a state of " + std::to_string(n_tokens) + " tokens (" +
                                     std::to_string(static_cast<size_t>(n_tokens) * layout->kv_bytes_per_token() >> 20) +
                                     " MiB) cannot be had");
  }
  st.capacity_ = n_tokens;
  loader.header_.resize(kHeaderBytes);
  loader.snapshots_.resize(bytes - body);
  loader.buffers_.emplace_back(loader.header_.data(), kHeaderBytes);
  for (size_t i = 0; i < st.k_row_bytes_.size(); ++i) {
    if (n == 0) continue;
    loader.buffers_.emplace_back(st.k_row(i, 0), n * st.k_row_bytes_[i]);
    loader.buffers_.emplace_back(st.v_row(i, 0), n * st.v_row_bytes_[i]);
  }
  if (layout->recurrent_bytes() > 0) {
    loader.buffers_.emplace_back(reinterpret_cast<uint8_t*>(st.recurrent_.data()), layout->recurrent_bytes());
  }
  loader.buffers_.emplace_back(loader.snapshots_.data(), loader.snapshots_.size());
  return loader;
}

Result<std::unique_ptr<SequenceState>> StateLoader::Finish() {
  if (state_ == nullptr) return Status::Internal("StateLoader::Finish called twice");
  const StateLayout& layout = state_->layout();
  const char* h = reinterpret_cast<const char*>(header_.data());
  if (GetU32(h) != kStateMagic) return Status::Corruption("state has a wrong magic");
  const uint32_t version = GetU32(h + 4);
  if (version != kStateFormatVersion) {
    return Status::NotSupported("state format version " + std::to_string(version) +
                                ", this engine reads version " + std::to_string(kStateFormatVersion));
  }
  const uint64_t fingerprint = GetU64(h + 8);
  if (fingerprint != layout.Fingerprint()) return LayoutMismatch(layout, fingerprint);
  const uint64_t n = GetU64(h + 16);
  if (n != static_cast<uint64_t>(n_tokens_)) {
    return Status::Corruption("state holds " + std::to_string(n) + " tokens, expected " +
                              std::to_string(n_tokens_));
  }
  const char* p = reinterpret_cast<const char*>(snapshots_.data());
  const uint32_t n_snap = GetU32(p);
  const size_t snap_bytes = 8 + layout.recurrent_bytes();
  if (n_snap > SequenceState::kMaxSnapshots || (n_snap > 0 && layout.n_recurrent == 0)) {
    return Status::Corruption("state lists " + std::to_string(n_snap) + " snapshots (at most " +
                              std::to_string(layout.n_recurrent > 0 ? SequenceState::kMaxSnapshots : 0) + ")");
  }
  if (snapshots_.size() != 4 + n_snap * snap_bytes) {
    return Status::Corruption("state of " + std::to_string(n) + " tokens with " + std::to_string(n_snap) +
                              " snapshots has " + std::to_string(snapshots_.size() - 4) +
                              " snapshot bytes, expected " + std::to_string(n_snap * snap_bytes));
  }
  p += 4;
  int64_t prev = 0;
  for (uint32_t i = 0; i < n_snap; ++i) {
    RecurrentSnapshot s;
    s.n_tokens = static_cast<int64_t>(GetU64(p));
    if (s.n_tokens <= prev || s.n_tokens > static_cast<int64_t>(n)) {
      return Status::Corruption("snapshot " + std::to_string(i) + " at " + std::to_string(s.n_tokens) +
                                " tokens is out of order or past the state's " + std::to_string(n) + " tokens");
    }
    prev = s.n_tokens;
    s.data.resize(state_->recurrent_.size());
    std::memcpy(s.data.data(), p + 8, layout.recurrent_bytes());
    s.complete = true;
    p += snap_bytes;
    state_->snapshots_.push_back(std::move(s));
  }
  state_->n_tokens_ = static_cast<int64_t>(n);
  return std::move(state_);
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
  if (GetU64(bytes.data() + 8) != layout->Fingerprint()) {
    return LayoutMismatch(*layout, GetU64(bytes.data() + 8));
  }
  uint64_t n = GetU64(bytes.data() + 16);
  if (n > static_cast<uint64_t>(layout->n_ctx)) {
    return Status::Corruption("state holds " + std::to_string(n) + " tokens, context is " +
                              std::to_string(layout->n_ctx));
  }
  // The same checks and placement as a load in place, from one buffer.
  MX_ASSIGN_OR_RETURN(StateLoader loader,
                      StateLoader::Prepare(std::move(layout), static_cast<int64_t>(n), bytes.size()));
  const char* p = bytes.data();
  for (const std::span<uint8_t>& b : loader.buffers()) {
    std::memcpy(b.data(), p, b.size());
    p += b.size();
  }
  return loader.Finish();
}

}  // namespace mx::models
