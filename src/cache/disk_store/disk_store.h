// DiskStore: saved prompt caches in one folder, each an AES-256-GCM sealed
// file (docs/disk_cache_format.md, SPEC §5). The payload is opaque bytes
// (SequenceState::Serialize()); the store never sees models or the engine.
//
// Only files this process wrote or that passed StartupCheck() are in the
// index, and only indexed files are listed, matched or loaded; Load()
// re-checks every chunk's tag anyway. Files that fail a check are deleted.
// Only names the store makes (ClassifyFileName: 32 hex digits + .mxpc or
// .mxpc.tmp) are ever opened or deleted, and only when they are regular
// files: a symbolic link, FIFO, socket or folder with such a name is never
// opened nor followed (and left alone). The last use of a file is kept as its
// modification time, so LRU order survives a restart. All I/O goes through
// the Env.
//
// Thread-safety: every method may be called from any thread. The index is
// guarded by one mutex, held only for bookkeeping, never across file I/O or
// decryption. StartupCheck() may run on a background thread while Save /
// Find / Load serve requests. A ThreadPool passed to a call is used only for
// that call; REQUIRES: nobody else runs ParallelFor on it meanwhile.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/crypto/key_store.h"
#include "cache/policy/cache_policy.h"
#include "cache/disk_store/disk_format.h"
#include "cache/policy/disk_policy.h"
#include "core/env.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace mx::cache {

// Binds a saved cache to the exact model file and engine state layout.
struct ModelBinding {
  std::string model_fingerprint;      // content fingerprint of the GGUF file, 1..4096 bytes
  uint64_t state_layout_fingerprint = 0;  // StateLayout::Fingerprint()
  bool operator==(const ModelBinding&) const = default;
};

struct DiskStoreOptions {
  DiskLimits limits;                       // budget and TTL (EnforceLimits)
  uint32_t chunk_bytes = kDefaultChunkBytes;  // plaintext bytes per sealed chunk
  // The folder is shared with other processes (cluster nodes, docs/cluster.md):
  // StartupCheck deletes only temporaries older than stale_temp_age_us and
  // leaves files sealed with another key to the budget and TTL.
  bool shared_folder = false;
  uint64_t stale_temp_age_us = uint64_t{15} * 60 * 1000000;  // by modification time
  // Refresh: at most one listing per interval (unless forced), and at most
  // this many new files read per refresh (the rest on the next ones).
  uint64_t refresh_interval_us = 250000;
  size_t refresh_max_new_files = 256;
};

// Counts from one Refresh.
struct RefreshReport {
  bool ran = false;       // false: skipped (too soon, another refresh runs, not checked yet)
  size_t listed = 0;      // saved-cache files in the folder
  size_t added = 0;       // new files indexed
  size_t forgotten = 0;   // indexed files that are gone from the folder
  size_t rejected = 0;    // new files that failed their check (damaged ones deleted)
  size_t left = 0;        // new files not read this time (over refresh_max_new_files)
  uint64_t micros = 0;    // how long it took (monotonic clock)
  Status status;          // not OK when the folder could not be listed (the index is unchanged)
};

// What the index knows of one verified file.
struct SavedEntryInfo {
  std::string id;            // 32 hex digits (the file is <id>.mxpc)
  ModelBinding model;
  std::string tenant;        // whose chat it is ("" none); sealed, and bound into the file key
  uint64_t n_tokens = 0;
  uint64_t tokens_hash = 0;  // HashTokens(tokens)
  uint64_t file_bytes = 0;
  uint64_t payload_bytes = 0;
  uint64_t created_us = 0;
  uint64_t last_used_us = 0;
  uint64_t prompt_len = 0;  // of the tokens, how many came from the chat's last prompt
};

// Paces a Save (the server's save scheduling, docs/saved_caches.md): Save
// calls BeginSlice() before sealing and writing each batch of chunks and
// EndSlice() after it; the file's fsync and rename run outside slices. A
// slice's batch is as many chunks as the returned pool has threads (one on
// the calling thread when it returns null). An error from BeginSlice
// abandons the save: its temporary is removed and Save returns that error.
class SavePacer {
 public:
  virtual ~SavePacer() = default;
  virtual Result<ThreadPool*> BeginSlice() = 0;
  virtual void EndSlice() = 0;
};

struct SaveMeta {
  ModelBinding model;
  uint64_t created_us = 0;    // 0: now
  uint64_t last_used_us = 0;  // 0: now
  uint64_t prompt_len = 0;    // of the tokens, how many came from a prompt (0: all of them)
  std::string tenant = {};    // whose chat it is ("" none), at most kMaxTenantBytes
};

// Result of FindLongestPrefix.
struct PrefixMatch {
  bool found = false;
  SavedEntryInfo entry;         // when found
  size_t common_prefix = 0;     // tokens shared with the prompt (> 0 when found)
  std::string why_none;         // when !found, worded for the log (SPEC §8)
  bool other_model = false;     // when !found: a file of another model shared a start
  // When other_model and the best such file came from this model file under
  // another state layout (e.g. another KV cache type): that layout's
  // fingerprint, so the engine can name the difference; 0 otherwise.
  uint64_t other_layout_fingerprint = 0;
};

// Result of FindShift: a saved chat that the prompt continues once one span
// (messages the client trimmed) is removed from it.
struct ShiftMatch {
  bool found = false;
  SavedEntryInfo entry;
  ShiftPlan plan;  // the span to remove; plan.reused() tokens are then shared
};

// A loaded entry. Load: the payload is a view into `plaintext`. LoadInto:
// the payload went to the caller's buffers; `plaintext` is null.
struct LoadedEntry {
  SavedEntryInfo info;
  std::vector<int32_t> tokens;
  std::unique_ptr<char[]> plaintext;
  size_t plaintext_bytes = 0;
  size_t payload_offset = 0;
  std::string_view payload() const {
    return std::string_view(plaintext.get() + payload_offset, plaintext_bytes - payload_offset);
  }
};

struct RemovalStats {
  size_t files = 0;
  uint64_t bytes = 0;
};

// Counts from StartupCheck, for one log line.
struct StartupReport {
  size_t files_ok = 0;
  uint64_t bytes_ok = 0;
  size_t removed_damaged = 0;      // bad magic, tag mismatch, truncated, renamed, ...
  size_t removed_other_key = 0;    // sealed under another key
  size_t removed_unsupported = 0;  // another format version
  size_t removed_temporaries = 0;  // *.mxpc.tmp left by a crash
  uint64_t removed_bytes = 0;
  size_t ignored = 0;              // names that are not the store's (left alone)
  size_t not_regular = 0;          // store names that are not regular files (left alone)
  size_t errors = 0;               // files that could not be read or removed (kept, not indexed)
  // "12 saved caches ok (1.1 GB); removed 2 damaged, 0 from another key, ..."
  std::string ToString() const;
};

// Where LoadInto puts a payload: given the indexed entry and its payload
// size, the caller's buffers that receive the payload's bytes in order
// (e.g. a state's own KV memory), covering exactly `payload_bytes`. They are
// written while the file is read and decrypted, before every tag is checked:
// when LoadInto fails their content is garbage. An error is returned by
// LoadInto (Corruption: the file is treated as damaged and deleted).
using PayloadPlacer = std::function<Result<std::vector<std::span<uint8_t>>>(const SavedEntryInfo& entry,
                                                                            uint64_t payload_bytes)>;

class DiskStore {
 public:
  // Opens (creating with mode 0700) the cache folder `dir`; an existing one
  // is checked by PrepareCacheFolder (another owner refused, group/other
  // access removed). Nothing is read yet: call StartupCheck() (now or in the
  // background) to index the files already there. InvalidArgument when `key`
  // is not enabled() (its reason is in the message), the options are out of
  // range or the folder belongs to another user; IOError etc. when the
  // folder cannot be created. `env` must outlive the store.
  static Result<std::unique_ptr<DiskStore>> Open(Env* env, const std::string& dir,
                                                 const KeyStore& key,
                                                 const DiskStoreOptions& options);
  ~DiskStore();

  // Seals tokens + payload into a new file (temp -> fsync -> rename -> fsync
  // folder) and indexes it; the file's modification time is its last use.
  // Errors: InvalidArgument (empty or over-long model fingerprint),
  // ResourceExhausted (disk full, or the file alone is larger than the
  // budget), IOError, NotFound (a Purge ran while the file was written: the
  // new file is deleted too); on error no new file is left (no temporary,
  // no half file) and older files are untouched. Does not evict: call
  // EnforceLimits afterwards.
  Result<SavedEntryInfo> Save(const SaveMeta& meta, std::span<const int32_t> tokens,
                              std::string_view payload, ThreadPool* pool = nullptr);
  // The same for a payload given as several buffers (their concatenation),
  // e.g. a state's own memory: sealed chunk by chunk straight from them,
  // without a copy. The buffers must stay unchanged during the call. With a
  // `pacer`, the chunks are sealed in the slices it grants (and on the pools
  // it names; `pool` is then unused).
  Result<SavedEntryInfo> Save(const SaveMeta& meta, std::span<const int32_t> tokens,
                              std::span<const std::span<const uint8_t>> payload_parts,
                              ThreadPool* pool = nullptr, SavePacer* pacer = nullptr);

  // Verified entries, most recently used first.
  std::vector<SavedEntryInfo> List() const;

  // The verified entry of `model` sharing the longest start with `tokens`
  // (ties: most recently used). Entries of other models are never returned;
  // when only they share a start, why_none says "the saved cache was made by
  // another model". Memory only, no I/O.
  // With `only_tenant`, files of other tenants are invisible (as if absent).
  PrefixMatch FindLongestPrefix(const ModelBinding& model, std::span<const int32_t> tokens,
                                const std::string* only_tenant = nullptr) const;
  // The verified file of `model` that, with one span removed (a chat its
  // client trimmed), shares the most with `tokens` (cache/policy PlanShift,
  // at least `min_kept` tokens after the span).
  ShiftMatch FindShift(const ModelBinding& model, std::span<const int32_t> tokens, int64_t min_kept,
                       const std::string* only_tenant = nullptr) const;
  // Deletes every file of `tenant` (files of it being written are deleted
  // when their write ends). Returns what was deleted.
  Result<RemovalStats> ForgetTenant(const std::string& tenant);

  // Reads `id`, opens every chunk (in parallel on `pool` when given) and
  // returns tokens + payload; marks the entry used now (in the index and as
  // the file's modification time, best effort). NotFound when `id`
  // is not indexed; InvalidArgument when it belongs to another model;
  // Corruption when a check fails (the file is then deleted and unindexed).
  Result<LoadedEntry> Load(const std::string& id, const ModelBinding& model,
                           ThreadPool* pool = nullptr);
  // Load, but the payload is read and decrypted in place into the buffers
  // `place` returns (no plaintext buffer, no copy): each chunk is read with
  // pread in pieces straight into its final memory and opened there, the
  // chunks in parallel on `pool`. Same errors as Load, plus the placer's.
  Result<LoadedEntry> LoadInto(const std::string& id, const ModelBinding& model, ThreadPool* pool,
                               const PayloadPlacer& place);

  // Reads and checks every chunk of <id>.mxpc (indexed or not) and returns
  // what it holds, without changing anything: nothing is deleted, indexed
  // or marked used (tools: `matricxon cache ls`). Errors: those of a check
  // (Corruption, NotSupported, NotFound, IOError).
  Result<SavedEntryInfo> Inspect(const std::string& id, ThreadPool* pool = nullptr) const;

  // Deletes one saved file. NotFound when it neither is indexed nor exists.
  Status Remove(const std::string& id);
  // Deletes every saved file and temporary (not the key or the policy file,
  // nor any name the store does not make); in a shared folder only
  // temporaries older than stale_temp_age_us (younger ones may be other
  // nodes' writes in progress). A Save writing meanwhile deletes
  // its own file when it ends, so nothing written before the Purge returned
  // survives it.
  Result<RemovalStats> Purge();
  // The same without a store (no key needed): deletes the regular files of
  // `dir` named like saved caches or their temporaries. Errors: the folder
  // cannot be listed; files that cannot be removed are skipped.
  static Result<RemovalStats> RemoveSavedFiles(Env* env, const std::string& dir);
  // Deletes expired files and, over budget, the least recently used
  // (PlanDiskEviction), planned over a fresh listing of the whole folder
  // (every saved-cache file, whoever wrote it; last use = the file's
  // modification time): the budget and TTL apply to the folder. Several
  // stores (nodes) enforcing at once plan over the same order, so together
  // they delete what one would; a file another one deleted first is not
  // counted. Returns what this call deleted. `now_us`: wall clock, µs since
  // the epoch.
  Result<RemovalStats> EnforceLimits(uint64_t now_us);
  // New limits (runtime policy change); apply with EnforceLimits.
  void SetLimits(const DiskLimits& limits);
  DiskLimits limits() const;

  // Checks every <id>.mxpc not yet indexed (all chunks), deletes failures
  // and stale temporaries, indexes the rest; a file's last use is the later
  // of its record's and its modification time. Entries with the store's
  // names that are not regular files are counted (not_regular), logged and
  // left alone, never opened. Safe to run while the store serves other
  // calls; files being written by Save are never touched.
  StartupReport StartupCheck(ThreadPool* pool = nullptr);
  // True once a StartupCheck has finished.
  bool checked() const;

  // Brings the index up to date with files other processes wrote or
  // removed since (a cluster's shared folder): lists the folder, forgets
  // indexed files that are gone, and reads only names not yet in the index,
  // at most refresh_max_new_files of them: their header and the chunks that
  // hold the metadata are opened and checked (Load checks every chunk
  // before anything is used). Known files are never read again. Skipped
  // (ran = false) without waiting when another Refresh runs, before the
  // StartupCheck has finished, or, unless `force`, within
  // refresh_interval_us of the last one. A file that fails its check is
  // deleted when damaged and otherwise (another key or version, an I/O
  // error) left alone and not read again by later refreshes.
  RefreshReport Refresh(bool force = false);
  // Whether Refresh(/*force=*/false) would run now: the StartupCheck has
  // finished, no Refresh runs and refresh_interval_us have passed since the
  // last one began (or none ran yet). A hint for callers that start a
  // refresh on another thread: Refresh itself decides again.
  bool RefreshDue() const;

  uint64_t used_bytes() const;
  size_t file_count() const;
  const std::string& dir() const { return dir_; }

 private:
  // kRefused: the caller's placer declined the file (it is kept).
  enum class Problem { kNone, kDamaged, kOtherKey, kUnsupported, kMissing, kIo, kRefused };
  // A file that passed ReadVerified: its metadata, and where the payload
  // lies in its plaintext.
  struct Opened {
    RecordMeta meta;
    std::vector<int32_t> tokens;
    size_t plaintext_bytes = 0;
    size_t payload_offset = 0;
    uint64_t file_bytes = 0;
  };
  // Plaintext destinations for ReadVerified: given the plaintext size, the
  // buffers that receive it in order and cover it exactly; the first holds
  // at least the whole metadata record.
  using PlaintextPlacer =
      std::function<Result<std::vector<std::span<uint8_t>>>(uint64_t plaintext_bytes)>;
  struct Entry {
    SavedEntryInfo info;
    std::vector<int32_t> tokens;
    uint64_t generation = 0;  // index_generation_ when it was indexed
  };

  DiskStore(Env* env, std::string dir, const KeyStore& key, const DiskStoreOptions& options);
  std::string PathOf(std::string_view name) const;
  // Reads <id>.mxpc and checks every chunk; on failure sets *problem.
  // place: the plaintext is read and opened in place into its buffers
  // (Load); null: only the metadata is kept and memory stays at a few
  // chunks (StartupCheck).
  // metadata_only (with a null place): stop once the chunks that hold the
  // metadata are checked (Refresh); the rest is checked by Load.
  Result<Opened> ReadVerified(const std::string& id, ThreadPool* pool, const PlaintextPlacer* place,
                              Problem* problem, bool metadata_only = false) const;
  // Indexes a file that passed ReadVerified. REQUIRES: mu_ held.
  void IndexLocked(const std::string& id, Opened&& o, uint64_t mtime_us);
  Result<LoadedEntry> LoadWith(const std::string& id, const ModelBinding& model, ThreadPool* pool,
                               const PlaintextPlacer& place);
  Status WriteSealed(const std::string& id, const SaveMeta& meta, std::span<const int32_t> tokens,
                     std::span<const std::span<const uint8_t>> payload, uint64_t payload_bytes,
                     ThreadPool* pool, SavePacer* pacer, uint64_t* file_bytes);

  Env* const env_;
  const std::string dir_;
  const SecretKey key_;
  const KeyId key_id_;
  const uint32_t chunk_bytes_;
  const DiskStoreOptions options_;

  mutable std::mutex mu_;
  DiskLimits limits_;                    // guarded by mu_
  std::map<std::string, Entry> index_;   // guarded by mu_; verified files only
  std::set<std::string> writing_;        // guarded by mu_; ids whose temp file is being written
  uint64_t purges_ = 0;                  // guarded by mu_; Purge calls begun so far
  std::map<std::string, uint64_t> forgets_;  // guarded by mu_; ForgetTenant calls per tenant
  int purging_ = 0;                      // guarded by mu_; Purge calls under way
  bool checked_ = false;                 // guarded by mu_
  uint64_t index_generation_ = 0;        // guarded by mu_; bumped for every entry indexed
  bool refreshing_ = false;              // guarded by mu_
  uint64_t last_refresh_us_ = 0;         // guarded by mu_; NowMicros of the last Refresh
  bool refreshed_once_ = false;          // guarded by mu_
  std::set<std::string> rejected_;       // guarded by mu_; ids a Refresh will not read again
};

}  // namespace mx::cache
