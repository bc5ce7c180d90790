// SavedCacheStore: the disk level of the prompt cache (SPEC §5-§7), one per
// server, one folder shared by every loaded model. It owns the key, the
// sealed DiskStore, the write-behind queue of states that left a model's
// RAM pool, the thread that writes them and the ComputeGate through which
// that thread shares the machine with every model's compute loop.
//
// When states are written (docs/saved_caches.md): Enqueue() only queues (the
// state object itself, no copy, no I/O; nothing is dropped for lack of
// room). The writer thread writes the oldest queued state in slices of one
// batch of sealed chunks that never overlap a forward pass of any model:
// at once and on every core while no model has a request; while replies
// run, only once a state has waited `defer_ms` for such a moment, and then
// with at most `busy_share` of the time; with no share limit while the
// queue holds more than `queue_budget_bytes`. A queued state is still in RAM
// and still serves prompts (FindQueued / TakeQueued / CopyQueued). Unload
// only queues; DrainAll() writes everything at shutdown, for at most
// flush_timeout_ms, and logs what it could not write. States of a model are
// matched only against files of that exact model (ModelBinding: SHA-256 of
// the GGUF bytes + the state-layout fingerprint).
//
// Refreshing the index (docs/cluster.md): a prompt that misses everywhere
// may be a chat another node saved since the index was read.
// RefreshInBackground() runs that refresh on the store's own refresher
// thread, never on a compute loop; the request that needs it waits for it
// (PromptCache::Start with an IndexWait) while every other reply goes on.
//
// Runtime policy (enabled, budget, TTL) is applied here; it is persisted by
// the server (prompt_cache_policy.json), which reads no JSON below it.
//
// Thread-safety: every method may be called from any thread. The DiskStore
// is held by shared_ptr, so turning saving off while a state is written is
// safe: a file finished after the purge is deleted at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <list>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cache/crypto/key_store.h"
#include "cache/disk_store/disk_store.h"
#include "core/env.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/compute_gate.h"
#include "models/model.h"
#include "models/sequence_state.h"

namespace mx::engine {

struct SavedCacheOptions {
  std::string dir = "./data/prompt_cache";         // MATRICXON_PROMPT_CACHE_DIR
  bool enabled = true;                             // MATRICXON_PERSIST_PROMPT_CACHE (or the policy file)
  uint64_t budget_bytes = uint64_t{4096} << 20;    // MATRICXON_PERSIST_CACHE_BUDGET_MB
  uint64_t ttl_us = uint64_t{168} * 3600 * 1000000;  // MATRICXON_PERSIST_CACHE_TTL_HOURS (0: never)
  std::string passphrase;                          // MATRICXON_CACHE_KEY
  bool cluster_node = false;                       // MATRICXON_CLUSTER_NODE
  // Queued states beyond this many bytes are written without waiting for
  // their share of the time (they are never dropped).
  uint64_t queue_budget_bytes = uint64_t{256} << 20;
  // While replies run, a queued state waits this long for a moment with no
  // request before it is written in slices between forward passes.
  uint64_t defer_ms = 2000;     // MATRICXON_PERSIST_WRITE_DEFER_MS
  double busy_share = 0.10;     // MATRICXON_PERSIST_WRITE_SHARE (percent / 100)
  bool background_writer = true;  // false: only WriteOne / Drain / DrainAll write (tests, tools)
  int writer_threads = 0;       // threads sealing while no model has a request (0: physical cores)
  // A saved cache is loaded only when it reuses at least this many prompt
  // tokens more than the best RAM entry (loading costs a file read and a
  // decryption; a few tokens are cheaper to re-read).
  int64_t min_gain_tokens = 16;
  uint64_t flush_timeout_ms = 60000;  // shutdown (DrainAll): longest time spent writing
  bool check_in_background = true;    // false: StartupCheck before Open returns (tools, tests)
  // A request waits at most this long after its index refresh was asked for
  // (RefreshInBackground), then goes on with what the index knows (logged);
  // the refresh itself goes on and serves later prompts.
  uint64_t refresh_wait_ms = 2000;
};

// The exact-model binding of a runner's states: a SHA-256 of the whole GGUF
// file's bytes ("sha256x64m:" + hex: SHA-256 over the file size and the
// SHA-256 of each 64 MiB piece, so pieces hash in parallel on `pool` when
// given) + StateLayout::Fingerprint(). Reads the whole mmapped file once
// (the caller logs the time). REQUIRES: nobody else uses `pool` meanwhile.
// `cancel` (optional): once it reads true the pieces left are not hashed and
// the binding is meaningless (the caller, giving up, throws it away).
cache::ModelBinding ComputeModelBinding(const models::Model& model, const models::StateLayout& layout,
                                        ThreadPool* pool = nullptr,
                                        const std::atomic<bool>* cancel = nullptr);

// What GET /api/cache/persistence reports.
struct SavedCacheUsage {
  bool enabled = false;
  uint64_t budget_bytes = 0;
  uint64_t ttl_us = 0;
  uint64_t used_bytes = 0;
  size_t files = 0;
  cache::KeySource key_source = cache::KeySource::kNone;
  size_t queued = 0;  // states waiting to be written
  uint64_t queued_bytes = 0;  // the memory they hold
  uint64_t writes = 0;        // files written since start
  ComputeGateStats gate;      // how writing shared the machine with replies
};

// One state that left a RAM pool, waiting to be written.
struct PendingSave {
  cache::ModelBinding model;
  std::vector<int32_t> tokens;
  std::unique_ptr<models::SequenceState> state;
  int64_t prompt_len = 0;  // of tokens, how many came from a prompt (the rest were generated)
  std::string tenant = {};  // whose chat it is ("" none): sealed with it, bound into its file key
};

// The queued state of `model` that a prompt can reuse the most of.
struct QueuedMatch {
  bool found = false;
  uint64_t seq = 0;           // which queued state (TakeQueued / CopyQueued)
  size_t common_prefix = 0;   // tokens shared with the prompt
  // Of those, what a request can reuse: at most all but the prompt's last
  // token, cut back to where the state can be cut (a recurrent state: its
  // end or a snapshot; 0 when none lies within). Read from the state itself.
  size_t usable = 0;
  size_t n_tokens = 0;        // tokens the queued state holds
  int64_t prompt_len = 0;     // ... of which came from its last prompt
};

// A saved cache loaded back into an engine state.
struct LoadedState {
  std::vector<int32_t> tokens;
  std::unique_ptr<models::SequenceState> state;
};

// One refresh of the index run on the store's refresher thread
// (SavedCacheStore::RefreshInBackground), shared by every request that
// waits for it. Thread-safe.
class IndexRefresh {
 public:
  IndexRefresh(uint64_t requested_us, uint64_t deadline_us)
      : requested_us_(requested_us), deadline_us_(deadline_us) {}
  IndexRefresh(const IndexRefresh&) = delete;
  IndexRefresh& operator=(const IndexRefresh&) = delete;

  // Whether it has ended (lock-free); report() is final from then on.
  bool done() const { return done_.load(std::memory_order_acquire); }
  // What it found. REQUIRES: done().
  const cache::RefreshReport& report() const { return report_; }
  // Env::NowMicros when it was asked for, and after which no request waits
  // for it any more (asked for + SavedCacheOptions::refresh_wait_ms).
  uint64_t requested_us() const { return requested_us_; }
  uint64_t deadline_us() const { return deadline_us_; }
  // Calls `wake` once, on the refresher thread, when the refresh ends; it
  // must only notify (it runs under this object's lock). Returns an id for
  // RemoveWaker, or 0 when the refresh has already ended (`wake` is then
  // never called: look at done()).
  uint64_t AddWaker(std::function<void()> wake);
  // After it returns, the waker `id` is neither running nor ever called.
  // 0 and unknown ids are ignored.
  void RemoveWaker(uint64_t id);
  // Ends the refresh with `report` and calls the wakers (the refresher).
  void Finish(cache::RefreshReport report);

 private:
  const uint64_t requested_us_;
  const uint64_t deadline_us_;
  std::atomic<bool> done_{false};
  cache::RefreshReport report_;  // written once, before done_
  std::mutex mu_;
  uint64_t next_waker_ = 0;                                // guarded by mu_
  std::map<uint64_t, std::function<void()>> wakers_;       // guarded by mu_
};

// The file in the saved-cache folder that a server holds locked while it
// runs (SavedCacheStore::Open): exclusively, or shared by cluster nodes.
inline constexpr char kFolderLockFileName[] = "prompt_cache.lock";

class SavedCacheStore {
 public:
  // Creates the folder (0700); when `options.enabled`, opens the key
  // (KeyStore) and the DiskStore and starts the start-up check. A key that
  // cannot be had (cluster node without MATRICXON_CACHE_KEY, a key file
  // readable by others, ...) is not an error: saving is then off and
  // disabled_reason() says why (logged). Errors for a folder that cannot
  // be created, and ResourceExhausted for one another server uses: the
  // folder is locked (kFolderLockFileName) for as long as the store lives,
  // exclusively, or shared with other cluster nodes when
  // options.cluster_node, since a second server on the same folder would
  // delete the first one's files (another key, saving off, its own limits).
  static Result<std::unique_ptr<SavedCacheStore>> Open(Env* env, const SavedCacheOptions& options);
  // Waits for the start-up check; pending saves are dropped (drain first).
  ~SavedCacheStore();

  bool enabled() const;
  // "the disk cache is off" + why (empty when enabled).
  std::string disabled_reason() const;
  const std::string& dir() const { return options_.dir; }
  int64_t min_gain_tokens() const { return options_.min_gain_tokens; }
  uint64_t flush_timeout_ms() const { return options_.flush_timeout_ms; }
  SavedCacheUsage Usage() const;

  // --- Policy (applied at once; the caller persists it).
  // Whether SetEnabled(true) would succeed (OK) or why not.
  Status CanEnable() const;
  // on: opens the key and store (if not open) and starts their check.
  // off: drops the queue and deletes every saved file. Returns what was deleted.
  Result<cache::RemovalStats> SetEnabled(bool on);
  // New budget and TTL; evicts now. Returns what was deleted.
  Result<cache::RemovalStats> SetLimits(uint64_t budget_bytes, uint64_t ttl_us);
  // Deletes every saved file (and drops the queue).
  Result<cache::RemovalStats> Purge();

  // --- Write-behind queue.
  // Queues a state that left a RAM pool (freed at once when saving is off).
  // Never blocks on I/O and never drops a state for lack of room.
  void Enqueue(PendingSave item);
  bool HasPending(const cache::ModelBinding& model) const;
  // Writes the oldest queued state of `model` now, on the calling thread
  // (serialize, seal, publish, enforce limits), outside the gate: for tools,
  // tests and benchmarks. `pool` (optional) seals chunks in parallel;
  // REQUIRES: no one else uses it meanwhile. False when nothing of `model`
  // was queued. *written (optional): whether a file was saved (a failed
  // write is dropped with a log line).
  bool WriteOne(const cache::ModelBinding& model, ThreadPool* pool, bool* written = nullptr);
  // Writes every queued state of `model` on the calling thread, for at most
  // timeout_ms; the rest is dropped with a log line. Returns files saved.
  size_t Drain(const cache::ModelBinding& model, uint64_t timeout_ms, ThreadPool* pool);
  // Shutdown: writes every queued state of every model (the writer thread,
  // with no share limit, on every core), for at most timeout_ms; what is
  // left is dropped with a log line naming how many chats and tokens.
  // Returns the number of states that were not written. The log line counts
  // every file written since BeginDrain (or since DrainAll, without one).
  size_t DrainAll(uint64_t timeout_ms);
  // Shutdown starts: from now on the writer writes with no share limit, and
  // DrainAll's count and time start here (the chats the models queue while
  // they unload are written as they arrive, before DrainAll is called).
  void BeginDrain();

  // Waits until at least `n` files were written since the store opened
  // (SavedCacheUsage::writes), for at most timeout_ms; returns the count.
  uint64_t WaitForWrites(uint64_t n, uint64_t timeout_ms);

  // --- Queued states serve prompts (they are still in RAM).
  // The queued state of `model` with the most usable tokens for `prompt`
  // (ties: the longest common prefix, then the newest); !found when none is
  // usable.
  // With `only_tenant`, other tenants' states are invisible.
  QueuedMatch FindQueued(const cache::ModelBinding& model, std::span<const int32_t> prompt,
                         const std::string* only_tenant = nullptr) const;
  // Takes queued state `seq` back (its write is abandoned, waiting at most
  // one slice if it is being written). NotFound when it is no longer queued
  // (written meanwhile: it is on disk now).
  Result<PendingSave> TakeQueued(uint64_t seq);
  // A copy of queued state `seq` cut at the newest point at or before
  // `max_tokens` where it can be cut (recurrent snapshots); the queued state
  // stays queued. *tokens: the copy's tokens. NotFound when it is gone.
  Result<std::unique_ptr<models::SequenceState>> CopyQueued(uint64_t seq, int64_t max_tokens,
                                                            std::vector<int32_t>* tokens);
  // The server-wide gate every compute loop brackets its steps with.
  ComputeGate& gate() { return gate_; }

  // --- Lookup (REQUIRES: called on the model's compute loop for Load).
  // The saved cache of `model` sharing the longest start with `prompt`
  // (memory only). When saving is off: !found, why_none "the disk cache is off".
  cache::PrefixMatch Find(const cache::ModelBinding& model, std::span<const int32_t> prompt,
                          const std::string* only_tenant = nullptr) const;
  // Refreshes the index with files other nodes wrote or removed since
  // (DiskStore::Refresh: new names only, bounded, rate-limited unless
  // `force`; never waits for another refresh). Logs what changed. A no-op
  // when saving is off.
  cache::RefreshReport Refresh(bool force = false);
  // Asks for the same refresh (not forced: its rate limit and bound hold) on
  // the store's refresher thread and returns it at once; or returns the one
  // asked for or running, so that requests arriving meanwhile wait for the
  // same listing, never a second one. Null when none is due (saving is off,
  // the start-up check has not finished, or the last refresh began within
  // the refresh interval): the caller goes on with what the index knows.
  // The refresh is logged like Refresh(); a folder that cannot be listed
  // ends it with a non-OK report().status.
  std::shared_ptr<IndexRefresh> RefreshInBackground();
  // The saved chat of `model` that `prompt` continues once one trimmed span
  // is removed (context shift); !found when saving is off.
  cache::ShiftMatch FindShift(const cache::ModelBinding& model, std::span<const int32_t> prompt,
                              int64_t min_kept, const std::string* only_tenant = nullptr) const;
  // Forgets `tenant` (SPEC §13): drops its queued states (a write in
  // progress is abandoned) and deletes its saved files. Returns what went:
  // queued states and files, and their bytes (memory / file sizes).
  Result<cache::RemovalStats> ForgetTenant(const std::string& tenant);
  Result<cache::LoadedEntry> Load(const std::string& id, const cache::ModelBinding& model, ThreadPool* pool);
  // Loads `id` straight into a new state of `layout`: every chunk is read
  // and decrypted in place into the state's own memory, in parallel on
  // `pool` (no plaintext buffer, no copy), then the state is checked like
  // SequenceState::Deserialize. Errors: Load's; Corruption / NotSupported
  // when the state inside is damaged, InvalidArgument when it does not fit
  // `layout` (e.g. more tokens than its context).
  Result<LoadedState> LoadState(const std::string& id, const cache::ModelBinding& model,
                                std::shared_ptr<const models::StateLayout> layout, ThreadPool* pool);
  // Deletes one saved file (its state was taken back into RAM).
  void Remove(const std::string& id);

 private:
  SavedCacheStore(Env* env, const SavedCacheOptions& options);
  // Opens key + store (REQUIRES: mu_ not held). Sets reason on failure.
  Status OpenDisk();
  std::shared_ptr<cache::DiskStore> disk() const;
  void StartCheck(std::shared_ptr<cache::DiskStore> disk);

  Env* const env_;
  SavedCacheOptions options_;  // enabled/budget/ttl guarded by mu_
  std::unique_ptr<FileLock> folder_lock_;  // held until the store is gone (null: could not be had)

  mutable std::mutex mu_;
  std::shared_ptr<cache::DiskStore> disk_;          // guarded by mu_; null when off
  cache::KeySource key_source_ = cache::KeySource::kNone;  // guarded by mu_
  std::string disabled_reason_;                     // guarded by mu_
  // A queued state. Held by shared_ptr so that the writer and a copy can
  // read it while a taker or a purge unlinks it; `readers` counts them.
  struct QueuedSave {
    PendingSave item;
    uint64_t seq = 0;
    uint64_t bytes = 0;        // the state's memory
    uint64_t queued_us = 0;    // Env::NowMicros
    int readers = 0;           // guarded by mu_
    bool writing = false;      // guarded by mu_
    std::atomic<bool> abort{false};  // a taker wants it back: stop writing it
  };
  using Node = std::shared_ptr<QueuedSave>;

  void WriterLoop();
  // Runs the refreshes RefreshInBackground asks for, one at a time.
  void RefresherLoop();
  // Seals and publishes `node`'s state (a reader of it), paced by the gate
  // when `paced`, on `pool` otherwise. Unlinks it when written; an abandoned
  // write leaves it queued. Returns whether a file was saved.
  bool WriteNode(const Node& node, bool paced, ThreadPool* pool);
  // Unlinks `node` from the queue. REQUIRES: mu_ held.
  void UnlinkLocked(const Node& node);
  void ClearQueueLocked();
  bool UrgentLocked() const;

  std::list<Node> queue_;                           // guarded by mu_; oldest first
  uint64_t queued_bytes_ = 0;                       // guarded by mu_
  uint64_t next_seq_ = 0;                           // guarded by mu_
  uint64_t writes_ = 0;                             // guarded by mu_
  int writes_running_ = 0;                          // guarded by mu_: WriteNode calls in progress
  bool draining_ = false;                           // guarded by mu_: BeginDrain .. DrainAll's end
  uint64_t drain_t0_us_ = 0;                        // guarded by mu_: when BeginDrain ran
  uint64_t drain_writes0_ = 0;                      // guarded by mu_: writes_ at BeginDrain
  bool stop_writer_ = false;                        // guarded by mu_
  bool over_budget_logged_ = false;                 // guarded by mu_
  std::condition_variable queue_cv_;                // queue_ changed, a write ended, stop
  std::vector<std::thread> checks_;                 // guarded by mu_; start-up checks
  ComputeGate gate_;
  std::unique_ptr<ThreadPool> io_pool_;             // the writer's, for idle slices
  std::thread writer_;
  // The refresh asked for or running (null or done: none); the refresher
  // starts with the first one and stops with the store.
  std::shared_ptr<IndexRefresh> refresh_;           // guarded by mu_
  bool refresh_started_ = false;                    // guarded by mu_: refresh_ is running
  bool stop_refresher_ = false;                     // guarded by mu_
  std::condition_variable refresh_cv_;              // refresh_ asked for, stop
  std::thread refresher_;                           // guarded by mu_ (started once)
};

}  // namespace mx::engine
