// Reading and writing one sealed saved-cache file (docs/disk_cache_format.md,
// "Reading and writing fast"): ReadVerified preads each chunk in pieces and
// opens it in place into the caller's buffers, all chunks in parallel;
// WriteSealed seals chunks straight from the payload's views, writes them in
// order, fsyncs and publishes. The store's index, policy and start-up check
// are in disk_store.cc.
#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>

#include "cache/disk_store/disk_store.h"

namespace mx::cache {
namespace {

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

Result<DiskStore::Opened> DiskStore::ReadVerified(const std::string& id, ThreadPool* pool,
                                                  const PlaintextPlacer* place, Problem* problem,
                                                  bool metadata_only) const {
  *problem = Problem::kDamaged;
  const std::string ctx = "saved cache " + id;
  FileId file_id;
  if (!ParseFileId(id, &file_id)) return Status::InvalidArgument(ctx + ": not a saved-cache id");
  // Positional reads, not a memory map: a file cut short while it is read
  // must give an error, never a SIGBUS.
  // Never a symbolic link; never blocking on a FIFO (the Env refuses both).
  auto file_or = env_->NewRandomAccessFile(PathOf(CacheFileName(id)), {.follow_symlinks = false});
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
  const bool has_tenant = header.tenant_tag != TenantTag{};
  auto file_key_or = DeriveFileKey(key_, header.salt,
                                   has_tenant ? std::span<const uint8_t>(header.tenant_tag)
                                              : std::span<const uint8_t>());
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
  // Nothing in the header is trusted before a tag covers it (every chunk's
  // associated data holds the whole header): a check opens chunk 0 alone
  // first, and its buffers hold at most what the file's size allows (a
  // forged chunk size of 256 MiB on a small file allocates a small slot).
  const uint64_t batch =
      place != nullptr ? layout.n_chunks
                       : std::min<uint64_t>(static_cast<uint64_t>(n_threads), layout.n_chunks);
  const uint64_t slot_bytes = std::min<uint64_t>(chunk, layout.plaintext_bytes);
  std::unique_ptr<uint8_t[]> slots;
  if (place == nullptr) slots = std::make_unique_for_overwrite<uint8_t[]>(batch * slot_bytes);
  std::vector<uint8_t> meta_bytes;  // check: the plaintext's first bytes
  std::optional<uint64_t> meta_need;
  std::vector<std::unique_ptr<GcmStream>> streams(static_cast<size_t>(n_threads));
  std::vector<Status> statuses(static_cast<size_t>(batch));
  std::vector<uint8_t> io_failed(static_cast<size_t>(batch));  // not vector<bool>: written by several threads
  for (uint64_t first = 0, n = 0; first < layout.n_chunks; first += n) {
    if (metadata_only && place == nullptr && meta_need && meta_bytes.size() >= *meta_need) break;
    n = std::min(first == 0 && place == nullptr ? uint64_t{1} : batch, layout.n_chunks - first);
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
        read_open(slots.get() + static_cast<uint64_t>(k) * slot_bytes, plain_n);
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
      const uint8_t* p = slots.get() + k * slot_bytes;
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
  // The tenant inside must be the one the header's tag (and so the key)
  // was made for.
  auto tag = DeriveTenantTag(key_, out.meta.tenant);
  if (!tag.ok()) {
    *problem = Problem::kIo;
    return tag.status();
  }
  if (*tag != header.tenant_tag) return Status::Corruption(ctx + ": the tenant does not match its tag");
  *problem = Problem::kNone;
  return out;
}

Status DiskStore::WriteSealed(const std::string& id, const SaveMeta& meta, std::span<const int32_t> tokens,
                              std::span<const std::span<const uint8_t>> payload, uint64_t payload_bytes,
                              ThreadPool* pool, SavePacer* pacer, uint64_t* file_bytes) {
  FileId file_id;
  ParseFileId(id, &file_id);
  DiskHeader header;
  header.key_id = key_id_;
  header.chunk_bytes = chunk_bytes_;
  MX_RETURN_IF_ERROR(env_->RandomBytes(header.salt.data(), header.salt.size()));
  MX_ASSIGN_OR_RETURN(header.tenant_tag, DeriveTenantTag(key_, meta.tenant));
  uint8_t header_bytes[kDiskHeaderBytes];
  EncodeHeader(header, header_bytes);
  const bool has_tenant = !meta.tenant.empty();
  MX_ASSIGN_OR_RETURN(FileKey file_key,
                      DeriveFileKey(key_, header.salt,
                                    has_tenant ? std::span<const uint8_t>(header.tenant_tag)
                                               : std::span<const uint8_t>()));

  RecordMeta record;
  record.model_fingerprint = meta.model.model_fingerprint;
  record.tenant = meta.tenant;
  record.layout_fingerprint = meta.model.state_layout_fingerprint;
  record.created_us = meta.created_us;
  record.last_used_us = meta.last_used_us;
  record.prompt_len = meta.prompt_len;
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
  Status st;
  bool header_written = false;  // in the first slice, with the first chunks

  // Seal a batch of chunks (in parallel) into buffers reused from batch to
  // batch, then append them in order. With a pacer each batch is one slice,
  // on the threads the pacer names for it.
  std::unique_ptr<uint8_t[]> sealed;
  int64_t sealed_chunks = 0;
  std::vector<std::unique_ptr<GcmStream>> streams;
  std::vector<Status> statuses;
  for (uint64_t first = 0; st.ok() && first < n_chunks;) {
    ThreadPool* batch_pool = pool;
    if (pacer != nullptr) {
      auto granted = pacer->BeginSlice();
      if (!granted.ok()) {
        st = granted.status();
        break;
      }
      batch_pool = *granted;
    }
    const int n_threads = Threads(batch_pool);
    const int64_t n = static_cast<int64_t>(std::min<uint64_t>(static_cast<uint64_t>(n_threads), n_chunks - first));
    if (n > sealed_chunks) {
      sealed = std::make_unique_for_overwrite<uint8_t[]>(static_cast<size_t>(n) * (chunk + kTagBytes));
      sealed_chunks = n;
    }
    if (streams.size() < static_cast<size_t>(n_threads)) streams.resize(static_cast<size_t>(n_threads));
    if (!header_written) {
      st = file->Append(std::string_view(reinterpret_cast<const char*>(header_bytes), kDiskHeaderBytes));
      header_written = true;
    }
    statuses.assign(static_cast<size_t>(n), Status::Ok());
    ForEach(batch_pool, n, [&](int64_t k, int thread) {
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
    if (pacer != nullptr) pacer->EndSlice();
    first += static_cast<uint64_t>(n);
  }
  // The fsync and rename wait on the disk, not the CPU: they run outside
  // slices, but start only when a slice could (never early in a reply).
  if (st.ok() && pacer != nullptr) {
    auto granted = pacer->BeginSlice();
    if (granted.ok()) {
      pacer->EndSlice();
    } else {
      st = granted.status();
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

}  // namespace mx::cache
