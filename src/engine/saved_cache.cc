#include "engine/saved_cache.h"

#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "cache/disk_store/disk_format.h"
#include "cache/policy/cache_policy.h"
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
                                        ThreadPool* pool, const std::atomic<bool>* cancel) {
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
    if (cancel != nullptr && cancel->load()) return;
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
  model.DropCopiedFilePages();  // hashing read them back in; the model reads its copies
  return {"sha256x64m:" + Hex(digest, digest_len), layout.Fingerprint()};
}

SavedCacheStore::SavedCacheStore(Env* env, const SavedCacheOptions& options)
    : env_(env), options_(options), gate_(env, {.busy_share = options.busy_share}) {
  if (options_.background_writer) writer_ = std::thread([this] { WriterLoop(); });
}

Result<std::unique_ptr<SavedCacheStore>> SavedCacheStore::Open(Env* env, const SavedCacheOptions& options) {
  MX_RETURN_IF_ERROR(env->CreateDirs(options.dir, 0700));
  // One server per folder, before anything in it is read or deleted; cluster
  // nodes share theirs by design (the same key, one policy file).
  const std::string lock_path = JoinPath(options.dir, kFolderLockFileName);
  auto lock = env->LockFile(lock_path, /*exclusive=*/!options.cluster_node);
  if (!lock.ok() && lock.status().code() == Status::Code::kResourceExhausted) {
    return Status::ResourceExhausted(
        "the saved-cache folder " + options.dir + " is in use by another Matricxon server (" + lock_path +
        " is locked" + (options.cluster_node ? " by a server that is not a cluster node" : "") +
        "); give each server its own MATRICXON_PROMPT_CACHE_DIR, or run them all as cluster nodes "
        "(MATRICXON_CLUSTER_NODE=true) with one MATRICXON_CACHE_KEY");
  }
  std::unique_ptr<SavedCacheStore> store(new SavedCacheStore(env, options));
  if (lock.ok()) {
    store->folder_lock_ = std::move(lock).value();
  } else {
    MX_LOG(kWarn) << "saved caches: the folder cannot be locked (" << lock.status().ToString()
                  << "); a second server on it would not be noticed";
  }
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
  std::thread refresher;
  {
    std::lock_guard<std::mutex> lock(mu_);
    checks.swap(checks_);
    refresher.swap(refresher_);
    stop_writer_ = true;
    stop_refresher_ = true;
    for (const Node& n : queue_) n->abort = true;
  }
  queue_cv_.notify_all();
  refresh_cv_.notify_all();
  gate_.Wake();
  if (writer_.joinable()) writer_.join();
  if (refresher.joinable()) refresher.join();
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
    // Cluster nodes share the folder (docs/cluster.md).
    dso.shared_folder = options_.cluster_node;
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
  u.queued_bytes = queued_bytes_;
  u.writes = writes_;
  u.gate = gate_.stats();
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
    ClearQueueLocked();
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
    ClearQueueLocked();
  }
  gate_.Wake();
  if (d == nullptr) return RemoveSavedFiles(env_, options_.dir);
  return d->Purge();
}

void SavedCacheStore::UnlinkLocked(const Node& node) {
  for (auto it = queue_.begin(); it != queue_.end(); ++it) {
    if (*it == node) {
      queued_bytes_ -= node->bytes;
      queue_.erase(it);
      return;
    }
  }
}

void SavedCacheStore::ClearQueueLocked() {
  // A state being written is freed by its writer once it lets go.
  for (const Node& n : queue_) n->abort = true;
  queue_.clear();
  queued_bytes_ = 0;
}

bool SavedCacheStore::UrgentLocked() const { return draining_ || queued_bytes_ > options_.queue_budget_bytes; }

void SavedCacheStore::Enqueue(PendingSave item) {
  if (item.state == nullptr || item.tokens.empty()) return;
  // The runner that lent its threads may be gone when the state is used again.
  item.state->set_copy_pool(nullptr);
  auto node = std::make_shared<QueuedSave>();
  node->bytes = item.state->MemoryBytes();
  node->queued_us = env_->NowMicros();
  node->item = std::move(item);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (disk_ == nullptr) return;  // saving is off: the state is simply freed
    node->seq = ++next_seq_;
    queued_bytes_ += node->bytes;
    queue_.push_back(node);
    if (queued_bytes_ > options_.queue_budget_bytes && !over_budget_logged_) {
      over_budget_logged_ = true;
      MX_LOG(kWarn) << "saved caches: " << queue_.size() << " cached chats (" << Mb(queued_bytes_)
                    << ") wait to be written, more than the write queue's " << Mb(options_.queue_budget_bytes)
                    << ": writing them without waiting for a share of the time";
    }
  }
  queue_cv_.notify_all();
}

bool SavedCacheStore::HasPending(const cache::ModelBinding& model) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Node& n : queue_) {
    if (n->item.model == model) return true;
  }
  return false;
}

namespace {

// Grants a save its slices through the gate: on every core while no model
// has a request, on the writer's thread alone between forward passes
// otherwise; stops when the state is taken back or saving is turned off.
class GatePacer : public cache::SavePacer {
 public:
  GatePacer(ComputeGate* gate, const std::atomic<bool>* abort, ThreadPool* idle_pool,
            std::function<bool()> urgent, uint64_t deferred_until_us)
      : gate_(gate), abort_(abort), idle_pool_(idle_pool), urgent_(std::move(urgent)),
        deferred_until_us_(deferred_until_us) {}
  Result<ThreadPool*> BeginSlice() override {
    bool idle = false;
    if (!gate_->BeginSlice(urgent_(), abort_, &idle, deferred_until_us_)) {
      return Status::NotFound("the cached chat was taken back (or saving was turned off) while it was written");
    }
    return idle ? idle_pool_ : nullptr;
  }
  void EndSlice() override { gate_->EndSlice(); }

 private:
  ComputeGate* gate_;
  const std::atomic<bool>* abort_;
  ThreadPool* idle_pool_;
  std::function<bool()> urgent_;
  uint64_t deferred_until_us_;
};

}  // namespace

bool SavedCacheStore::WriteNode(const Node& node, bool paced, ThreadPool* pool) {
  std::shared_ptr<cache::DiskStore> d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    d = disk_;
    if (d == nullptr || node->abort) {
      UnlinkLocked(node);
      return false;
    }
    node->writing = true;
    ++node->readers;
    ++writes_running_;
  }
  // DrainAll waits for this write's log line and limits too, not only its file.
  struct Done {
    SavedCacheStore* store;
    ~Done() {
      {
        std::lock_guard<std::mutex> lock(store->mu_);
        --store->writes_running_;
      }
      store->queue_cv_.notify_all();
    }
  } done{this};
  const uint64_t t0 = env_->NowMicros();
  const PendingSave& item = node->item;
  // Sealed straight from the state's own memory (no serialized copy).
  const models::SerializedView view = item.state->SerializeView();
  GatePacer pacer(
      &gate_, &node->abort, pool,
      [this] {
        std::lock_guard<std::mutex> lock(mu_);
        return UrgentLocked();
      },
      node->queued_us + options_.defer_ms * 1000);
  cache::SaveMeta meta;
  meta.model = item.model;
  meta.tenant = item.tenant;
  meta.prompt_len = static_cast<uint64_t>(std::max<int64_t>(item.prompt_len, 0));
  auto saved = d->Save(meta, item.tokens, view.parts, pool, paced ? &pacer : nullptr);
  const bool abandoned = !saved.ok() && node->abort;
  bool still_on = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    node->writing = false;
    --node->readers;
    // Written, or failed for good: it leaves the queue. Abandoned for a
    // taker: it stays until the taker unlinks it.
    if (!abandoned) UnlinkLocked(node);
    if (saved.ok()) ++writes_;
    if (queued_bytes_ <= options_.queue_budget_bytes) over_budget_logged_ = false;
    still_on = disk_ == d;
  }
  queue_cv_.notify_all();
  if (abandoned) return false;
  if (!saved.ok()) {
    MX_LOG(kWarn) << "saved caches: writing a cached chat of " << item.tokens.size()
                  << " tokens failed, dropped (chats go on): " << saved.status().ToString();
    return false;
  }
  if (!still_on) {  // turned off or purged while writing: leave nothing behind
    d->Remove(saved->id);
    return false;
  }
  MX_LOG(kInfo) << "saved caches: wrote a cached chat of " << item.tokens.size() << " tokens ("
                << Mb(saved->file_bytes) << ") in " << (env_->NowMicros() - t0) / 1000 << " ms"
                << (paced ? "" : " (unpaced)");
  if (auto removed = d->EnforceLimits(env_->WallMicros()); removed.ok() && removed->files > 0) {
    MX_LOG(kInfo) << "saved caches: removed " << removed->files << " expired or over-budget files ("
                  << Mb(removed->bytes) << ")";
  }
  return true;
}

void SavedCacheStore::WriterLoop() {
  io_pool_ = std::make_unique<ThreadPool>(options_.writer_threads > 0 ? options_.writer_threads
                                                                      : PhysicalCoreCount());
  const uint64_t defer_us = options_.defer_ms * 1000;
  for (;;) {
    Node node;
    {
      std::unique_lock<std::mutex> lock(mu_);
      for (;;) {
        if (stop_writer_) return;
        node.reset();
        for (const Node& n : queue_) {
          if (!n->writing && !n->abort) {
            node = n;
            break;
          }
        }
        if (node == nullptr) {
          queue_cv_.wait(lock);
          continue;
        }
        const uint64_t waited = env_->NowMicros() - node->queued_us;
        if (UrgentLocked() || waited >= defer_us || gate_.idle()) break;
        // Replies run: wait for a moment without requests (noticed within
        // 50 ms) or for the state's deferral to end.
        const uint64_t wait_us = std::min<uint64_t>(defer_us - waited, 50000);
        queue_cv_.wait_for(lock, std::chrono::microseconds(wait_us));
      }
    }
    WriteNode(node, /*paced=*/true, io_pool_.get());
  }
}

bool SavedCacheStore::WriteOne(const cache::ModelBinding& model, ThreadPool* pool, bool* written) {
  if (written != nullptr) *written = false;
  Node node;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Node& n : queue_) {
      if (n->item.model == model && !n->writing) {
        node = n;
        break;
      }
    }
    if (node == nullptr) return false;
  }
  const bool saved = WriteNode(node, /*paced=*/false, pool);
  if (written != nullptr) *written = saved;
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
        if ((*it)->item.model == model) {
          (*it)->abort = true;
          queued_bytes_ -= (*it)->bytes;
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
    if (!WriteOne(model, pool, &saved)) {
      // The writer thread holds the last one: wait for it.
      std::unique_lock<std::mutex> lock(mu_);
      queue_cv_.wait_for(lock, std::chrono::milliseconds(10));
    }
    written += saved;
  }
  return written;
}

void SavedCacheStore::BeginDrain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_) return;
    draining_ = true;
    drain_t0_us_ = env_->NowMicros();
    drain_writes0_ = writes_;
  }
  queue_cv_.notify_all();
  gate_.Wake();
}

size_t SavedCacheStore::DrainAll(uint64_t timeout_ms) {
  BeginDrain();
  const uint64_t t0 = env_->NowMicros();
  if (!options_.background_writer) {
    ThreadPool pool(options_.writer_threads > 0 ? options_.writer_threads : PhysicalCoreCount());
    for (;;) {
      Node node;
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (queue_.empty() || env_->NowMicros() - t0 > timeout_ms * 1000) break;
        node = queue_.front();
      }
      WriteNode(node, /*paced=*/false, &pool);
    }
  }
  std::unique_lock<std::mutex> lock(mu_);
  queue_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                     [&] { return queue_.empty() && writes_running_ == 0; });
  draining_ = false;
  const size_t left = queue_.size();
  if (left > 0) {
    uint64_t tokens = 0;
    for (const Node& n : queue_) tokens += n->item.tokens.size();
    MX_LOG(kWarn) << "saved caches: shutdown flush reached its " << timeout_ms << " ms limit; " << left
                  << " cached chats (" << tokens << " tokens) were not saved";
    ClearQueueLocked();
  } else if (const uint64_t flushed = writes_ - drain_writes0_; flushed > 0) {
    MX_LOG(kInfo) << "saved caches: flushed " << flushed << " cached chats to disk in "
                  << (env_->NowMicros() - drain_t0_us_) / 1000 << " ms";
  }
  return left;
}

uint64_t SavedCacheStore::WaitForWrites(uint64_t n, uint64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  queue_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return writes_ >= n; });
  return writes_;
}

}  // namespace mx::engine
