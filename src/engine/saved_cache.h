// SavedCacheStore: the disk level of the prompt cache (SPEC §5-§7), one per
// server, one folder shared by every loaded model. It owns the key, the
// sealed DiskStore and the write-behind queue of states that left a model's
// RAM pool.
//
// Writing is never done during a reply: Enqueue() only queues (the state
// object itself, no copy, no I/O), and a queued state is written by its own
// model's compute loop through WriteOne() when that loop has no request
// (Scheduler::Loop), or by Drain() when the model unloads and the server
// stops. States of a model are matched only against files of that exact
// model (ModelBinding: SHA-256 of the GGUF bytes + the state-layout
// fingerprint).
//
// Runtime policy (enabled, budget, TTL) is applied here; it is persisted by
// the server (prompt_cache_policy.json), which reads no JSON below it.
//
// Thread-safety: every method may be called from any thread. The DiskStore
// is held by shared_ptr, so turning saving off while a compute loop writes
// is safe: a file finished after the purge is deleted at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
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
  uint64_t queue_budget_bytes = uint64_t{1} << 30;  // states waiting to be written, at most
  // A saved cache is loaded only when it reuses at least this many prompt
  // tokens more than the best RAM entry (loading costs a file read and a
  // decryption; a few tokens are cheaper to re-read).
  int64_t min_gain_tokens = 16;
  uint64_t flush_timeout_ms = 10000;  // unload / shutdown: longest time spent writing
  bool check_in_background = true;    // false: StartupCheck before Open returns (tools, tests)
};

// The exact-model binding of a runner's states: a SHA-256 of the whole GGUF
// file's bytes ("sha256x64m:" + hex: SHA-256 over the file size and the
// SHA-256 of each 64 MiB piece, so pieces hash in parallel on `pool` when
// given) + StateLayout::Fingerprint(). Reads the whole mmapped file once
// (the caller logs the time). REQUIRES: nobody else uses `pool` meanwhile.
cache::ModelBinding ComputeModelBinding(const models::Model& model, const models::StateLayout& layout,
                                        ThreadPool* pool = nullptr);

// What GET /api/cache/persistence reports.
struct SavedCacheUsage {
  bool enabled = false;
  uint64_t budget_bytes = 0;
  uint64_t ttl_us = 0;
  uint64_t used_bytes = 0;
  size_t files = 0;
  cache::KeySource key_source = cache::KeySource::kNone;
  size_t queued = 0;  // states waiting to be written
};

// One state that left a RAM pool, waiting for its model's idle time.
struct PendingSave {
  cache::ModelBinding model;
  std::vector<int32_t> tokens;
  std::unique_ptr<models::SequenceState> state;
};

// A saved cache loaded back into an engine state.
struct LoadedState {
  std::vector<int32_t> tokens;
  std::unique_ptr<models::SequenceState> state;
};

class SavedCacheStore {
 public:
  // Creates the folder (0700); when `options.enabled`, opens the key
  // (KeyStore) and the DiskStore and starts the start-up check. A key that
  // cannot be had (cluster node without MATRICXON_CACHE_KEY, a key file
  // readable by others, ...) is not an error: saving is then off and
  // disabled_reason() says why (logged). Errors only for a folder that
  // cannot be created.
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
  // Queues a state that left a RAM pool. Dropped (with a log line) when
  // saving is off or the queue would exceed its byte budget.
  void Enqueue(PendingSave item);
  bool HasPending(const cache::ModelBinding& model) const;
  // Writes the oldest queued state of `model` (serialize, seal, publish,
  // enforce limits). REQUIRES: called by that model's compute loop when it
  // is idle, or after it stopped. `pool` (optional) seals chunks in
  // parallel; REQUIRES: no one else uses it meanwhile. False when nothing
  // of `model` was queued. *written (optional): whether a file was saved
  // (a failed write is dropped with a log line).
  bool WriteOne(const cache::ModelBinding& model, ThreadPool* pool, bool* written = nullptr);
  // Writes every queued state of `model`, for at most timeout_ms; the rest
  // is dropped with a log line. Returns the number of files saved.
  size_t Drain(const cache::ModelBinding& model, uint64_t timeout_ms, ThreadPool* pool);

  // --- Lookup (REQUIRES: called on the model's compute loop for Load).
  // The saved cache of `model` sharing the longest start with `prompt`
  // (memory only). When saving is off: !found, why_none "the disk cache is off".
  cache::PrefixMatch Find(const cache::ModelBinding& model, std::span<const int32_t> prompt) const;
  // The saved chat of `model` that `prompt` continues once one trimmed span
  // is removed (context shift); !found when saving is off.
  cache::ShiftMatch FindShift(const cache::ModelBinding& model, std::span<const int32_t> prompt,
                              int64_t min_kept) const;
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

  mutable std::mutex mu_;
  std::shared_ptr<cache::DiskStore> disk_;          // guarded by mu_; null when off
  cache::KeySource key_source_ = cache::KeySource::kNone;  // guarded by mu_
  std::string disabled_reason_;                     // guarded by mu_
  std::deque<PendingSave> queue_;                   // guarded by mu_
  uint64_t queued_bytes_ = 0;                       // guarded by mu_
  std::vector<std::thread> checks_;                 // guarded by mu_; start-up checks
};

}  // namespace mx::engine
