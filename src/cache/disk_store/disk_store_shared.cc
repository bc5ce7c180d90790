// The folder as a whole, shared with other processes (docs/cluster.md):
// Refresh brings the index up to date with files other nodes wrote or
// removed, EnforceLimits applies the budget and TTL over a fresh listing of
// the folder. The rest of the store is in disk_store.cc.
#include <algorithm>
#include <map>
#include <utility>

#include "cache/disk_store/disk_store.h"
#include "core/logging.h"

namespace mx::cache {

void DiskStore::IndexLocked(const std::string& id, Opened&& o, uint64_t mtime_us) {
  Entry e;
  e.info.id = id;
  e.info.model = {o.meta.model_fingerprint, o.meta.layout_fingerprint};
  e.info.tenant = o.meta.tenant;
  e.info.n_tokens = o.tokens.size();
  e.info.tokens_hash = HashTokens(o.tokens);
  e.info.file_bytes = o.file_bytes;
  e.info.payload_bytes = o.plaintext_bytes - o.payload_offset;
  e.info.created_us = o.meta.created_us;
  e.info.prompt_len = o.meta.prompt_len;
  // Load and Save keep the last use as the file's modification time.
  e.info.last_used_us = std::max(o.meta.last_used_us, mtime_us);
  e.tokens = std::move(o.tokens);
  e.generation = ++index_generation_;
  index_.emplace(id, std::move(e));
}

RefreshReport DiskStore::Refresh(bool force) {
  RefreshReport report;
  const uint64_t t0 = env_->NowMicros();
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (refreshing_ || !checked_) return report;
    if (!force && refreshed_once_ && t0 - last_refresh_us_ < options_.refresh_interval_us)
      return report;
    refreshing_ = true;
    refreshed_once_ = true;
    last_refresh_us_ = t0;
    // Entries indexed from now on may be missing from the listing below.
    generation = index_generation_;
  }
  struct Done {
    DiskStore* store;
    ~Done() {
      std::lock_guard<std::mutex> lock(store->mu_);
      store->refreshing_ = false;
    }
  } done{this};
  report.ran = true;
  auto names = env_->ListDir(dir_);
  if (!names.ok()) {
    MX_LOG(kWarn) << "saved caches: cannot list " << dir_ << ": " << names.status().ToString();
    report.status = names.status().WithContext("refreshing the index of " + dir_);
    report.micros = env_->NowMicros() - t0;
    return report;
  }
  std::set<std::string> present;
  for (const std::string& name : names.value()) {
    std::string id;
    if (ClassifyFileName(name, &id) == FileNameKind::kCache) present.insert(std::move(id));
  }
  report.listed = present.size();
  std::vector<std::string> fresh;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = index_.begin(); it != index_.end();) {
      if (it->second.generation <= generation && present.count(it->first) == 0) {
        it = index_.erase(it);  // another node removed it
        ++report.forgotten;
      } else {
        ++it;
      }
    }
    for (auto it = rejected_.begin(); it != rejected_.end();) {
      it = present.count(*it) == 0 ? rejected_.erase(it) : std::next(it);
    }
    for (const std::string& id : present) {
      if (index_.count(id) == 0 && writing_.count(id) == 0 && rejected_.count(id) == 0)
        fresh.push_back(id);
    }
  }
  if (fresh.size() > options_.refresh_max_new_files) {
    report.left = fresh.size() - options_.refresh_max_new_files;
    fresh.resize(options_.refresh_max_new_files);
  }
  for (const std::string& id : fresh) {
    const std::string path = PathOf(CacheFileName(id));
    auto link = env_->GetLinkInfo(path);
    if (!link.ok()) continue;  // removed meanwhile
    Problem problem = Problem::kNone;
    Result<Opened> opened =
        link->is_regular ? ReadVerified(id, /*pool=*/nullptr, /*place=*/nullptr, &problem,
                                        /*metadata_only=*/true)
                         : Result<Opened>(Status::InvalidArgument(path + " is not a regular file"));
    if (opened.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      IndexLocked(id, std::move(opened).value(), link->mtime_micros);
      ++report.added;
      continue;
    }
    if (problem == Problem::kMissing) continue;
    ++report.rejected;
    if (link->is_regular && problem == Problem::kDamaged) {
      MX_LOG(kWarn) << "saved caches: deleting " << opened.status().ToString();
      env_->RemoveFile(path);
      continue;
    }
    MX_LOG(kInfo) << "saved caches: not using " << opened.status().ToString();
    std::lock_guard<std::mutex> lock(mu_);
    rejected_.insert(id);
  }
  report.micros = env_->NowMicros() - t0;
  return report;
}

bool DiskStore::RefreshDue() const {
  const uint64_t now = env_->NowMicros();
  std::lock_guard<std::mutex> lock(mu_);
  if (refreshing_ || !checked_) return false;
  return !refreshed_once_ || now - last_refresh_us_ >= options_.refresh_interval_us;
}

Result<RemovalStats> DiskStore::EnforceLimits(uint64_t now_us) {
  MX_ASSIGN_OR_RETURN(std::vector<std::string> names, env_->ListDir(dir_));
  std::vector<DiskFileInfo> files;
  files.reserve(names.size());
  for (const std::string& name : names) {
    std::string id;
    if (ClassifyFileName(name, &id) != FileNameKind::kCache) continue;
    auto link = env_->GetLinkInfo(PathOf(name));
    if (!link.ok() || !link->is_regular) continue;  // gone meanwhile, or not the store's
    // The last use is the file's modification time (Save and Load set it),
    // so every node plans over the same order.
    DiskFileInfo f{id, link->size_bytes, link->mtime_micros, link->mtime_micros};
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = index_.find(id); it != index_.end()) {
        f.created_us = it->second.info.created_us;
        f.last_used_us = std::max(f.last_used_us, it->second.info.last_used_us);
      }
    }
    files.push_back(std::move(f));
  }
  const std::vector<DiskRemoval> plan = PlanDiskEviction(files, limits(), now_us);
  RemovalStats stats;
  Status first;
  for (const auto& r : plan) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      index_.erase(r.id);
    }
    Status st = env_->RemoveFile(PathOf(CacheFileName(r.id)));
    if (st.ok()) {
      ++stats.files;
      stats.bytes += r.bytes;
    } else if (st.code() != Status::Code::kNotFound &&
               first.ok()) {  // NotFound: another node was first
      first = st;
    }
  }
  if (!first.ok()) return first;
  return stats;
}

}  // namespace mx::cache
