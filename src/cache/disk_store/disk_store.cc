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
// The lock a server holds on its folder (engine::SavedCacheStore).
constexpr char kLockFileName[] = "prompt_cache.lock";

std::string MiB(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

}  // namespace

std::string StartupReport::ToString() const {
  std::string s = std::to_string(files_ok) + " saved caches ok (" + MiB(bytes_ok) + "); removed " +
                  std::to_string(removed_damaged) + " damaged, " +
                  std::to_string(removed_other_key) + " sealed with another key, " +
                  std::to_string(removed_unsupported) + " of another format version, " +
                  std::to_string(removed_temporaries) + " stale temporaries (" +
                  MiB(removed_bytes) + ")";
  if (ignored > 0) s += "; " + std::to_string(ignored) + " unknown files left alone";
  if (not_regular > 0) {
    s += "; " + std::to_string(not_regular) +
         " entries named like saved caches that are not regular files (symlink, FIFO, folder, ...) "
         "left alone";
  }
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
      options_(options),
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
  MX_RETURN_IF_ERROR(PrepareCacheFolder(env, dir));
  return std::unique_ptr<DiskStore>(new DiskStore(env, dir, key, options));
}

std::string DiskStore::PathOf(std::string_view name) const { return JoinPath(dir_, name); }

Result<SavedEntryInfo> DiskStore::Save(const SaveMeta& meta, std::span<const int32_t> tokens,
                                       std::string_view payload, ThreadPool* pool) {
  const std::span<const uint8_t> part(reinterpret_cast<const uint8_t*>(payload.data()), payload.size());
  return Save(meta, tokens, std::span<const std::span<const uint8_t>>(&part, 1), pool);
}

Result<SavedEntryInfo> DiskStore::Save(const SaveMeta& meta, std::span<const int32_t> tokens,
                                       std::span<const std::span<const uint8_t>> payload_parts,
                                       ThreadPool* pool, SavePacer* pacer) {
  uint64_t payload_bytes = 0;
  for (const auto& p : payload_parts) payload_bytes += p.size();
  const size_t fp_len = meta.model.model_fingerprint.size();
  if (fp_len == 0 || fp_len > kMaxModelFingerprintBytes) {
    return Status::InvalidArgument("model fingerprint of " + std::to_string(fp_len) +
                                   " bytes, expected 1.." +
                                   std::to_string(kMaxModelFingerprintBytes));
  }
  if (meta.tenant.size() > kMaxTenantBytes) {
    return Status::InvalidArgument("tenant of " + std::to_string(meta.tenant.size()) + " bytes, at most " +
                                   std::to_string(kMaxTenantBytes));
  }
  const uint64_t plaintext = MetadataBytesFor(fp_len, meta.tenant.size(), tokens.size()) + payload_bytes;
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
  if (m.prompt_len == 0 || m.prompt_len > tokens.size()) m.prompt_len = tokens.size();
  FileId raw_id;
  MX_RETURN_IF_ERROR(env_->RandomBytes(raw_id.data(), raw_id.size()));
  const std::string id = ToHex(raw_id);
  uint64_t purges_before = 0, forgets_before = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    writing_.insert(id);
    purges_before = purges_;
    forgets_before = forgets_[m.tenant];
  }
  uint64_t written_bytes = 0;
  Status st = WriteSealed(id, m, tokens, payload_parts, payload_bytes, pool, pacer, &written_bytes);
  // The last use lives in the file's modification time (read back by
  // StartupCheck); best effort, the record holds it too.
  if (st.ok()) env_->SetModifiedTime(PathOf(CacheFileName(id)), m.last_used_us);
  std::unique_lock<std::mutex> lock(mu_);
  writing_.erase(id);
  if (!st.ok()) return st;
  if (!m.tenant.empty() && forgets_[m.tenant] != forgets_before) {
    // The tenant was forgotten while this file was written.
    lock.unlock();
    env_->RemoveFile(PathOf(CacheFileName(id)));
    return Status::NotFound("saved cache " + id + ": its tenant was forgotten while it was being written");
  }
  if (purges_ != purges_before || purging_ > 0) {
    // A Purge ran while this file was written (it skips files being
    // written): the file must not outlive it.
    lock.unlock();
    env_->RemoveFile(PathOf(CacheFileName(id)));
    return Status::NotFound("saved cache " + id +
                            ": every saved cache was deleted while it was being written; "
                            "not kept");
  }
  Entry entry;
  entry.info.id = id;
  entry.info.model = m.model;
  entry.info.tenant = m.tenant;
  entry.info.n_tokens = tokens.size();
  entry.info.tokens_hash = HashTokens(tokens);
  entry.info.file_bytes = written_bytes;
  entry.info.payload_bytes = payload_bytes;
  entry.info.created_us = m.created_us;
  entry.info.last_used_us = m.last_used_us;
  entry.info.prompt_len = m.prompt_len;
  entry.tokens.assign(tokens.begin(), tokens.end());
  SavedEntryInfo info = entry.info;
  entry.generation = ++index_generation_;
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

PrefixMatch DiskStore::FindLongestPrefix(const ModelBinding& model, std::span<const int32_t> tokens,
                                         const std::string* only_tenant) const {
  PrefixMatch match;
  size_t other_best = 0;
  uint64_t other_layout = 0;  // of the other_best file when it is this model's
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, e] : index_) {
    if (only_tenant != nullptr && e.info.tenant != *only_tenant) continue;
    const size_t n = std::min(e.tokens.size(), tokens.size());
    const size_t lcp = static_cast<size_t>(
        std::mismatch(e.tokens.begin(), e.tokens.begin() + static_cast<ptrdiff_t>(n), tokens.begin())
            .first -
        e.tokens.begin());
    if (!(e.info.model == model)) {
      if (lcp > other_best) {
        other_best = lcp;
        other_layout = e.info.model.model_fingerprint == model.model_fingerprint
                           ? e.info.model.state_layout_fingerprint
                           : 0;
      }
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
  match.other_layout_fingerprint = other_best > 0 ? other_layout : 0;
  if (index_.empty() || only_tenant != nullptr) {
    match.why_none = !checked_ ? "the disk cache is still being checked"
                     : index_.empty() ? "the disk cache is empty"
                                      : "no saved cache of this tenant shares a start with this prompt";
    if (other_best > 0) {
      match.other_model = true;
      match.why_none = "the saved cache was made by another model";
    }
  } else if (other_best > 0) {
    match.other_model = true;
    match.why_none = "the saved cache was made by another model";
  } else {
    match.why_none = "no saved cache shares a start with this prompt";
  }
  return match;
}

ShiftMatch DiskStore::FindShift(const ModelBinding& model, std::span<const int32_t> tokens,
                                int64_t min_kept, const std::string* only_tenant) const {
  ShiftMatch best;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, e] : index_) {
    if (!(e.info.model == model)) continue;
    if (only_tenant != nullptr && e.info.tenant != *only_tenant) continue;
    auto plan = PlanShift(e.tokens, tokens, min_kept);
    if (plan && !KeepsTheLatestMessages(*plan, static_cast<int64_t>(e.info.prompt_len))) continue;
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
    const uint64_t meta_bytes =
        MetadataBytesFor(model.model_fingerprint.size(), indexed.tenant.size(), indexed.n_tokens);
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
  if (out.payload_offset !=
      MetadataBytesFor(model.model_fingerprint.size(), indexed.tenant.size(), out.tokens.size())) {
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
  uint64_t last_used = now;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(id);
    if (it != index_.end()) {
      it->second.info.last_used_us = std::max(it->second.info.last_used_us, now);
      last_used = it->second.info.last_used_us;
      out.info = it->second.info;
    }
  }
  // Persist the use (LRU order after a restart); a failure only costs order.
  if (!out.info.id.empty()) env_->SetModifiedTime(PathOf(CacheFileName(id)), last_used);
  if (out.info.id.empty()) {  // removed meanwhile; the bytes are still good
    out.info.id = id;
    out.info.model = model;
    out.info.tenant = o.meta.tenant;
    out.info.n_tokens = o.tokens.size();
    out.info.tokens_hash = HashTokens(o.tokens);
    out.info.file_bytes = o.file_bytes;
    out.info.payload_bytes = o.plaintext_bytes - o.payload_offset;
    out.info.created_us = o.meta.created_us;
    out.info.last_used_us = now;
    out.info.prompt_len = o.meta.prompt_len;
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
  info.tenant = o.meta.tenant;
  info.n_tokens = o.tokens.size();
  info.tokens_hash = HashTokens(o.tokens);
  info.file_bytes = o.file_bytes;
  info.payload_bytes = o.plaintext_bytes - o.payload_offset;
  info.created_us = o.meta.created_us;
  info.last_used_us = o.meta.last_used_us;
  info.prompt_len = o.meta.prompt_len;
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

Result<RemovalStats> DiskStore::ForgetTenant(const std::string& tenant) {
  std::vector<std::pair<std::string, uint64_t>> victims;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++forgets_[tenant];
    for (auto it = index_.begin(); it != index_.end();) {
      if (it->second.info.tenant == tenant) {
        victims.emplace_back(it->first, it->second.info.file_bytes);
        it = index_.erase(it);
      } else {
        ++it;
      }
    }
  }
  RemovalStats stats;
  Status first;
  for (const auto& [id, bytes] : victims) {
    Status st = env_->RemoveFile(PathOf(CacheFileName(id)));
    if (st.ok() || st.code() == Status::Code::kNotFound) {
      ++stats.files;
      stats.bytes += bytes;
    } else if (first.ok()) {
      first = st;
    }
  }
  if (!first.ok()) return first;
  return stats;
}

Result<RemovalStats> DiskStore::Purge() {
  {
    // Saves that overlap this call delete their own files when they end.
    std::lock_guard<std::mutex> lock(mu_);
    ++purges_;
    ++purging_;
  }
  struct Done {
    DiskStore* store;
    ~Done() {
      std::lock_guard<std::mutex> lock(store->mu_);
      --store->purging_;
    }
  } done{this};
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
    auto info = env_->GetLinkInfo(path);
    if (info.ok() && !info->is_regular) continue;  // not the store's: left alone
    // In a shared folder a young temporary may be another node's write in
    // progress (the start-up check's rule): only older ones are removed.
    if (kind == FileNameKind::kTemp && options_.shared_folder &&
        (!info.ok() || info->mtime_micros + options_.stale_temp_age_us > env_->WallMicros())) {
      continue;
    }
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

Result<RemovalStats> DiskStore::RemoveSavedFiles(Env* env, const std::string& dir) {
  MX_ASSIGN_OR_RETURN(std::vector<std::string> names, env->ListDir(dir));
  RemovalStats stats;
  for (const std::string& name : names) {
    std::string id;
    const FileNameKind kind = ClassifyFileName(name, &id);
    if (kind == FileNameKind::kOther) continue;
    const std::string path = JoinPath(dir, name);
    auto info = env->GetLinkInfo(path);
    if (!info.ok() || !info->is_regular) continue;
    if (env->RemoveFile(path).ok()) {
      if (kind == FileNameKind::kCache) ++stats.files;
      stats.bytes += info->size_bytes;
    }
  }
  if (stats.files > 0) env->SyncDir(dir);
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
      if (name != kKeyFileName && name != kPolicyFileName && name != kLockFileName) ++report.ignored;
      continue;
    }
    // Never opened unless it is a regular file itself (not a symbolic link:
    // opening a FIFO would block, a link could point anywhere).
    auto link = env_->GetLinkInfo(path);
    if (!link.ok()) {
      if (link.status().code() != Status::Code::kNotFound) ++report.errors;
      continue;
    }
    if (!link->is_regular) {
      MX_LOG(kWarn) << "saved caches: " << path << " is " << FileTypeName(link->type)
                    << ", not a regular file; left alone";
      ++report.not_regular;
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
      // In a shared folder a young temporary may be another node's write in
      // progress (its appends keep its modification time fresh): only one
      // older than stale_temp_age_us, by a margin far beyond clock skew, is
      // a crash's leftover.
      const uint64_t now_us = env_->WallMicros();
      if (options_.shared_folder && link->mtime_micros + options_.stale_temp_age_us > now_us) continue;
      if (env_->RemoveFile(path).ok()) {
        ++report.removed_temporaries;
        report.removed_bytes += link->size_bytes;
      } else {
        ++report.errors;
      }
      continue;
    }
    Problem problem = Problem::kNone;
    Result<Opened> opened = ReadVerified(id, pool, /*place=*/nullptr, &problem);
    if (opened.ok()) {
      ++report.files_ok;
      report.bytes_ok += opened->file_bytes;
      std::lock_guard<std::mutex> lock(mu_);
      IndexLocked(id, std::move(opened).value(), link->mtime_micros);
      continue;
    }
    if (problem == Problem::kMissing) continue;  // removed meanwhile
    if (options_.shared_folder && (problem == Problem::kOtherKey || problem == Problem::kUnsupported)) {
      // Maybe a node of a newer version or one given another key: its
      // files are not ours to judge; the budget and TTL still apply to them.
      ++report.ignored;
      continue;
    }
    if (problem == Problem::kIo) {
      MX_LOG(kWarn) << "saved caches: " << opened.status().ToString();
      ++report.errors;
      continue;
    }
    MX_LOG(kInfo) << "saved caches: deleting " << opened.status().ToString();
    if (!env_->RemoveFile(path).ok()) {
      ++report.errors;
      continue;
    }
    report.removed_bytes += link->size_bytes;
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
