#include "engine/saved_cache.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <optional>

#include "cache/disk_store/disk_format.h"
#include "core/logging.h"

namespace mx::engine {
namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[p[i] >> 4]);
    out.push_back(kDigits[p[i] & 15]);
  }
  return out;
}

std::string Mb(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

// Deletes the saved files of `dir` without opening them (no key needed):
// only the names the store makes, and only regular files.
cache::RemovalStats RemoveSavedFiles(Env* env, const std::string& dir) {
  auto removed = cache::DiskStore::RemoveSavedFiles(env, dir);
  return removed.ok() ? *removed : cache::RemovalStats{};
}

}  // namespace

cache::ModelBinding ComputeModelBinding(const models::Model& model, const models::StateLayout& layout,
                                        ThreadPool* pool) {
  // A two-level SHA-256 so that the pieces hash in parallel: every 64 MiB
  // piece is hashed on its own, then the file size and the piece digests.
  constexpr size_t kPiece = size_t{64} << 20;
  constexpr size_t kDigest = 32;
  const gguf::GgufFile& file = model.file();
  const uint8_t* data = file.file_data();
  const size_t size = file.file_size();
  const size_t n_pieces = size == 0 ? 1 : (size + kPiece - 1) / kPiece;
  std::string digests(8 + n_pieces * kDigest, '\0');
  for (int i = 0; i < 8; ++i) digests[static_cast<size_t>(i)] = static_cast<char>((uint64_t{size} >> (8 * i)) & 0xff);
  auto hash_piece = [&](int64_t i, int) {
    const size_t begin = static_cast<size_t>(i) * kPiece;
    const size_t len = std::min(kPiece, size - std::min(size, begin));
    unsigned int out_len = 0;
    EVP_Digest(data + begin, len, reinterpret_cast<unsigned char*>(&digests[8 + static_cast<size_t>(i) * kDigest]),
               &out_len, EVP_sha256(), nullptr);
  };
  if (pool != nullptr) {
    pool->ParallelFor(static_cast<int64_t>(n_pieces), hash_piece);
  } else {
    for (size_t i = 0; i < n_pieces; ++i) hash_piece(static_cast<int64_t>(i), 0);
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  EVP_Digest(digests.data(), digests.size(), digest, &digest_len, EVP_sha256(), nullptr);
  return {"sha256x64m:" + Hex(digest, digest_len), layout.Fingerprint()};
}

SavedCacheStore::SavedCacheStore(Env* env, const SavedCacheOptions& options) : env_(env), options_(options) {}

Result<std::unique_ptr<SavedCacheStore>> SavedCacheStore::Open(Env* env, const SavedCacheOptions& options) {
  MX_RETURN_IF_ERROR(env->CreateDirs(options.dir, 0700));
  std::unique_ptr<SavedCacheStore> store(new SavedCacheStore(env, options));
  if (!options.enabled) {
    store->disabled_reason_ = "the disk cache is off (MATRICXON_PERSIST_PROMPT_CACHE=false or the saved policy)";
    // Off means no saved files, as when saving is turned off at run time:
    // files left by a run with saving on would otherwise stay forever, with
    // no TTL or budget applied to them.
    // Not in a folder that fails its check (e.g. another user's).
    Status folder = cache::PrepareCacheFolder(env, options.dir);
    const cache::RemovalStats removed =
        folder.ok() ? RemoveSavedFiles(env, options.dir) : cache::RemovalStats{};
    MX_LOG(kInfo) << "saved caches: off; " << store->disabled_reason_
                  << (removed.files > 0
                          ? "; deleted " + std::to_string(removed.files) +
                                " saved files of an earlier run (" + Mb(removed.bytes) + ")"
                          : std::string())
                  << (folder.ok() ? std::string() : "; " + folder.ToString());
    return store;
  }
  if (Status st = store->OpenDisk(); !st.ok()) {
    MX_LOG(kWarn) << "saved caches: " << store->disabled_reason();
  }
  return store;
}

SavedCacheStore::~SavedCacheStore() {
  std::vector<std::thread> checks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    checks.swap(checks_);
  }
  for (auto& t : checks) t.join();
}

Status SavedCacheStore::OpenDisk() {
  auto key = cache::KeyStore::Open(env_, options_.dir, {options_.passphrase, options_.cluster_node});
  std::string reason;
  if (!key.ok()) {
    reason = "the disk cache is off: the key cannot be used (" + key.status().ToString() + ")";
  } else if (!key->enabled()) {
    std::string why = key->disabled_reason();
    constexpr std::string_view kPrefix = "saved caches are off: ";
    if (why.compare(0, kPrefix.size(), kPrefix) == 0) why = why.substr(kPrefix.size());
    reason = "the disk cache is off: " + why;
  }
  std::shared_ptr<cache::DiskStore> disk;
  if (reason.empty()) {
    cache::DiskStoreOptions dso;
    {
      std::lock_guard<std::mutex> lock(mu_);
      dso.limits = {options_.budget_bytes, options_.ttl_us};
    }
    auto opened = cache::DiskStore::Open(env_, options_.dir, *key, dso);
    if (!opened.ok()) {
      reason = "the disk cache is off: " + opened.status().ToString();
    } else {
      disk = std::move(opened).value();
    }
  }
  if (!reason.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    disabled_reason_ = reason;
    options_.enabled = false;
    return Status::InvalidArgument(reason);
  }
  MX_LOG(kInfo) << "saved caches: on, in " << options_.dir << ", key "
                << cache::KeySourceName(key->source())
                << (key->created_key_file() ? " (created " + std::string(cache::kKeyFileName) + ")" : "");
  {
    std::lock_guard<std::mutex> lock(mu_);
    disk_ = disk;
    key_source_ = key->source();
    disabled_reason_.clear();
    options_.enabled = true;
  }
  StartCheck(disk);
  return Status::Ok();
}

void SavedCacheStore::StartCheck(std::shared_ptr<cache::DiskStore> disk) {
  auto run = [this, disk] {
    const uint64_t t0 = env_->NowMicros();
    cache::StartupReport report = disk->StartupCheck();
    MX_LOG(kInfo) << "saved caches checked in " << (env_->NowMicros() - t0) / 1000 << " ms: " << report.ToString();
    if (auto removed = disk->EnforceLimits(env_->WallMicros()); removed.ok() && removed->files > 0) {
      MX_LOG(kInfo) << "saved caches: removed " << removed->files << " expired or over-budget files ("
                    << Mb(removed->bytes) << ")";
    }
  };
  if (!options_.check_in_background) {
    run();
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  checks_.emplace_back(run);
}

std::shared_ptr<cache::DiskStore> SavedCacheStore::disk() const {
  std::lock_guard<std::mutex> lock(mu_);
  return disk_;
}

bool SavedCacheStore::enabled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return disk_ != nullptr;
}

std::string SavedCacheStore::disabled_reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return disk_ != nullptr ? std::string() : disabled_reason_;
}

SavedCacheUsage SavedCacheStore::Usage() const {
  std::lock_guard<std::mutex> lock(mu_);
  SavedCacheUsage u;
  u.enabled = disk_ != nullptr;
  u.budget_bytes = options_.budget_bytes;
  u.ttl_us = options_.ttl_us;
  if (disk_ != nullptr) {
    u.used_bytes = disk_->used_bytes();
    u.files = disk_->file_count();
    u.key_source = key_source_;
  }
  u.queued = queue_.size();
  return u;
}

Status SavedCacheStore::CanEnable() const {
  if (options_.passphrase.empty() && options_.cluster_node) {
    return Status::InvalidArgument(
        "saved caches cannot be turned on: this is a cluster node (MATRICXON_CLUSTER_NODE=true) and "
        "MATRICXON_CACHE_KEY is not set");
  }
  return Status::Ok();
}

Result<cache::RemovalStats> SavedCacheStore::SetEnabled(bool on) {
  if (on) {
    if (enabled()) return cache::RemovalStats{};
    MX_RETURN_IF_ERROR(CanEnable());
    MX_RETURN_IF_ERROR(OpenDisk());
    return cache::RemovalStats{};
  }
  std::shared_ptr<cache::DiskStore> d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    d = std::move(disk_);
    disk_.reset();
    options_.enabled = false;
    disabled_reason_ = "the disk cache is off (turned off through /api/cache/persistence)";
    queue_.clear();
    queued_bytes_ = 0;
  }
  cache::RemovalStats stats;
  if (d != nullptr) {
    if (auto purged = d->Purge(); purged.ok()) stats = *purged;
  }
  cache::RemovalStats rest = RemoveSavedFiles(env_, options_.dir);
  stats.files += rest.files;
  stats.bytes += rest.bytes;
  MX_LOG(kInfo) << "saved caches: turned off; deleted " << stats.files << " files (" << Mb(stats.bytes) << ")";
  return stats;
}

Result<cache::RemovalStats> SavedCacheStore::SetLimits(uint64_t budget_bytes, uint64_t ttl_us) {
  std::shared_ptr<cache::DiskStore> d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    options_.budget_bytes = budget_bytes;
    options_.ttl_us = ttl_us;
    d = disk_;
  }
  if (d == nullptr) return cache::RemovalStats{};
  d->SetLimits({budget_bytes, ttl_us});
  MX_ASSIGN_OR_RETURN(cache::RemovalStats removed, d->EnforceLimits(env_->WallMicros()));
  if (removed.files > 0) {
    MX_LOG(kInfo) << "saved caches: new limits removed " << removed.files << " files (" << Mb(removed.bytes) << ")";
  }
  return removed;
}

Result<cache::RemovalStats> SavedCacheStore::Purge() {
  std::shared_ptr<cache::DiskStore> d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    d = disk_;
    queue_.clear();
    queued_bytes_ = 0;
  }
  if (d == nullptr) return RemoveSavedFiles(env_, options_.dir);
  return d->Purge();
}

void SavedCacheStore::Enqueue(PendingSave item) {
  if (item.state == nullptr || item.tokens.empty()) return;
  const uint64_t bytes = item.state->SizeBytes();
  std::lock_guard<std::mutex> lock(mu_);
  if (disk_ == nullptr) return;  // saving is off: the state is simply freed
  if (bytes > options_.queue_budget_bytes) {
    MX_LOG(kWarn) << "saved caches: a cached chat of " << item.tokens.size() << " tokens (" << Mb(bytes)
                  << ") is larger than the write queue's budget; not saved";
    return;
  }
  while (!queue_.empty() && queued_bytes_ + bytes > options_.queue_budget_bytes) {
    MX_LOG(kWarn) << "saved caches: write queue full; dropped a cached chat of " << queue_.front().tokens.size()
                  << " tokens";
    queued_bytes_ -= queue_.front().state->SizeBytes();
    queue_.pop_front();
  }
  queued_bytes_ += bytes;
  queue_.push_back(std::move(item));
}

bool SavedCacheStore::HasPending(const cache::ModelBinding& model) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const PendingSave& p : queue_) {
    if (p.model == model) return true;
  }
  return false;
}

bool SavedCacheStore::WriteOne(const cache::ModelBinding& model, ThreadPool* pool, bool* written) {
  if (written != nullptr) *written = false;
  PendingSave item;
  std::shared_ptr<cache::DiskStore> d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = queue_.begin();
    while (it != queue_.end() && !(it->model == model)) ++it;
    if (it == queue_.end()) return false;
    item = std::move(*it);
    queue_.erase(it);
    queued_bytes_ -= item.state->SizeBytes();
    d = disk_;
  }
  if (d == nullptr) return true;
  const uint64_t t0 = env_->NowMicros();
  // Sealed straight from the state's own memory (no serialized copy).
  const models::SerializedView view = item.state->SerializeView();
  auto saved = d->Save({item.model, 0, 0}, item.tokens, view.parts, pool);
  item.state.reset();
  if (!saved.ok()) {
    MX_LOG(kWarn) << "saved caches: writing a cached chat of " << item.tokens.size()
                  << " tokens failed, dropped (chats go on): " << saved.status().ToString();
    return true;
  }
  bool still_on = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    still_on = disk_ == d;
  }
  if (!still_on) {  // turned off or purged while writing: leave nothing behind
    d->Remove(saved->id);
    return true;
  }
  if (written != nullptr) *written = true;
  MX_LOG(kInfo) << "saved caches: wrote a cached chat of " << item.tokens.size() << " tokens ("
                << Mb(saved->file_bytes) << ") in " << (env_->NowMicros() - t0) / 1000 << " ms";
  if (auto removed = d->EnforceLimits(env_->WallMicros()); removed.ok() && removed->files > 0) {
    MX_LOG(kInfo) << "saved caches: removed " << removed->files << " expired or over-budget files ("
                  << Mb(removed->bytes) << ")";
  }
  return true;
}

size_t SavedCacheStore::Drain(const cache::ModelBinding& model, uint64_t timeout_ms, ThreadPool* pool) {
  const uint64_t t0 = env_->NowMicros();
  size_t written = 0;
  while (HasPending(model)) {
    if (env_->NowMicros() - t0 > timeout_ms * 1000) {
      size_t dropped = 0;
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = queue_.begin(); it != queue_.end();) {
        if (it->model == model) {
          queued_bytes_ -= it->state->SizeBytes();
          it = queue_.erase(it);
          ++dropped;
        } else {
          ++it;
        }
      }
      MX_LOG(kWarn) << "saved caches: flush took longer than " << timeout_ms << " ms; " << dropped
                    << " cached chats not saved";
      break;
    }
    bool saved = false;
    WriteOne(model, pool, &saved);
    written += saved;
  }
  return written;
}

cache::PrefixMatch SavedCacheStore::Find(const cache::ModelBinding& model, std::span<const int32_t> prompt) const {
  auto d = disk();
  if (d == nullptr) {
    cache::PrefixMatch none;
    none.why_none = "the disk cache is off";
    return none;
  }
  return d->FindLongestPrefix(model, prompt);
}

cache::ShiftMatch SavedCacheStore::FindShift(const cache::ModelBinding& model, std::span<const int32_t> prompt,
                                             int64_t min_kept) const {
  auto d = disk();
  if (d == nullptr) return cache::ShiftMatch{};
  return d->FindShift(model, prompt, min_kept);
}

Result<cache::LoadedEntry> SavedCacheStore::Load(const std::string& id, const cache::ModelBinding& model,
                                                 ThreadPool* pool) {
  auto d = disk();
  if (d == nullptr) return Status::NotFound("the disk cache is off");
  return d->Load(id, model, pool);
}

Result<LoadedState> SavedCacheStore::LoadState(const std::string& id, const cache::ModelBinding& model,
                                               std::shared_ptr<const models::StateLayout> layout,
                                               ThreadPool* pool) {
  auto d = disk();
  if (d == nullptr) return Status::NotFound("the disk cache is off");
  // The file is decrypted straight into the new state's KV memory.
  std::optional<models::StateLoader> loader;
  auto place = [&](const cache::SavedEntryInfo& entry,
                   uint64_t payload_bytes) -> Result<std::vector<std::span<uint8_t>>> {
    MX_ASSIGN_OR_RETURN(models::StateLoader l,
                        models::StateLoader::Prepare(layout, static_cast<int64_t>(entry.n_tokens),
                                                     static_cast<size_t>(payload_bytes)));
    loader.emplace(std::move(l));
    return loader->buffers();
  };
  MX_ASSIGN_OR_RETURN(cache::LoadedEntry loaded, d->LoadInto(id, model, pool, place));
  LoadedState out;
  Result<std::unique_ptr<models::SequenceState>> state =
      loader ? loader->Finish() : Result<std::unique_ptr<models::SequenceState>>(Status::Internal("no state"));
  if (!state.ok()) return state.status().WithContext("saved cache " + id);
  if ((*state)->n_tokens() != static_cast<int64_t>(loaded.tokens.size())) {
    return Status::Corruption("saved cache " + id + ": its state does not hold the tokens it was saved with");
  }
  out.tokens = std::move(loaded.tokens);
  out.state = std::move(state).value();
  return out;
}

void SavedCacheStore::Remove(const std::string& id) {
  if (auto d = disk(); d != nullptr) d->Remove(id);
}

}  // namespace mx::engine
