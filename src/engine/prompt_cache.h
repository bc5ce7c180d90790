// PromptCache: the RAM pool of one loaded model, specialised to engine
// states (SPEC §2, §8). A request starts here: it gets the state to continue
// from, how many prompt tokens that state already holds, and the log line
// saying what the cache did; when the request ends it hands the state back
// with the tokens it now holds.
//
// Thread-safety: Start/Finish are called on the model's compute loop (the
// thread that also runs Forward), which keeps copies of in-use entries safe;
// Stats/counters may be read from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cache/ram_pool/ram_pool.h"
#include "core/env.h"
#include "core/status.h"
#include "models/runner.h"
#include "models/sequence_state.h"

namespace mx::engine {

struct SequenceTraits {
  static size_t Bytes(const models::SequenceState& s) { return s.SizeBytes(); }
  static Result<std::unique_ptr<models::SequenceState>> CopyPrefix(const models::SequenceState& s,
                                                                   int64_t n) {
    return s.ClonePrefix(n);
  }
  static Status Truncate(models::SequenceState& s, int64_t n) { return s.Truncate(n); }
};
using SequencePool = cache::RamPool<models::SequenceState, SequenceTraits>;

struct PromptCacheOptions {
  int64_t slots = 4;                       // MATRICXON_PROMPT_CACHE_SLOTS (1..64)
  uint64_t budget_bytes = uint64_t{2048} << 20;  // MATRICXON_PROMPT_CACHE_BUDGET_MB
};

// One request's hold on a state: either a pool lease (cache on) or a private
// state that the pool never sees (cache off, images).
class CacheTicket {
 public:
  models::SequenceState& state() { return lease_.valid() ? lease_.state() : *private_; }
  int64_t n_reused() const { return n_reused_; }
  const std::string& log_line() const { return log_; }
  bool pooled() const { return lease_.valid(); }

 private:
  friend class PromptCache;
  SequencePool::Lease lease_;
  std::unique_ptr<models::SequenceState> private_;
  int64_t n_reused_ = 0;
  std::string log_;
};

class PromptCache {
 public:
  PromptCache(const models::Runner& runner, const PromptCacheOptions& options, Env* env,
              SequencePool::EvictFn on_evict = {});

  // Picks the state for `prompt`. With use_cache false or images in the
  // prompt, the pool is neither read nor changed.
  Result<CacheTicket> Start(std::span<const int32_t> prompt, bool use_cache, bool has_images);
  // The request is over and the state holds exactly `tokens`: its prompt's
  // first `prompt_len` tokens, then the reply. A pooled state goes back to
  // the pool; a private one is freed.
  void Finish(CacheTicket ticket, std::vector<int32_t> tokens, int64_t prompt_len);
  // The request failed: a pooled entry is dropped (its state may be partial).
  void Abandon(CacheTicket ticket);

  SequencePool& pool() { return pool_; }
  const SequencePool& pool() const { return pool_; }

 private:
  const models::Runner& runner_;
  SequencePool pool_;
};

}  // namespace mx::engine
