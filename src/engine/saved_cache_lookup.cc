// SavedCacheStore, the side that serves prompts (saved_cache.h): states
// still in the write queue (find, take back, copy), the saved files (find,
// load into a state) and forgetting a tenant. The queue, the writer and the
// policy are in saved_cache.cc, refreshing the index in
// saved_cache_refresh.cc.
#include <algorithm>

#include "cache/policy/cache_policy.h"
#include "core/logging.h"
#include "engine/saved_cache.h"

namespace mx::engine {

QueuedMatch SavedCacheStore::FindQueued(const cache::ModelBinding& model, std::span<const int32_t> prompt,
                                        const std::string* only_tenant) const {
  QueuedMatch best;
  std::lock_guard<std::mutex> lock(mu_);
  if (prompt.empty()) return best;
  // Newest first, so that ties go to the most recent state. The writer only
  // reads a queued state and takers move it out under mu_, so reading its
  // cut points here is safe.
  for (auto it = queue_.rbegin(); it != queue_.rend(); ++it) {
    const Node& n = *it;
    if (!(n->item.model == model) || n->abort) continue;
    if (only_tenant != nullptr && n->item.tenant != *only_tenant) continue;
    const size_t lcp = cache::CommonPrefix(n->item.tokens, prompt);
    const size_t usable = static_cast<size_t>(
        n->item.state->NewestCutAtOrBefore(static_cast<int64_t>(std::min(lcp, prompt.size() - 1))));
    if (usable == 0) continue;
    if (usable > best.usable || (usable == best.usable && lcp > best.common_prefix)) {
      best.found = true;
      best.seq = n->seq;
      best.common_prefix = lcp;
      best.usable = usable;
      best.n_tokens = n->item.tokens.size();
      best.prompt_len = n->item.prompt_len;
    }
  }
  return best;
}

Result<PendingSave> SavedCacheStore::TakeQueued(uint64_t seq) {
  std::unique_lock<std::mutex> lock(mu_);
  Node node;
  for (const Node& n : queue_) {
    if (n->seq == seq) node = n;
  }
  if (node == nullptr) return Status::NotFound("the cached chat is no longer waiting to be written");
  node->abort = true;
  gate_.Wake();
  // A write in progress stops at its next slice, or finishes (then the state
  // is on disk and no longer queued).
  queue_cv_.wait(lock, [&] { return node->readers == 0; });
  bool linked = false;
  for (const Node& n : queue_) linked = linked || n == node;
  if (!linked) return Status::NotFound("the cached chat was written to disk meanwhile");
  UnlinkLocked(node);
  return std::move(node->item);
}

Result<std::unique_ptr<models::SequenceState>> SavedCacheStore::CopyQueued(uint64_t seq, int64_t max_tokens,
                                                                           std::vector<int32_t>* tokens) {
  Node node;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Node& n : queue_) {
      if (n->seq == seq && !n->abort) node = n;
    }
    if (node == nullptr) return Status::NotFound("the cached chat is no longer waiting to be written");
    ++node->readers;  // read-only, beside the writer
  }
  const models::SequenceState& state = *node->item.state;
  const int64_t cut = state.NewestCutAtOrBefore(max_tokens);
  auto copy = cut > 0 ? state.ClonePrefix(cut) : Result<std::unique_ptr<models::SequenceState>>(
                                                      Status::NotFound("no point to cut the queued chat at"));
  if (copy.ok()) tokens->assign(node->item.tokens.begin(), node->item.tokens.begin() + cut);
  {
    std::lock_guard<std::mutex> lock(mu_);
    --node->readers;
  }
  queue_cv_.notify_all();
  return copy;
}

cache::PrefixMatch SavedCacheStore::Find(const cache::ModelBinding& model, std::span<const int32_t> prompt,
                                         const std::string* only_tenant) const {
  auto d = disk();
  if (d == nullptr) {
    cache::PrefixMatch none;
    none.why_none = "the disk cache is off";
    return none;
  }
  return d->FindLongestPrefix(model, prompt, only_tenant);
}

cache::ShiftMatch SavedCacheStore::FindShift(const cache::ModelBinding& model, std::span<const int32_t> prompt,
                                             int64_t min_kept, const std::string* only_tenant) const {
  auto d = disk();
  if (d == nullptr) return cache::ShiftMatch{};
  return d->FindShift(model, prompt, min_kept, only_tenant);
}

Result<cache::RemovalStats> SavedCacheStore::ForgetTenant(const std::string& tenant) {
  cache::RemovalStats queued;
  std::shared_ptr<cache::DiskStore> d;
  {
    std::lock_guard<std::mutex> lock(mu_);
    d = disk_;
    for (auto it = queue_.begin(); it != queue_.end();) {
      const Node& n = *it;
      if (n->item.tenant != tenant) {
        ++it;
        continue;
      }
      // A state being written is freed by its writer once it lets go; its
      // file, should it be finished, is deleted by the disk store.
      n->abort = true;
      ++queued.files;
      queued.bytes += n->bytes;
      queued_bytes_ -= n->bytes;
      it = queue_.erase(it);
    }
  }
  gate_.Wake();
  queue_cv_.notify_all();
  if (d == nullptr) return queued;
  MX_ASSIGN_OR_RETURN(cache::RemovalStats files, d->ForgetTenant(tenant));
  files.files += queued.files;
  files.bytes += queued.bytes;
  return files;
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
