#include "cache/disk_store/disk_store.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <utility>

#include "core/logging.h"

namespace mx::cache {
namespace {

constexpr char kPolicyFileName[] = "prompt_cache_policy.json";

std::string MiB(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

// Runs fn(i, thread) for i in [0, n), on the pool when one is given;
// thread < Threads(pool).
int Threads(ThreadPool* pool) { return pool != nullptr ? std::max(1, pool->n_threads()) : 1; }
void ForEach(ThreadPool* pool, int64_t n, const std::function<void(int64_t, int)>& fn) {
  if (pool != nullptr && n > 1 && pool->n_threads() > 1) {
    pool->ParallelFor(n, fn);
  } else {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
  }
}

// Bytes read per pread while loading: small enough that a piece is still in
// cache when it is decrypted in place right after.
constexpr uint64_t kReadPiece = uint64_t{256} << 10;

// A byte range split over several buffers (the plaintext of a file as the
// metadata and the state's own memory).
class Pieces {
 public:
  Pieces() = default;
  explicit Pieces(std::vector<std::span<uint8_t>> parts) : parts_(std::move(parts)) {
    starts_.reserve(parts_.size());
    for (const auto& p : parts_) {
      starts_.push_back(total_);
      total_ += p.size();
    }
  }
  uint64_t total() const { return total_; }
  const std::vector<std::span<uint8_t>>& parts() const { return parts_; }
  // Calls fn(pointer, bytes) for the pieces of the buffers that hold the
  // range [begin, begin + n), in order. REQUIRES: begin + n <= total().
  template <typename Fn>
  void ForRange(uint64_t begin, uint64_t n, Fn&& fn) const {
    size_t i = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin()) - 1;
    for (uint64_t at = begin, end = begin + n; at < end; ++i) {
      const uint64_t from = at - starts_[i];
      const uint64_t len = std::min<uint64_t>(parts_[i].size() - from, end - at);
      if (len > 0) fn(parts_[i].data() + from, len);
      at += len;
    }
  }

 private:
  std::vector<std::span<uint8_t>> parts_;
  std::vector<uint64_t> starts_;
  uint64_t total_ = 0;
};

Status FirstError(const std::vector<Status>& statuses) {
  for (const Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

struct DiskStore::Opened {
  RecordMeta meta;
  std::vector<int32_t> tokens;
  size_t plaintext_bytes = 0;
  size_t payload_offset = 0;
  uint64_t file_bytes = 0;
};

std::string StartupReport::ToString() const {
  std::string s = std::to_string(files_ok) + " saved caches ok (" + MiB(bytes_ok) + "); removed " +
                  std::to_string(removed_damaged) + " damaged, " +
                  std::to_string(removed_other_key) + " sealed with another key, " +
                  std::to_string(removed_unsupported) + " of another format version, " +
                  std::to_string(removed_temporaries) + " stale temporaries (" +
                  MiB(removed_bytes) + ")";
  if (ignored > 0) s += "; " + std::to_string(ignored) + " unknown files left alone";
  if (errors > 0) s += "; " + std::to_string(errors) + " files could not be checked";
  return s;
}

DiskStore::DiskStore(Env* env, std::string dir, const KeyStore& key,
                     const DiskStoreOptions& options)
    : env_(env),
      dir_(std::move(dir)),
      key_(key.key()),
      key_id_(key.key_id()),
      chunk_bytes_(options.chunk_bytes),
      limits_(options.limits) {}

DiskStore::~DiskStore() = default;

Result<std::unique_ptr<DiskStore>> DiskStore::Open(Env* env, const std::string& dir,
                                                   const KeyStore& key,
                                                   const DiskStoreOptions& options) {
  if (!key.enabled()) {
    return Status::InvalidArgument("saved caches need a key: " + key.disabled_reason());
  }
  if (options.chunk_bytes < kMinChunkBytes || options.chunk_bytes > kMaxChunkBytes) {
    return Status::InvalidArgument("chunk_bytes " + std::to_string(options.chunk_bytes) +
                                   " outside [" + std::to_string(kMinChunkBytes) + ", " +
                                   std::to_string(kMaxChunkBytes) + "]");
  }
  if (dir.empty()) return Status::InvalidArgument("empty saved-cache folder path");
  MX_RETURN_IF_ERROR(env->CreateDirs(dir, 0700));
  return std::unique_ptr<DiskStore>(new DiskStore(env, dir, key, options));
}

std::string DiskStore::PathOf(std::string_view name) const { return JoinPath(dir_, name); }

Result<DiskStore::Opened> DiskStore::ReadVerified(const std::string& id, ThreadPool* pool,
                                                  const PlaintextPlacer* place,
                                                  Problem* problem) const {
  *problem = Problem::kDamaged;
  const std::string ctx = "saved cache " + id;
  FileId file_id;
  if (!ParseFileId(id, &file_id)) return Status::InvalidArgument(ctx + ": not a saved-cache id");
  // Positional reads, not a memory map: a file cut short while it is read
  // must give an error, never a SIGBUS.
  auto file_or = env_->NewRandomAccessFile(PathOf(CacheFileName(id)));
  if (!file_or.ok()) {
    *problem = file_or.status().code() == Status::Code::kNotFound ? Problem::kMissing : Problem::kIo;
    return file_or.status();
  }
  const RandomAccessFile& file = *file_or.value();
  const uint64_t file_bytes = file.size();

  uint8_t header_bytes[kDiskHeaderBytes] = {};
  auto got = file.Read(0, kDiskHeaderBytes, reinterpret_cast<char*>(header_bytes));
  if (!got.ok()) {
    *problem = Problem::kIo;
    return got.status();
  }
  DiskHeader header;
  Status st = DecodeHeader(std::span<const uint8_t>(header_bytes, got.value()), &header);
  if (!st.ok()) {
    if (st.code() == Status::Code::kNotSupported) *problem = Problem::kUnsupported;
    return st.WithContext(ctx);
  }
  if (header.key_id != key_id_) {
    *problem = Problem::kOtherKey;
    return Status::Corruption(ctx + ": sealed with another key (key id " + ToHex(header.key_id) +
                              ", ours " + ToHex(key_id_) + ")");
  }
  auto layout_or = LayoutForFileSize(file_bytes, header.chunk_bytes);
  if (!layout_or.ok()) return layout_or.status().WithContext(ctx);
  const ChunkLayout layout = layout_or.value();
  auto file_key_or = DeriveFileKey(key_, header.salt);
  if (!file_key_or.ok()) {
    *problem = Problem::kIo;
    return file_key_or.status();
  }
  const FileKey& file_key = file_key_or.value();

  Opened out;
  out.file_bytes = file_bytes;
  out.plaintext_bytes = layout.plaintext_bytes;
  const uint64_t chunk = header.chunk_bytes;
  const uint64_t stride = chunk + kTagBytes;
  const int n_threads = Threads(pool);
  // With a placer every chunk is read straight into its final memory and
  // opened there, all chunks in parallel. Without one (a check) chunks open
  // in batches of n_threads into one buffer per batch slot, and only the
  // metadata bytes are kept.
  Pieces dest;
  if (place != nullptr) {
    auto buffers = (*place)(layout.plaintext_bytes);
    if (!buffers.ok()) {
      // Corruption: the file does not fit what the index knows of it.
      *problem = buffers.status().code() == Status::Code::kCorruption ? Problem::kDamaged : Problem::kRefused;
      return buffers.status();
    }
    dest = Pieces(std::move(buffers).value());
    if (dest.total() != layout.plaintext_bytes || dest.parts().empty()) {
      *problem = Problem::kRefused;
      return Status::Internal(ctx + ": the load buffers hold " + std::to_string(dest.total()) +
                              " bytes, the plaintext " + std::to_string(layout.plaintext_bytes));
    }
  }
  const uint64_t batch = place != nullptr ? layout.n_chunks : static_cast<uint64_t>(n_threads);
  std::unique_ptr<uint8_t[]> slots;
  if (place == nullptr) slots = std::make_unique_for_overwrite<uint8_t[]>(batch * chunk);
  std::vector<uint8_t> meta_bytes;  // check: the plaintext's first bytes
  std::optional<uint64_t> meta_need;
  std::vector<std::unique_ptr<GcmStream>> streams(static_cast<size_t>(n_threads));
  std::vector<Status> statuses(static_cast<size_t>(batch));
  std::vector<uint8_t> io_failed(static_cast<size_t>(batch));  // not vector<bool>: written by several threads
  for (uint64_t first = 0; first < layout.n_chunks; first += batch) {
    const uint64_t n = std::min(batch, layout.n_chunks - first);
    std::fill(io_failed.begin(), io_failed.end(), 0);
    ForEach(pool, static_cast<int64_t>(n), [&](int64_t k, int thread) {
      const uint64_t index = first + static_cast<uint64_t>(k);
      const bool last = index + 1 == layout.n_chunks;
      const uint64_t plain_n = last ? layout.last_chunk_bytes : chunk;
      const uint64_t offset = kDiskHeaderBytes + index * stride;
      auto& gcm = streams[static_cast<size_t>(thread)];
      if (!gcm) gcm = std::make_unique<GcmStream>();
      uint8_t aad[kChunkAadBytes];
      MakeChunkAad(header_bytes, file_id, index, last, aad);
      Status& status = statuses[static_cast<size_t>(k)];
      status = gcm->BeginOpen(file_key.key, ChunkNonce(file_key, index), aad);
      // Read each piece into its destination and decrypt it there while it
      // is still in cache.
      uint64_t at = offset;
      auto read_open = [&](uint8_t* dst, uint64_t len) {
        for (uint64_t done = 0; status.ok() && done < len;) {
          const uint64_t piece = std::min<uint64_t>(kReadPiece, len - done);
          auto read = file.Read(at, piece, reinterpret_cast<char*>(dst + done));
          if (!read.ok() || read.value() != piece) {
            io_failed[static_cast<size_t>(k)] = read.ok() ? 0 : 1;
            status = read.ok() ? Status::Corruption(ctx + ": file shrank while being read")
                               : read.status();
            return;
          }
          status = gcm->Update(dst + done, dst + done, piece);
          at += piece;
          done += piece;
        }
      };
      if (place != nullptr) {
        dest.ForRange(index * chunk, plain_n, read_open);
      } else {
        read_open(slots.get() + static_cast<uint64_t>(k) * chunk, plain_n);
      }
      if (!status.ok()) return;
      uint8_t tag[kTagBytes];
      auto read = file.Read(at, kTagBytes, reinterpret_cast<char*>(tag));
      if (!read.ok() || read.value() != kTagBytes) {
        io_failed[static_cast<size_t>(k)] = read.ok() ? 0 : 1;
        status = read.ok() ? Status::Corruption(ctx + ": file shrank while being read") : read.status();
        return;
      }
      if (Status s = gcm->FinishOpen(tag); !s.ok()) {
        status = s.code() != Status::Code::kCorruption
                     ? s
                     : Status::Corruption(ctx + ": AEAD tag mismatch at chunk " + std::to_string(index) +
                                          " (offset " + std::to_string(offset) + " of " +
                                          std::to_string(file_bytes) + ")");
      }
    });
    for (uint64_t k = 0; k < n; ++k) {
      if (io_failed[k]) {
        *problem = Problem::kIo;
        return statuses[k];
      }
    }
    MX_RETURN_IF_ERROR(FirstError(statuses));
    // Keep the plaintext's first bytes until they hold the metadata.
    for (uint64_t k = 0; place == nullptr && k < n; ++k) {
      if (meta_need && meta_bytes.size() >= *meta_need) break;
      const uint64_t index = first + k;
      const uint64_t plain_n = index + 1 == layout.n_chunks ? layout.last_chunk_bytes : chunk;
      const uint8_t* p = slots.get() + k * chunk;
      meta_bytes.insert(meta_bytes.end(), p, p + plain_n);
      meta_need = MetadataBytes(meta_bytes);
    }
  }
  // A placer puts the metadata in its first buffer.
  std::span<const uint8_t> prefix =
      place != nullptr ? std::span<const uint8_t>(dest.parts()[0]) : std::span<const uint8_t>(meta_bytes);
  if (place == nullptr && meta_need && *meta_need < prefix.size()) prefix = prefix.first(*meta_need);
  st = ParseRecordPrefix(prefix, out.plaintext_bytes, &out.meta, &out.tokens, &out.payload_offset);
  if (!st.ok()) return st.WithContext(ctx);
  *problem = Problem::kNone;
  return out;
}

Status DiskStore::WriteSealed(const std::string& id, const SaveMeta& meta, std::span<const int32_t> tokens,
                              std::span<const std::span<const uint8_t>> payload, uint64_t payload_bytes,
                              ThreadPool* pool, uint64_t* file_bytes) {
  FileId file_id;
  ParseFileId(id, &file_id);
  DiskHeader header;
  header.key_id = key_id_;
  header.chunk_bytes = chunk_bytes_;
  MX_RETURN_IF_ERROR(env_->RandomBytes(header.salt.data(), header.salt.size()));
  uint8_t header_bytes[kDiskHeaderBytes];
  EncodeHeader(header, header_bytes);
  MX_ASSIGN_OR_RETURN(FileKey file_key, DeriveFileKey(key_, header.salt));

  RecordMeta record{meta.model.model_fingerprint, meta.model.state_layout_fingerprint,
                    meta.created_us, meta.last_used_us};
  const std::string metadata = EncodeMetadata(record, tokens, payload_bytes);
  // The plaintext is metadata || payload, gathered from its buffers as the
  // chunks are sealed (no copy of the payload is made).
  std::vector<std::span<uint8_t>> parts;
  parts.reserve(payload.size() + 1);
  parts.emplace_back(reinterpret_cast<uint8_t*>(const_cast<char*>(metadata.data())), metadata.size());
  for (const auto& p : payload) {
    if (!p.empty()) parts.emplace_back(const_cast<uint8_t*>(p.data()), p.size());
  }
  const Pieces plain(std::move(parts));
  const uint64_t total = plain.total();
  const uint64_t chunk = chunk_bytes_;
  const uint64_t n_chunks = (total + chunk - 1) / chunk;
  *file_bytes = SealedFileBytes(total, chunk_bytes_);

  const std::string temp = PathOf(TempFileName(id));
  const std::string final_path = PathOf(CacheFileName(id));
  MX_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                      env_->NewWritableFile(temp, 0600, /*exclusive=*/true));
  Status st = file->Append(
      std::string_view(reinterpret_cast<const char*>(header_bytes), kDiskHeaderBytes));

  // Seal a batch of chunks (in parallel) into buffers reused from batch to
  // batch, then append them in order.
  const int n_threads = Threads(pool);
  const int64_t batch = n_threads;
  std::unique_ptr<uint8_t[]> sealed =
      std::make_unique_for_overwrite<uint8_t[]>(static_cast<size_t>(batch) * (chunk + kTagBytes));
  std::vector<std::unique_ptr<GcmStream>> streams(static_cast<size_t>(n_threads));
  std::vector<Status> statuses(static_cast<size_t>(batch));
  for (uint64_t first = 0; st.ok() && first < n_chunks; first += static_cast<uint64_t>(batch)) {
    const int64_t n = static_cast<int64_t>(std::min<uint64_t>(batch, n_chunks - first));
    ForEach(pool, n, [&](int64_t k, int thread) {
      const uint64_t index = first + static_cast<uint64_t>(k);
      const bool last = index + 1 == n_chunks;
      const uint64_t begin = index * chunk;
      const uint64_t len = std::min(chunk, total - begin);
      auto& gcm = streams[static_cast<size_t>(thread)];
      if (!gcm) gcm = std::make_unique<GcmStream>();
      uint8_t aad[kChunkAadBytes];
      MakeChunkAad(header_bytes, file_id, index, last, aad);
      Status& status = statuses[static_cast<size_t>(k)];
      status = gcm->BeginSeal(file_key.key, ChunkNonce(file_key, index), aad);
      uint8_t* out = sealed.get() + static_cast<uint64_t>(k) * (chunk + kTagBytes);
      plain.ForRange(begin, len, [&](uint8_t* src, uint64_t n_bytes) {
        if (status.ok()) status = gcm->Update(src, out, n_bytes);
        out += n_bytes;
      });
      if (status.ok()) status = gcm->FinishSeal(out);
    });
    for (int64_t k = 0; st.ok() && k < n; ++k) st = statuses[static_cast<size_t>(k)];
    for (int64_t k = 0; st.ok() && k < n; ++k) {
      const uint64_t index = first + static_cast<uint64_t>(k);
      const uint64_t len = std::min(chunk, total - index * chunk) + kTagBytes;
      const uint8_t* out = sealed.get() + static_cast<uint64_t>(k) * (chunk + kTagBytes);
      st = file->Append(std::string_view(reinterpret_cast<const char*>(out), len));
    }
  }
  if (st.ok()) st = file->Sync();
  Status closed = file->Close();
  if (st.ok()) st = closed;
  if (st.ok()) st = env_->RenameFile(temp, final_path);
  if (!st.ok()) {
    env_->RemoveFile(temp);
    return st.WithContext("saving " + CacheFileName(id));
  }
  st = env_->SyncDir(dir_);
  if (!st.ok()) {
    // Published but maybe not durable: drop it rather than report a save
    // that a crash could undo.
    env_->RemoveFile(final_path);
    return st.WithContext("saving " + CacheFileName(id));
  }
  return Status::Ok();
}

Result<SavedEntryInfo> DiskStore::Save(const SaveMeta& meta, std::span<const int32_t> tokens,
                                       std::string_view payload, ThreadPool* pool) {
  const std::span<const uint8_t> part(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  return Save(meta, tokens, std::span<const std::span<const uint8_t>>(&part, 1), pool);
}

Result<SavedEntryInfo> DiskStore::Save(const SaveMeta& meta, std::span<const int32_t> tokens,
                                       std::span<const std::span<const uint8_t>> payload_parts,
                                       ThreadPool* pool) {
  uint64_t payload_bytes = 0;
  for (const auto& p : payload_parts) payload_bytes += p.size();
  const size_t fp_len = meta.model.model_fingerprint.size();
  if (fp_len == 0 || fp_len > kMaxModelFingerprintBytes) {
    return Status::InvalidArgument("model fingerprint of " + std::to_string(fp_len) +
                                   " bytes, expected 1.." +
                                   std::to_string(kMaxModelFingerprintBytes));
  }
  const uint64_t plaintext = MetadataBytesFor(fp_len, tokens.size()) + payload_bytes;
  const uint64_t file_bytes = SealedFileBytes(plaintext, chunk_bytes_);
  const uint64_t budget = limits().budget_bytes;
  if (file_bytes > budget) {
    return Status::ResourceExhausted("saved cache of " + std::to_string(file_bytes) +
                                     " bytes is larger than the whole disk budget (" +
                                     std::to_string(budget) + " bytes)");
  }

  SaveMeta m = meta;
  const uint64_t now = env_->WallMicros();
  if (m.created_us == 0) m.created_us = now;
  if (m.last_used_us == 0) m.last_used_us = now;
  FileId raw_id;
  MX_RETURN_IF_ERROR(env_->RandomBytes(raw_id.data(), raw_id.size()));
  const std::string id = ToHex(raw_id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_.insert(id);
  }
  uint64_t written_bytes = 0;
  Status st = WriteSealed(id, m, tokens, payload_parts, payload_bytes, pool, &written_bytes);
  std::lock_guard<std::mutex> lock(mu_);
  writing_.erase(id);
  if (!st.ok()) return st;
  Entry entry;
  entry.info.id = id;
  entry.info.model = m.model;
  entry.info.n_tokens = tokens.size();
  entry.info.tokens_hash = HashTokens(tokens);
  entry.info.file_bytes = written_bytes;
  entry.info.payload_bytes = payload_bytes;
  entry.info.created_us = m.created_us;
  entry.info.last_used_us = m.last_used_us;
  entry.tokens.assign(tokens.begin(), tokens.end());
  SavedEntryInfo info = entry.info;
  index_[id] = std::move(entry);
  return info;
}

std::vector<SavedEntryInfo> DiskStore::List() const {
  std::vector<SavedEntryInfo> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, e] : index_) out.push_back(e.info);
  }
  std::sort(out.begin(), out.end(), [](const SavedEntryInfo& a, const SavedEntryInfo& b) {
    return a.last_used_us != b.last_used_us ? a.last_used_us > b.last_used_us : a.id < b.id;
  });
  return out;
}

PrefixMatch DiskStore::FindLongestPrefix(const ModelBinding& model,
                                         std::span<const int32_t> tokens) const {
  PrefixMatch match;
  size_t other_best = 0;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, e] : index_) {
    const size_t n = std::min(e.tokens.size(), tokens.size());
    const size_t lcp = static_cast<size_t>(
        std::mismatch(e.tokens.begin(), e.tokens.begin() + static_cast<ptrdiff_t>(n), tokens.begin())
            .first -
        e.tokens.begin());
    if (!(e.info.model == model)) {
      other_best = std::max(other_best, lcp);
      continue;
    }
    if (lcp > match.common_prefix ||
        (lcp == match.common_prefix && lcp > 0 && e.info.last_used_us > match.entry.last_used_us)) {
      match.common_prefix = lcp;
      match.entry = e.info;
    }
  }
  match.found = match.common_prefix > 0;
  if (match.found) return match;
  match.entry = SavedEntryInfo{};
  if (index_.empty()) {
    match.why_none = checked_ ? "the disk cache is empty" : "the disk cache is still being checked";
  } else if (other_best > 0) {
    match.other_model = true;
    match.why_none = "the saved cache was made by another model";
  } else {
    match.why_none = "no saved cache shares a start with this prompt";
  }
  return match;
}

ShiftMatch DiskStore::FindShift(const ModelBinding& model, std::span<const int32_t> tokens,
                                int64_t min_kept) const {
  ShiftMatch best;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, e] : index_) {
    if (!(e.info.model == model)) continue;
    auto plan = PlanShift(e.tokens, tokens, min_kept);
    if (plan && (!best.found || plan->reused() > best.plan.reused())) {
      best.found = true;
      best.entry = e.info;
      best.plan = *plan;
    }
  }
  return best;
}

Result<LoadedEntry> DiskStore::Load(const std::string& id, const ModelBinding& model,
                                    ThreadPool* pool) {
  // One buffer for the whole plaintext; the payload is a view into it.
  std::unique_ptr<char[]> plaintext;
  PlaintextPlacer whole = [&](uint64_t plaintext_bytes) -> Result<std::vector<std::span<uint8_t>>> {
    plaintext = std::make_unique_for_overwrite<char[]>(plaintext_bytes);
    return std::vector<std::span<uint8_t>>{{reinterpret_cast<uint8_t*>(plaintext.get()), plaintext_bytes}};
  };
  MX_ASSIGN_OR_RETURN(LoadedEntry out, LoadWith(id, model, pool, whole));
  out.plaintext = std::move(plaintext);
  return out;
}

Result<LoadedEntry> DiskStore::LoadInto(const std::string& id, const ModelBinding& model, ThreadPool* pool,
                                        const PayloadPlacer& place) {
  SavedEntryInfo indexed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(id);
    if (it == index_.end()) return Status::NotFound("saved cache " + id + " is not in the index");
    indexed = it->second.info;
  }
  // The metadata's size follows from the (verified) index entry; the
  // record's own fields are checked against it once the file is open.
  std::unique_ptr<uint8_t[]> metadata;
  PlaintextPlacer split = [&](uint64_t plaintext_bytes) -> Result<std::vector<std::span<uint8_t>>> {
    const uint64_t meta_bytes = MetadataBytesFor(model.model_fingerprint.size(), indexed.n_tokens);
    if (meta_bytes > plaintext_bytes ||
        plaintext_bytes - meta_bytes != indexed.payload_bytes) {
      return Status::Corruption("saved cache " + id + ": the file's size does not match its index entry");
    }
    MX_ASSIGN_OR_RETURN(std::vector<std::span<uint8_t>> payload, place(indexed, indexed.payload_bytes));
    uint64_t placed = 0;
    for (const auto& p : payload) placed += p.size();
    if (placed != indexed.payload_bytes) {
      return Status::Internal("saved cache " + id + ": the placer gave " + std::to_string(placed) +
                              " bytes for a payload of " + std::to_string(indexed.payload_bytes));
    }
    metadata = std::make_unique_for_overwrite<uint8_t[]>(meta_bytes);
    std::vector<std::span<uint8_t>> parts;
    parts.reserve(payload.size() + 1);
    parts.emplace_back(metadata.get(), meta_bytes);
    for (const auto& p : payload) {
      if (!p.empty()) parts.push_back(p);
    }
    return parts;
  };
  MX_ASSIGN_OR_RETURN(LoadedEntry out, LoadWith(id, model, pool, split));
  if (out.payload_offset != MetadataBytesFor(model.model_fingerprint.size(), out.tokens.size())) {
    return Status::Corruption("saved cache " + id + ": its metadata does not match its index entry");
  }
  return out;
}

Result<LoadedEntry> DiskStore::LoadWith(const std::string& id, const ModelBinding& model, ThreadPool* pool,
                                        const PlaintextPlacer& place) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(id);
    if (it == index_.end()) return Status::NotFound("saved cache " + id + " is not in the index");
    if (!(it->second.info.model == model)) {
      return Status::InvalidArgument("saved cache " + id + " was made by another model");
    }
  }
  Problem problem = Problem::kNone;
  Result<Opened> opened = ReadVerified(id, pool, &place, &problem);
  if (!opened.ok()) {
    const bool bad = problem == Problem::kDamaged || problem == Problem::kOtherKey ||
                     problem == Problem::kUnsupported;
    if (bad) {
      MX_LOG(kWarn) << "saved caches: deleting " << opened.status().ToString();
      env_->RemoveFile(PathOf(CacheFileName(id)));
    }
    if (bad || problem == Problem::kMissing) {
      std::lock_guard<std::mutex> lock(mu_);
      index_.erase(id);
    }
    return opened.status();
  }
  Opened& o = opened.value();
  if (o.meta.model_fingerprint != model.model_fingerprint ||
      o.meta.layout_fingerprint != model.state_layout_fingerprint) {
    return Status::InvalidArgument("saved cache " + id + " was made by another model");
  }
  LoadedEntry out;
  const uint64_t now = env_->WallMicros();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(id);
    if (it != index_.end()) {
      it->second.info.last_used_us = std::max(it->second.info.last_used_us, now);
      out.info = it->second.info;
    }
  }
  if (out.info.id.empty()) {  // removed meanwhile; the bytes are still good
    out.info.id = id;
    out.info.model = model;
    out.info.n_tokens = o.tokens.size();
    out.info.tokens_hash = HashTokens(o.tokens);
    out.info.file_bytes = o.file_bytes;
    out.info.payload_bytes = o.plaintext_bytes - o.payload_offset;
    out.info.created_us = o.meta.created_us;
    out.info.last_used_us = now;
  }
  out.tokens = std::move(o.tokens);
  out.plaintext_bytes = o.plaintext_bytes;
  out.payload_offset = o.payload_offset;
  return out;
}

Result<SavedEntryInfo> DiskStore::Inspect(const std::string& id, ThreadPool* pool) const {
  Problem problem = Problem::kNone;
  MX_ASSIGN_OR_RETURN(Opened o, ReadVerified(id, pool, /*place=*/nullptr, &problem));
  SavedEntryInfo info;
  info.id = id;
  info.model = {o.meta.model_fingerprint, o.meta.layout_fingerprint};
  info.n_tokens = o.tokens.size();
  info.tokens_hash = HashTokens(o.tokens);
  info.file_bytes = o.file_bytes;
  info.payload_bytes = o.plaintext_bytes - o.payload_offset;
  info.created_us = o.meta.created_us;
  info.last_used_us = o.meta.last_used_us;
  return info;
}

Status DiskStore::Remove(const std::string& id) {
  bool indexed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    indexed = index_.erase(id) > 0;
  }
  FileId unused;
  if (!ParseFileId(id, &unused)) return Status::NotFound("saved cache " + id + ": not a saved-cache id");
  Status st = env_->RemoveFile(PathOf(CacheFileName(id)));
  if (st.code() == Status::Code::kNotFound && indexed) return Status::Ok();
  return st;
}

Result<RemovalStats> DiskStore::Purge() {
  MX_ASSIGN_OR_RETURN(std::vector<std::string> names, env_->ListDir(dir_));
  RemovalStats stats;
  Status first;
  for (const std::string& name : names) {
    std::string id;
    FileNameKind kind = ClassifyFileName(name, &id);
    if (kind == FileNameKind::kOther) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (writing_.count(id) > 0) continue;
      index_.erase(id);
    }
    const std::string path = PathOf(name);
    auto info = env_->GetFileInfo(path);
    Status st = env_->RemoveFile(path);
    if (st.ok()) {
      if (kind == FileNameKind::kCache) ++stats.files;
      if (info.ok()) stats.bytes += info.value().size_bytes;
    } else if (st.code() != Status::Code::kNotFound && first.ok()) {
      first = st;
    }
  }
  if (!first.ok()) return first;
  return stats;
}

Result<RemovalStats> DiskStore::EnforceLimits(uint64_t now_us) {
  std::vector<DiskRemoval> plan;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<DiskFileInfo> files;
    files.reserve(index_.size());
    for (const auto& [id, e] : index_) {
      files.push_back({id, e.info.file_bytes, e.info.created_us, e.info.last_used_us});
    }
    plan = PlanDiskEviction(files, limits_, now_us);
    for (const auto& r : plan) index_.erase(r.id);
  }
  RemovalStats stats;
  Status first;
  for (const auto& r : plan) {
    Status st = env_->RemoveFile(PathOf(CacheFileName(r.id)));
    if (st.ok() || st.code() == Status::Code::kNotFound) {
      ++stats.files;
      stats.bytes += r.bytes;
    } else if (first.ok()) {
      first = st;
    }
  }
  if (!first.ok()) return first;
  return stats;
}

void DiskStore::SetLimits(const DiskLimits& limits) {
  std::lock_guard<std::mutex> lock(mu_);
  limits_ = limits;
}

DiskLimits DiskStore::limits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return limits_;
}

StartupReport DiskStore::StartupCheck(ThreadPool* pool) {
  StartupReport report;
  auto names = env_->ListDir(dir_);
  if (!names.ok()) {
    MX_LOG(kWarn) << "saved caches: cannot list " << dir_ << ": " << names.status().ToString();
    ++report.errors;
    std::lock_guard<std::mutex> lock(mu_);
    checked_ = true;
    return report;
  }
  for (const std::string& name : names.value()) {
    std::string id;
    const FileNameKind kind = ClassifyFileName(name, &id);
    const std::string path = PathOf(name);
    if (kind == FileNameKind::kOther) {
      if (name != kKeyFileName && name != kPolicyFileName) ++report.ignored;
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (writing_.count(id) > 0) continue;
      auto it = index_.find(id);
      if (kind == FileNameKind::kCache && it != index_.end()) {
        ++report.files_ok;
        report.bytes_ok += it->second.info.file_bytes;
        continue;
      }
    }
    if (kind == FileNameKind::kTemp) {
      auto info = env_->GetFileInfo(path);
      if (env_->RemoveFile(path).ok()) {
        ++report.removed_temporaries;
        if (info.ok()) report.removed_bytes += info.value().size_bytes;
      } else {
        ++report.errors;
      }
      continue;
    }
    Problem problem = Problem::kNone;
    Result<Opened> opened = ReadVerified(id, pool, /*place=*/nullptr, &problem);
    if (opened.ok()) {
      Opened& o = opened.value();
      Entry e;
      e.info.id = id;
      e.info.model = {o.meta.model_fingerprint, o.meta.layout_fingerprint};
      e.info.n_tokens = o.tokens.size();
      e.info.tokens_hash = HashTokens(o.tokens);
      e.info.file_bytes = o.file_bytes;
      e.info.payload_bytes = o.plaintext_bytes - o.payload_offset;
      e.info.created_us = o.meta.created_us;
      e.info.last_used_us = o.meta.last_used_us;
      e.tokens = std::move(o.tokens);
      ++report.files_ok;
      report.bytes_ok += o.file_bytes;
      std::lock_guard<std::mutex> lock(mu_);
      index_.emplace(id, std::move(e));
      continue;
    }
    if (problem == Problem::kMissing) continue;  // removed meanwhile
    if (problem == Problem::kIo) {
      MX_LOG(kWarn) << "saved caches: " << opened.status().ToString();
      ++report.errors;
      continue;
    }
    auto info = env_->GetFileInfo(path);
    MX_LOG(kInfo) << "saved caches: deleting " << opened.status().ToString();
    if (!env_->RemoveFile(path).ok()) {
      ++report.errors;
      continue;
    }
    if (info.ok()) report.removed_bytes += info.value().size_bytes;
    if (problem == Problem::kOtherKey) {
      ++report.removed_other_key;
    } else if (problem == Problem::kUnsupported) {
      ++report.removed_unsupported;
    } else {
      ++report.removed_damaged;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  checked_ = true;
  return report;
}

bool DiskStore::checked() const {
  std::lock_guard<std::mutex> lock(mu_);
  return checked_;
}

uint64_t DiskStore::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = 0;
  for (const auto& [id, e] : index_) total += e.info.file_bytes;
  return total;
}

size_t DiskStore::file_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return index_.size();
}

}  // namespace mx::cache
