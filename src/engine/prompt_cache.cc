#include "engine/prompt_cache.h"

#include <algorithm>

#include "core/logging.h"

namespace mx::engine {
namespace {

cache::RamPoolOptions PoolOptions(const PromptCacheOptions& o, bool recurrent) {
  cache::RamPoolOptions p;
  p.limits.max_entries = static_cast<size_t>(o.slots);
  p.limits.budget_bytes = static_cast<size_t>(o.budget_bytes);
  p.lookup.recurrent = recurrent;
  p.lookup.context_shift = o.context_shift;
  return p;
}

// The tenant a lookup is limited to (null: every tenant's entries).
const std::string* OnlyTenant(const cache::LookupScope& scope) {
  return scope.isolated ? &scope.tenant : nullptr;
}

std::string Rereading(size_t n, const std::string& why) {
  return "re-reading the entire chat (" + std::to_string(n) + " tokens): " + why;
}


SequencePool::EvictFn DiskHook(const DiskLevel& disk, SequencePool::EvictFn on_evict) {
  if (disk.store == nullptr) return on_evict;
  return [store = disk.store, binding = disk.binding](SequencePool::Leaving leaving) {
    PendingSave save;
    save.model = binding;
    save.tenant = std::move(leaving.tenant);
    save.tokens = std::move(leaving.tokens);
    save.state = std::move(leaving.state);
    save.prompt_len = leaving.prompt_len;
    store->Enqueue(std::move(save));
  };
}

}  // namespace

cache::SnapshotLimits SnapshotLimitsFor(const PromptCacheOptions& options,
                                        const models::StateLayout& layout) {
  cache::SnapshotLimits l;
  l.every = options.snapshot_every;
  l.max_count = static_cast<size_t>(std::clamp<int64_t>(
      options.snapshot_count, 0, static_cast<int64_t>(models::SequenceState::kMaxSnapshots)));
  l.budget_bytes = options.snapshot_budget_bytes;
  l.snapshot_bytes = layout.recurrent_bytes();
  return l;
}

std::vector<int64_t> PlanStateSnapshots(models::SequenceState& state,
                                        cache::SnapshotRequest request,
                                        const cache::SnapshotLimits& limits) {
  if (!state.has_recurrent()) return {};
  const std::vector<int64_t> existing = state.SnapshotPositions();
  request.existing = existing;
  const cache::SnapshotChoice choice = cache::PlanSnapshots(request, limits);
  // Dropped first, so that requesting the new ones never pushes out one
  // the policy keeps (RequestSnapshot drops the oldest past its maximum).
  for (int64_t p : choice.drop) state.DropSnapshot(p);
  for (int64_t p : choice.take) state.RequestSnapshot(p);
  return choice.take;
}

PromptCache::PromptCache(const models::Runner& runner, const PromptCacheOptions& options, Env* env,
                         SequencePool::EvictFn on_evict, DiskLevel disk)
    : runner_(runner),
      env_(env),
      disk_(std::move(disk)),
      recurrent_(runner.layout()->n_recurrent > 0),
      pool_(PoolOptions(options, runner.layout()->n_recurrent > 0),
            [&runner] { return runner.NewSequence(); }, [env] { return env->WallMicros(); },
            DiskHook(disk_, std::move(on_evict))) {}

Result<LoadedState> PromptCache::LoadSaved(const std::string& id) {
  auto loaded = disk_.store->LoadState(id, disk_.binding, runner_.layout(), disk_.io_pool);
  if (!loaded.ok()) {
    // A damaged state is deleted (a file that fails its tags already was);
    // one that only does not fit this server (e.g. more tokens than the
    // context now holds) is left alone.
    const Status& st = loaded.status();
    const bool damaged = st.code() == Status::Code::kCorruption || st.code() == Status::Code::kNotSupported;
    MX_LOG(kWarn) << "saved cache " << id << " was not used" << (damaged ? " and is deleted: " : ": ")
                  << st.ToString();
    if (damaged) disk_.store->Remove(id);
    return st;
  }
  // Its first growth (the chat's next turn) copies it on the model's threads.
  MX_RETURN_IF_ERROR(runner_.Adopt(loaded->state.get()));
  return loaded;
}

bool PromptCache::TryDisk(std::span<const int32_t> prompt, int64_t in_memory, const cache::LookupScope& scope,
                          RefreshMode refresh, IndexWait* wait, CacheTicket* t, std::string* why) {
  cache::PrefixMatch m = disk_.store->Find(disk_.binding, prompt, OnlyTenant(scope));
  const int64_t n_prompt = static_cast<int64_t>(prompt.size());
  // A miss (nothing in RAM or the index serves this prompt well) may be a
  // chat another node saved since the index was read: look for new files
  // (bounded and rate-limited; a prompt served well never waits for it).
  const int64_t gain = disk_.store->min_gain_tokens();
  const int64_t best = std::max<int64_t>(in_memory, m.found ? static_cast<int64_t>(m.common_prefix) : 0);
  if (best + gain < n_prompt - 1 && refresh == RefreshMode::kHere) {
    const cache::RefreshReport r = disk_.store->Refresh();
    if (r.added > 0 || r.forgotten > 0) m = disk_.store->Find(disk_.binding, prompt, OnlyTenant(scope));
  } else if (best + gain < n_prompt - 1 && refresh == RefreshMode::kInBackground) {
    // Listed off the compute loop: only this request waits (none when no
    // refresh is due), and looks up again once it has ended.
    if (std::shared_ptr<IndexRefresh> r = disk_.store->RefreshInBackground(); r != nullptr) {
      wait->refresh_ = std::move(r);
      wait->since_us_ = env_->NowMicros();
      if (disk_.wake) wait->waker_ = wait->refresh_->AddWaker(disk_.wake);
      t->waiting_ = true;
      return true;
    }
  }
  // At least one prompt token is left to read, so the reply has logits.
  const int64_t use =
      m.found ? std::min<int64_t>(static_cast<int64_t>(m.common_prefix), n_prompt - 1) : 0;
  // A chat its client trimmed may continue a saved chat once the trimmed
  // span is removed (context shift; not for recurrent state).
  const cache::LookupOptions& lo = pool_.options().lookup;
  if (lo.context_shift && !recurrent_) {
    cache::ShiftMatch sm = disk_.store->FindShift(disk_.binding, prompt, lo.min_shift_kept, OnlyTenant(scope));
    if (sm.found) {
      sm.plan.kept = std::min<int64_t>(sm.plan.kept, n_prompt - 1 - sm.plan.drop_begin);
      const int64_t n_entry = static_cast<int64_t>(sm.entry.n_tokens);
      if (sm.plan.kept > 0 && sm.plan.reused() > std::max(use, in_memory) + disk_.store->min_gain_tokens() &&
          n_entry <= runner_.n_ctx() && TryDiskShift(prompt, sm, scope, t)) {
        return true;
      }
    }
  }
  if (!m.found) {
    *why = m.why_none;
    models::StateLayout made = *runner_.layout();
    if (m.other_layout_fingerprint != 0 &&
        made.KvTypesOf(m.other_layout_fingerprint, &made.k_type, &made.v_type)) {
      // This model's own chat, saved while the server ran another KV type.
      *why = "the saved cache was made with KV cache type " + made.KvTypesText() +
             " (this model runs " + runner_.layout()->KvTypesText() + ")";
    }
    return false;
  }
  const int64_t n_entry = static_cast<int64_t>(m.entry.n_tokens);
  if (n_entry > runner_.n_ctx()) {
    *why = "the best saved cache (" + std::to_string(n_entry) + " tokens) is longer than this context (" +
           std::to_string(runner_.n_ctx()) + ")";
    return false;
  }
  if (use < in_memory + disk_.store->min_gain_tokens()) {
    *why = "the best saved cache shares only " + std::to_string(std::max<int64_t>(use, 0)) + " tokens";
    return false;
  }
  const uint64_t t0 = env_->NowMicros();
  auto loaded = LoadSaved(m.entry.id);
  if (!loaded.ok()) {
    *why = "the saved cache could not be used (" + loaded.status().message() + ")";
    return false;
  }
  if (static_cast<int64_t>(cache::CommonPrefix(loaded->tokens, prompt)) < use) {
    disk_.store->Remove(m.entry.id);
    *why = "the saved cache could not be used (its tokens differ from the index)";
    return false;
  }
  std::unique_ptr<models::SequenceState> state = std::move(loaded->state);
  // Recurrent state cannot be rewound: cut at the newest snapshot (or the
  // end) at or before `use`.
  const int64_t cut = state->NewestCutAtOrBefore(use);
  if (state->has_recurrent()) {
    if (cut < in_memory + disk_.store->min_gain_tokens()) {
      *why = "the best saved cache has no recurrent snapshot within the shared start";
      return false;
    }
  }
  if (cut < state->n_tokens()) {
    if (Status cut_st = state->Truncate(cut); !cut_st.ok()) {
      *why = "the saved cache could not be cut (" + cut_st.message() + ")";
      return false;
    }
  }
  std::vector<int32_t> tokens(loaded->tokens.begin(), loaded->tokens.begin() + cut);
  t->lease_ = pool_.Adopt(std::move(tokens), std::move(state), scope.tenant);
  t->n_reused_ = cut;
  t->source_ = CacheSource::kDisk;
  t->diverged_at_ = static_cast<int64_t>(m.common_prefix);
  t->log_ = "reused " + std::to_string(cut) + " of " + std::to_string(n_prompt) +
            " tokens from disk (a saved cache of " + std::to_string(n_entry) + " tokens, loaded in " +
            std::to_string((env_->NowMicros() - t0) / 1000) + " ms)";
  // The whole saved chat now lives in RAM and goes back to disk when it
  // leaves the pool; keeping the file too would only duplicate it. So does
  // a chat cut only inside its last reply (the same chat one turn later,
  // its reply re-rendered by the template): the new turn supersedes it.
  if (cut == n_entry || cut >= static_cast<int64_t>(m.entry.prompt_len)) disk_.store->Remove(m.entry.id);
  return true;
}

bool PromptCache::TryDiskShift(std::span<const int32_t> prompt, const cache::ShiftMatch& sm,
                               const cache::LookupScope& scope, CacheTicket* t) {
  const uint64_t t0 = env_->NowMicros();
  auto loaded = LoadSaved(sm.entry.id);
  if (!loaded.ok()) return false;
  const cache::ShiftPlan& plan = sm.plan;
  std::unique_ptr<models::SequenceState> state = std::move(loaded->state);
  if (plan.drop_end > state->n_tokens() || !state->RemoveSpan(plan.drop_begin, plan.drop_end).ok() ||
      !state->Truncate(plan.reused()).ok()) {
    return false;
  }
  std::vector<int32_t> tokens = std::move(loaded->tokens);
  tokens.erase(tokens.begin() + plan.drop_begin, tokens.begin() + plan.drop_end);
  tokens.resize(static_cast<size_t>(plan.reused()));
  if (!std::equal(tokens.begin(), tokens.end(), prompt.begin())) return false;  // index and file disagree
  t->lease_ = pool_.Adopt(std::move(tokens), std::move(state), scope.tenant);
  t->n_reused_ = plan.reused();
  t->source_ = CacheSource::kDisk;
  t->log_ = "reused " + std::to_string(plan.reused()) + " of " + std::to_string(prompt.size()) +
            " tokens from disk after a context shift (a saved cache of " + std::to_string(sm.entry.n_tokens) +
            " tokens, dropped " + std::to_string(plan.drop_end - plan.drop_begin) + " trimmed tokens at position " +
            std::to_string(plan.drop_begin) + ", loaded in " + std::to_string((env_->NowMicros() - t0) / 1000) +
            " ms)";
  // The chat lives in RAM now (without the span its client dropped).
  disk_.store->Remove(sm.entry.id);
  return true;
}

std::string PromptCache::EndWait(IndexWait* wait) {
  wait->resumed_ = true;
  wait->StopWaking();
  const IndexRefresh& r = *wait->refresh_;
  const uint64_t now = env_->NowMicros();
  const uint64_t waited_ms = (now - wait->since_us_) / 1000;
  const std::string rest = "a prompt that waited " + std::to_string(waited_ms) +
                           " ms for it goes on with the files the index knows";
  if (!r.done()) {
    MX_LOG(kWarn) << "saved caches: the index refresh asked for " << (now - r.requested_us()) / 1000
                  << " ms ago has not ended (a slow shared folder?); " << rest;
    return "the saved-cache index refresh had not ended after " + std::to_string(waited_ms) + " ms";
  }
  if (!r.report().status.ok()) {
    MX_LOG(kWarn) << "saved caches: the index refresh failed (" << r.report().status.ToString()
                  << "); " << rest;
    return "the saved-cache index refresh failed";
  }
  return "";
}

Result<CacheTicket> PromptCache::Start(std::span<const int32_t> prompt, bool use_cache,
                                       bool has_images, const cache::LookupScope& scope,
                                       IndexWait* wait) {
  std::string note;
  if (wait != nullptr && wait->waiting()) {
    if (!wait->Ready(env_->NowMicros())) {
      CacheTicket t;
      t.waiting_ = true;
      return t;
    }
    note = EndWait(wait);
  }
  Result<CacheTicket> t = Lookup(prompt, use_cache, has_images, scope, wait);
  if (t.ok() && !note.empty()) t->log_ += " (" + note + ")";
  return t;
}

Result<CacheTicket> PromptCache::Lookup(std::span<const int32_t> prompt, bool use_cache,
                                        bool has_images, const cache::LookupScope& scope,
                                        IndexWait* wait) {
  CacheTicket t;
  if (!use_cache || has_images) {
    t.private_ = runner_.NewSequence();
    t.log_ = Rereading(prompt.size(), has_images ? "the prompt has images"
                                                 : "the request turned the cache off (cache_prompt: false)");
    return t;
  }
  std::string disk_why;
  if (disk_.store != nullptr) {
    // A chat that left RAM but is not written yet is still in memory.
    const int64_t ram_reuse = pool_.Peek(prompt, scope).n_reuse;
    const QueuedMatch queued = disk_.store->FindQueued(disk_.binding, prompt, OnlyTenant(scope));
    const int64_t queued_reuse = queued.found ? static_cast<int64_t>(queued.usable) : 0;
    const RefreshMode refresh = wait == nullptr     ? RefreshMode::kHere
                                : wait->resumed_ ? RefreshMode::kNone
                                                 : RefreshMode::kInBackground;
    const int64_t in_memory = std::max(ram_reuse, queued_reuse);
    if (TryDisk(prompt, in_memory, scope, refresh, wait, &t, &disk_why)) return t;
    if (queued_reuse > ram_reuse) {
      if (TryQueued(prompt, queued, queued_reuse, scope, &t)) return t;
      // It was written while we looked: it is on disk now (and in the index:
      // this node wrote it), so this second look never waits.
      disk_why.clear();
      const RefreshMode again = wait == nullptr ? RefreshMode::kHere : RefreshMode::kNone;
      if (TryDisk(prompt, ram_reuse, scope, again, wait, &t, &disk_why)) return t;
    }
  }
  MX_ASSIGN_OR_RETURN(t.lease_, pool_.Acquire(prompt, scope));
  const cache::LookupPlan& plan = t.lease_.plan();
  t.n_reused_ = t.lease_.n_reused();
  t.diverged_at_ = plan.lcp;
  switch (plan.kind) {
    case cache::ReuseKind::kNone:
      if (disk_why.empty()) {
        t.log_ = Rereading(prompt.size(), plan.why_none);
      } else if (disk_why.starts_with(
                     "the saved cache was made ")) {  // by another model / with another KV type
        t.log_ = Rereading(prompt.size(), disk_why + "; " + plan.why_none);
      } else {
        t.log_ = Rereading(prompt.size(), plan.why_none + "; " + disk_why);
      }
      break;
    case cache::ReuseKind::kInPlace:
    case cache::ReuseKind::kTruncateInPlace:
      t.source_ = CacheSource::kRam;
      t.log_ = "reused " + std::to_string(t.n_reused_) + " of " + std::to_string(prompt.size()) +
               " tokens from RAM";
      if (plan.kind == cache::ReuseKind::kTruncateInPlace) {
        t.log_ += recurrent_ ? " from a snapshot" : "";
        t.log_ += " (cut the cached chat's last " + std::to_string(plan.entry_len - t.n_reused_) +
                  " tokens)";
      }
      break;
    case cache::ReuseKind::kCopyPrefix:
      t.source_ = CacheSource::kCopy;
      t.log_ = "reused " + std::to_string(t.n_reused_) + " of " + std::to_string(prompt.size()) +
               (recurrent_ ? " tokens from a copy of a cached chat's snapshot"
                           : " tokens from a copy of a cached chat's shared start");
      break;
    case cache::ReuseKind::kShiftInPlace:
      t.source_ = CacheSource::kRam;
      t.log_ = "reused " + std::to_string(t.n_reused_) + " of " + std::to_string(prompt.size()) +
               " tokens from RAM after a context shift (dropped " +
               std::to_string(plan.shift.drop_end - plan.shift.drop_begin) + " trimmed tokens at position " +
               std::to_string(plan.shift.drop_begin) + ")";
      break;
  }
  return t;
}

void PromptCache::Finish(CacheTicket ticket, std::vector<int32_t> tokens, int64_t prompt_len) {
  if (ticket.lease_.valid()) ticket.lease_.Commit(std::move(tokens), prompt_len);
}

Result<CacheTicket> PromptCache::Fork(CacheTicket& from, std::span<const int32_t> tokens,
                                      const std::string& tenant) {
  const auto n = static_cast<int64_t>(tokens.size());
  MX_ASSIGN_OR_RETURN(std::unique_ptr<models::SequenceState> copy, from.state().ClonePrefix(n));
  CacheTicket t;
  t.n_reused_ = from.n_reused_;
  t.diverged_at_ = from.diverged_at_;
  t.source_ = from.source_;
  t.log_ = "a further choice continues from a copy of the prompt's state (" + std::to_string(n) +
           " tokens)";
  if (from.pooled()) {
    t.lease_ = pool_.Adopt(std::vector<int32_t>(tokens.begin(), tokens.end()), std::move(copy), tenant);
  } else {
    t.private_ = std::move(copy);
  }
  return t;
}

void PromptCache::Abandon(CacheTicket ticket) {
  // Destroying an uncommitted lease drops its entry.
  ticket.lease_ = SequencePool::Lease();
}

bool PromptCache::TryQueued(std::span<const int32_t> prompt, const QueuedMatch& match, int64_t use,
                            const cache::LookupScope& scope, CacheTicket* t) {
  const uint64_t t0 = env_->NowMicros();
  std::vector<int32_t> tokens;
  std::unique_ptr<models::SequenceState> state;
  const char* how = nullptr;
  CacheSource source = CacheSource::kRam;
  if (static_cast<int64_t>(match.n_tokens) == use || use >= match.prompt_len) {
    // The same chat, one turn later (its last reply may read differently
    // now, as the pool's truncate-in-place rule allows): take the state
    // itself back, so the superseded turn is never written.
    auto taken = disk_.store->TakeQueued(match.seq);
    if (!taken.ok()) return false;  // written meanwhile: it is on disk now
    // The queued state may have been made by another runner of this file
    // (its model was unloaded and loaded again, or an identical file
    // continues it): it becomes this runner's before anything else.
    const int64_t cut = taken->state->NewestCutAtOrBefore(use);
    Status adopted = Status::InvalidArgument("the queued chat is not what the queue's index saw");
    if (cut > 0 && std::equal(taken->tokens.begin(), taken->tokens.begin() + cut, prompt.begin()) &&
        (cut == taken->state->n_tokens() || taken->state->Truncate(cut).ok())) {
      adopted = runner_.Adopt(taken->state.get());
    }
    if (!adopted.ok()) {
      // It goes back to the queue (and so to disk), never lost.
      MX_LOG(kWarn) << "prompt cache: a chat waiting in the write queue was not continued ("
                    << adopted.message() << "); it stays queued";
      // (A state cut above keeps the start of its tokens.)
      taken->tokens.resize(static_cast<size_t>(taken->state->n_tokens()));
      taken->prompt_len = std::min(taken->prompt_len, taken->state->n_tokens());
      disk_.store->Enqueue(std::move(taken).value());
      return false;
    }
    tokens = std::move(taken->tokens);
    state = std::move(taken->state);
    tokens.resize(static_cast<size_t>(cut));
    how = cut == static_cast<int64_t>(match.n_tokens) ? "taken back from the write queue"
                                                       : "taken back from the write queue, its last reply cut";
  } else {
    // Only a start is shared: copy it, the whole chat is still saved.
    auto copy = disk_.store->CopyQueued(match.seq, use, &tokens);
    if (!copy.ok()) return false;
    state = std::move(copy).value();
    const int64_t n = static_cast<int64_t>(tokens.size());
    if (n == 0 || !std::equal(tokens.begin(), tokens.end(), prompt.begin())) return false;
    if (Status adopted = runner_.Adopt(state.get()); !adopted.ok()) {
      MX_LOG(kWarn) << "prompt cache: a copy of a chat waiting in the write queue was not used ("
                    << adopted.message() << ")";
      return false;
    }
    how = "copied from a chat waiting in the write queue";
    source = CacheSource::kCopy;
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  t->lease_ = pool_.Adopt(std::move(tokens), std::move(state), scope.tenant);
  t->n_reused_ = n;
  t->source_ = source;
  t->diverged_at_ = static_cast<int64_t>(match.common_prefix);
  t->log_ = "reused " + std::to_string(n) + " of " + std::to_string(prompt.size()) + " tokens from RAM (" +
            how + ", in " + std::to_string((env_->NowMicros() - t0) / 1000) + " ms)";
  return true;
}

void PromptCache::FlushToDisk() {
  if (disk_.store == nullptr) return;
  const size_t n = pool_.Stats().size();
  pool_.Flush();
  if (n > 0) {
    MX_LOG(kInfo) << "saved caches: " << n << " cached chats queued to be written";
  }
}

void PromptCache::Recharge() { pool_.Recharge(); }

SequencePool::Forgotten PromptCache::ForgetTenant(const std::string& tenant) {
  return pool_.ForgetTenant(tenant);
}

bool PromptCache::WriteOnePending() {
  if (disk_.store == nullptr) return false;
  return disk_.store->WriteOne(disk_.binding, disk_.io_pool);
}

}  // namespace mx::engine
