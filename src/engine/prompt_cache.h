// PromptCache: the RAM pool of one loaded model, specialised to engine
// states (SPEC §2, §8). A request starts here: it gets the state to continue
// from, how many prompt tokens that state already holds, and the log line
// saying what the cache did; when the request ends it hands the state back
// with the tokens it now holds.
//
// With a DiskLevel (saved caches, SPEC §5, docs/saved_caches.md) entries
// leaving the pool are queued for the disk, and Start() loads a saved cache
// of this exact model instead when it shares a longer start with the prompt
// than anything in RAM (by at least the store's min_gain_tokens).
//
// A prompt that misses in RAM, the write queue and the saved files' index
// first refreshes the index (another node may have saved its chat since).
// Given an IndexWait, Start never does that on the calling thread: it asks
// the store's refresher thread and returns a waiting ticket, and the
// scheduler keeps that one request out of its batches until the refresh
// ends (docs/cluster.md).
//
// Thread-safety: Start/Finish/FlushToDisk/WriteOnePending are called on the
// model's compute loop (the thread that also runs Forward), which keeps
// copies of in-use entries safe; Stats/counters may be read from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cache/policy/snapshot_policy.h"
#include "cache/ram_pool/ram_pool.h"
#include "core/env.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/cache_events.h"
#include "engine/saved_cache.h"
#include "models/runner.h"
#include "models/sequence_state.h"

namespace mx::engine {

struct SequenceTraits {
  // The memory a state holds (backed pages, snapshots), not its content.
  static size_t Bytes(const models::SequenceState& s) { return s.MemoryBytes(); }
  static Result<std::unique_ptr<models::SequenceState>> CopyPrefix(const models::SequenceState& s,
                                                                   int64_t n) {
    return s.ClonePrefix(n);
  }
  static Status Truncate(models::SequenceState& s, int64_t n) { return s.Truncate(n); }
  static std::vector<int64_t> CutPoints(const models::SequenceState& s) { return s.SnapshotPositions(); }
  static int64_t NewestCut(const models::SequenceState& s, int64_t n) {
    return s.NewestCutAtOrBefore(n);
  }
  static Status RemoveSpan(models::SequenceState& s, int64_t begin, int64_t end) {
    return s.RemoveSpan(begin, end);
  }
};
using SequencePool = cache::RamPool<models::SequenceState, SequenceTraits>;

struct PromptCacheOptions {
  int64_t slots = 4;                       // MATRICXON_PROMPT_CACHE_SLOTS (1..64)
  uint64_t budget_bytes = uint64_t{2048} << 20;  // MATRICXON_PROMPT_CACHE_BUDGET_MB
  bool context_shift = true;               // MATRICXON_PROMPT_CACHE_CONTEXT_SHIFT
  int64_t snapshot_every = 256;            // MATRICXON_PROMPT_CACHE_SNAPSHOT_EVERY (hybrid models)
  int64_t snapshot_count = 8;              // MATRICXON_PROMPT_CACHE_SNAPSHOTS (1..8)
  // MATRICXON_PROMPT_CACHE_SNAPSHOT_MB: most bytes of recurrent snapshots
  // per cached chat (hybrid models).
  uint64_t snapshot_budget_bytes = uint64_t{256} << 20;
  // The server's saved caches (the disk level), optional; must outlive the
  // schedulers using it. The scheduler turns it into a DiskLevel.
  SavedCacheStore* saved = nullptr;
};

// The disk level of one model's cache: the server's saved-cache store and
// this model's binding. States leaving the pool are queued there; a prompt
// whose longest match is a saved cache (longer than any RAM match by at
// least store->min_gain_tokens()) loads it back. `io_pool` (the runner's
// threads, optional) opens chunks in parallel; REQUIRES: used only on the
// compute loop.
// `wake` (optional) is called, from the store's refresher thread, when a
// refresh that a request of this model waits for (IndexWait) has ended; it
// must only notify the compute loop.
struct DiskLevel {
  SavedCacheStore* store = nullptr;
  cache::ModelBinding binding;
  ThreadPool* io_pool = nullptr;
  std::function<void()> wake = {};
};

// One request's wait for a refresh of the saved-cache index (PromptCache::
// Start). Owned by the request and used on the compute loop; Ready() is
// cheap and lock-free. Destroying it (or the request going on) stops the
// wake-ups.
class IndexWait {
 public:
  IndexWait() = default;
  IndexWait(const IndexWait&) = delete;
  IndexWait& operator=(const IndexWait&) = delete;
  ~IndexWait() { StopWaking(); }

  // Start returned a waiting ticket and has not gone on yet.
  bool waiting() const { return refresh_ != nullptr && !resumed_; }
  // Whether Start should be called again: the refresh ended, or its
  // deadline (IndexRefresh::deadline_us) has passed. True when not waiting.
  bool Ready(uint64_t now_us) const {
    return !waiting() || refresh_->done() || now_us >= refresh_->deadline_us();
  }
  // The NowMicros by which Ready() turns true at the latest (0: not waiting).
  uint64_t deadline_us() const { return waiting() ? refresh_->deadline_us() : 0; }
  // Env::NowMicros when the wait began (0: it never did).
  uint64_t since_us() const { return since_us_; }

 private:
  friend class PromptCache;
  void StopWaking() {
    if (refresh_ != nullptr) refresh_->RemoveWaker(waker_);
    waker_ = 0;
  }
  std::shared_ptr<IndexRefresh> refresh_;
  uint64_t waker_ = 0;
  uint64_t since_us_ = 0;
  bool resumed_ = false;  // Start went on after it
};

// One request's hold on a state: either a pool lease (cache on) or a private
// state that the pool never sees (cache off, images).
class CacheTicket {
 public:
  models::SequenceState& state() { return lease_.valid() ? lease_.state() : *private_; }
  int64_t n_reused() const { return n_reused_; }
  // Where the prompt left the cached chat it was matched with (their common
  // prefix; 0 when none): the snapshot policy keeps a snapshot there.
  int64_t diverged_at() const { return diverged_at_; }
  const std::string& log_line() const { return log_; }
  // Where the reused tokens came from (kNone when nothing was reused).
  CacheSource source() const { return n_reused_ > 0 ? source_ : CacheSource::kNone; }
  bool pooled() const { return lease_.valid(); }
  // The request waits for a refresh of the saved-cache index: the ticket
  // holds no state (state() must not be called); call Start again with the
  // same IndexWait once it is Ready().
  bool waiting() const { return waiting_; }

 private:
  friend class PromptCache;
  bool waiting_ = false;
  SequencePool::Lease lease_;
  std::unique_ptr<models::SequenceState> private_;
  int64_t n_reused_ = 0;
  int64_t diverged_at_ = 0;
  CacheSource source_ = CacheSource::kNone;
  std::string log_;
};

// Hybrid models: the snapshot limits of `options` for states of `layout`
// (one snapshot is layout.recurrent_bytes()).
cache::SnapshotLimits SnapshotLimitsFor(const PromptCacheOptions& options,
                                        const models::StateLayout& layout);

// Hybrid models: chooses the snapshots `state` keeps while a prompt is read
// from request.n_reused on (cache::PlanSnapshots over the snapshots it holds
// now; request.existing is filled here), drops the others and requests the
// new ones. Returns the positions requested. No-op without recurrent layers.
std::vector<int64_t> PlanStateSnapshots(models::SequenceState& state,
                                        cache::SnapshotRequest request,
                                        const cache::SnapshotLimits& limits);

class PromptCache {
 public:
  // `disk` (optional): the saved-cache level; store must outlive the cache.
  // `on_evict` (optional) sees leaving entries when there is no disk level.
  PromptCache(const models::Runner& runner, const PromptCacheOptions& options, Env* env,
              SequencePool::EvictFn on_evict = {}, DiskLevel disk = {});

  // Picks the state for `prompt`. With use_cache false or images in the
  // prompt, the pool is neither read nor changed. `scope`: the tenant the
  // state will belong to; when isolated, only that tenant's chats (RAM,
  // write queue, saved files) are candidates.
  // A prompt that nothing in RAM, the write queue or the index serves well
  // (more than the store's min_gain_tokens could still be gained) first
  // refreshes the index, when one is due. Without `wait` that refresh runs
  // here, on the calling thread (tools, tests). With `wait` it runs on the
  // store's refresher thread (or a running one is joined) and Start returns
  // at once a waiting ticket, touching nothing; called again with the same
  // `wait` once wait->Ready(), it looks up with what the refresh found, or,
  // when the refresh failed or passed its deadline, with what the index
  // knows (logged). The pool is used only by a call that returns a
  // non-waiting ticket.
  Result<CacheTicket> Start(std::span<const int32_t> prompt, bool use_cache, bool has_images,
                            const cache::LookupScope& scope = {}, IndexWait* wait = nullptr);
  // The request is over and the state holds exactly `tokens`: its prompt's
  // first `prompt_len` tokens, then the reply. A pooled state goes back to
  // the pool; a private one is freed.
  void Finish(CacheTicket ticket, std::vector<int32_t> tokens, int64_t prompt_len);
  // The request failed: a pooled entry is dropped (its state may be partial).
  void Abandon(CacheTicket ticket);
  // A further choice of a request (n > 1) whose prompt `from` has just read:
  // a new ticket holding a copy of `from`'s state, which holds exactly
  // `tokens`. Pooled (a new in-use entry of `tenant`, all of `tokens`
  // reused) when `from` is, private otherwise.
  Result<CacheTicket> Fork(CacheTicket& from, std::span<const int32_t> tokens,
                           const std::string& tenant);
  // Unload / shutdown: every idle entry leaves the pool for the write queue
  // (the store's writer writes them; nothing waits here). REQUIRES: no
  // request runs (the loop stopped).
  void FlushToDisk();
  // After a forward pass: the pool counts what in-use states hold now and
  // evicts idle entries if that is over its budget.
  void Recharge();
  // Removes `tenant`'s idle chats from the pool (ones in use go when their
  // request ends); nothing is written. Thread-safe.
  SequencePool::Forgotten ForgetTenant(const std::string& tenant);
  // Writes one queued state of this model now, on the calling thread (the
  // server's writer thread does this otherwise; tools and tests). False
  // when none was queued. REQUIRES: no request of this model runs.
  bool WriteOnePending();

  SequencePool& pool() { return pool_; }
  const SequencePool& pool() const { return pool_; }

 private:
  // How a lookup that misses refreshes the index: on this thread, on the
  // store's refresher thread (the request then waits), or not (a refresh
  // was waited for already).
  enum class RefreshMode { kHere, kInBackground, kNone };
  // Tries the disk level for `prompt` when it beats `ram` (the pool's own
  // plan). On success fills `t` and returns true; otherwise sets *why to
  // what the disk said (for the log line).
  // `in_memory`: the most tokens RAM or the write queue would reuse.
  // kInBackground: a miss asks for a refresh, `wait` begins waiting for it
  // and `t` becomes a waiting ticket (returns true).
  bool TryDisk(std::span<const int32_t> prompt, int64_t in_memory, const cache::LookupScope& scope,
               RefreshMode refresh, IndexWait* wait, CacheTicket* t, std::string* why);
  // The request stops waiting for its refresh; logs when it failed or has
  // not ended (the prompt then goes on with what the index knows) and
  // returns a note for its log line ("" when the refresh ended well).
  std::string EndWait(IndexWait* wait);
  // Start without the wait's bookkeeping: the lookup itself.
  Result<CacheTicket> Lookup(std::span<const int32_t> prompt, bool use_cache, bool has_images,
                             const cache::LookupScope& scope, IndexWait* wait);
  // Continues from a state still waiting in the write queue (`use` of its
  // tokens): takes it back when the prompt continues all of it, else copies
  // its shared start. False when it was written meanwhile.
  bool TryQueued(std::span<const int32_t> prompt, const QueuedMatch& match, int64_t use,
                 const cache::LookupScope& scope, CacheTicket* t);
  // Loads a saved chat whose prompt is a trimmed version of it and removes
  // the trimmed span (context shift). False (logged) when it cannot.
  bool TryDiskShift(std::span<const int32_t> prompt, const cache::ShiftMatch& match,
                    const cache::LookupScope& scope, CacheTicket* t);
  // Loads a saved file straight into a new state (SavedCacheStore::
  // LoadState), checking that its state holds its tokens; a damaged file is
  // deleted.
  Result<LoadedState> LoadSaved(const std::string& id);

  const models::Runner& runner_;
  Env* env_;
  DiskLevel disk_;
  const bool recurrent_;  // a hybrid model: reuse restarts from snapshots
  SequencePool pool_;
};

}  // namespace mx::engine
