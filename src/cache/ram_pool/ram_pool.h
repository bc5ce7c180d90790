// RamPool: the RAM pool of cached conversations of one loaded model
// (SPEC §2). It owns the entries (tokens + state), plans with the pure
// functions of cache/policy, and hands out RAII leases that pin an entry
// while a request reads and extends it.
//
// It is generic over the state type so that it never sees the engine:
//   Traits::Bytes(const State&) -> size_t
//   Traits::CopyPrefix(const State&, int64_t n) -> Result<std::unique_ptr<State>>
//   Traits::Truncate(State&, int64_t n) -> Status
//   Traits::RemoveSpan(State&, int64_t begin, int64_t end) -> Status  (context shift)
//   Traits::CutPoints(const State&) -> std::vector<int64_t>  (snapshot positions; empty if none)
//   Traits::NewestCut(const State&, int64_t n) -> int64_t  (the most tokens <= n it can be cut or
//                                                          copied at now: n without snapshots)
//   Traits::Fresh() -> std::unique_ptr<State>      (via the factory given at construction)
//
// Thread-safety: all methods are thread-safe. States are only touched by the
// thread holding their lease, except CopyPrefix of an in-use entry, which reads
// positions [0, n) that its owner never rewrites while it holds the lease (the
// owner only appends); callers that run leases on several threads must
// guarantee that (the engine runs every lease of a model on its compute loop).
// Acquire, Peek and Recharge also read the states of entries in use (their
// sizes, their snapshots): call them on that same thread.
//
// Plans are made from what the states are now: the cut points of every
// entry are read from its state at each lookup (a state in use takes new
// snapshots and drops old ones while its request runs, so a copy kept since
// the last commit would be stale), and applying a plan cuts or copies at the
// newest point the state really allows at or before the planned length. A
// request never fails because of what another request did to an entry: at
// worst it reuses less, or starts fresh.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "cache/policy/cache_policy.h"
#include "core/status.h"

namespace mx::cache {

struct RamPoolOptions {
  PoolLimits limits;
  LookupOptions lookup;
};

// Who a lookup is for (SPEC §13): the tenant that will own the entry it
// extends, and whether it may only see that tenant's entries.
struct LookupScope {
  std::string tenant;
  bool isolated = false;
};

// What /api/cache shows of an entry (never token content).
struct EntryStats {
  uint64_t id = 0;
  std::string tenant;  // the tenant of the request that last used it
  int64_t n_tokens = 0;
  size_t bytes = 0;
  uint64_t last_used_us = 0;  // wall clock
  bool in_use = false;
};

struct PoolCounters {
  uint64_t lookups = 0;
  uint64_t hits = 0;            // lookups that reused at least one token
  uint64_t tokens_reused = 0;
  uint64_t evictions = 0;
  uint64_t copies = 0;
  uint64_t shifts = 0;          // context shifts (a trimmed chat kept its cache)
};

template <typename State, typename Traits>
class RamPool {
 public:
  // An entry leaving the pool: its tokens (the first prompt_len came from a
  // prompt, the rest were generated) and its state.
  struct Leaving {
    std::vector<int32_t> tokens;
    int64_t prompt_len = 0;
    std::unique_ptr<State> state;
    std::string tenant = {};
  };
  // What ForgetTenant removed.
  struct Forgotten {
    size_t entries = 0;  // removed now
    size_t bytes = 0;
    size_t in_use = 0;   // removed when their request ends
  };
  // Called (outside the pool's lock) with every entry that leaves the pool,
  // least recently used first: the disk level saves it there.
  using EvictFn = std::function<void(Leaving leaving)>;

  RamPool(RamPoolOptions options, std::function<std::unique_ptr<State>()> fresh,
          std::function<uint64_t()> wall_clock_us, EvictFn on_evict = {})
      : options_(options), fresh_(std::move(fresh)), clock_(std::move(wall_clock_us)),
        on_evict_(std::move(on_evict)) {}
  RamPool(const RamPool&) = delete;
  RamPool& operator=(const RamPool&) = delete;

  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept { *this = std::move(o); }
    Lease& operator=(Lease&& o) noexcept {
      Abandon();
      pool_ = o.pool_, id_ = o.id_, state_ = o.state_, plan_ = o.plan_;
      o.pool_ = nullptr;
      return *this;
    }
    ~Lease() { Abandon(); }

    bool valid() const { return pool_ != nullptr; }
    // The state to continue from: it holds the first n_reused() prompt tokens.
    State& state() { return *state_; }
    int64_t n_reused() const { return plan_.n_reuse; }
    const LookupPlan& plan() const { return plan_; }
    uint64_t entry_id() const { return id_; }

    // The state now holds exactly `tokens`, of which the first `prompt_len`
    // came from the request's prompt and the rest were generated: record
    // them, unpin the entry and bring the pool back within its limits (this
    // entry always stays).
    void Commit(std::vector<int32_t> tokens, int64_t prompt_len) {
      if (pool_ == nullptr) return;
      RamPool* pool = pool_;
      pool_ = nullptr;
      pool->Commit(id_, std::move(tokens), prompt_len);
    }

   private:
    friend class RamPool;
    // Without a commit the state may be half-written: the entry is dropped.
    void Abandon() {
      if (pool_ == nullptr) return;
      RamPool* pool = pool_;
      pool_ = nullptr;
      pool->Drop(id_);
    }
    RamPool* pool_ = nullptr;
    uint64_t id_ = 0;
    State* state_ = nullptr;
    LookupPlan plan_;
  };

  // Finds the entry sharing the longest start with `prompt`, applies the plan
  // (continue in place, truncate in place, copy the shared start, or start
  // fresh) and pins the entry that the request will extend.
  // With scope.isolated only the entries of scope.tenant are seen (copies
  // of a shared start stay within the tenant); the entry extended belongs to
  // scope.tenant from now on.
  Result<Lease> Acquire(std::span<const int32_t> prompt, const LookupScope& scope = {}) {
    std::vector<Leaving> evicted;
    Lease lease;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<std::vector<int64_t>> cuts;
      std::vector<EntryInfo> infos = PlanInfosLocked(&cuts, scope);
      LookupPlan plan = PlanLookup(infos, prompt, options_.lookup);
      ++counters_.lookups;
      Entry* target = nullptr;
      if (plan.kind == ReuseKind::kInPlace || plan.kind == ReuseKind::kTruncateInPlace) {
        Entry& entry = entries_.at(plan.entry_id);
        if (static_cast<int64_t>(entry.tokens.size()) == plan.n_reuse) {
          target = &entry;
        } else {
          const int64_t cut = Traits::NewestCut(*entry.state, plan.n_reuse);
          Status st = cut > 0
                          ? Traits::Truncate(*entry.state, cut)
                          : Status::NotFound("no snapshot of it lies within the shared start now");
          if (st.ok()) {
            plan.n_reuse = cut;
            entry.tokens.resize(static_cast<size_t>(cut));
            entry.prompt_len = std::min(entry.prompt_len, cut);
            target = &entry;
          } else {
            // The entry stays whole for its chat; this request starts fresh.
            target =
                &StartFreshLocked(&plan, "the cached chat could not be cut (" + st.message() + ")");
          }
        }
      } else if (plan.kind == ReuseKind::kShiftInPlace) {
        target = &entries_.at(plan.entry_id);
        const ShiftPlan& sp = plan.shift;
        MX_RETURN_IF_ERROR(Traits::RemoveSpan(*target->state, sp.drop_begin, sp.drop_end));
        MX_RETURN_IF_ERROR(Traits::Truncate(*target->state, plan.n_reuse));
        target->tokens.erase(target->tokens.begin() + sp.drop_begin, target->tokens.begin() + sp.drop_end);
        target->tokens.resize(static_cast<size_t>(plan.n_reuse));
        const int64_t removed = sp.drop_end - sp.drop_begin;
        if (target->prompt_len > sp.drop_begin) target->prompt_len = std::max(sp.drop_begin, target->prompt_len - removed);
        target->prompt_len = std::min(target->prompt_len, plan.n_reuse);
        ++counters_.shifts;
      } else if (plan.kind == ReuseKind::kCopyPrefix) {
        const Entry& source = entries_.at(plan.entry_id);
        // Copied at the newest point the source can be cut at now (never
        // past the plan), so a source that changed since is no error.
        const int64_t cut = Traits::NewestCut(*source.state, plan.n_reuse);
        auto copy = cut > 0 ? Traits::CopyPrefix(*source.state, cut)
                            : Result<std::unique_ptr<State>>(Status::NotFound(
                                  "no snapshot of it lies within the shared start now"));
        if (copy.ok()) {
          std::vector<int32_t> tokens(source.tokens.begin(), source.tokens.begin() + cut);
          plan.n_reuse = cut;
          target = &NewEntryLocked(std::move(tokens), std::move(copy).value());
          ++counters_.copies;
        } else {
          // What another request did to that chat must never fail this
          // one: start fresh and say why.
          target = &StartFreshLocked(
              &plan, "the shared start could not be copied (" + copy.status().message() + ")");
        }
      } else {
        target = &NewEntryLocked({}, fresh_());
      }
      if (plan.n_reuse > 0) {
        ++counters_.hits;
        counters_.tokens_reused += static_cast<uint64_t>(plan.n_reuse);
      }
      target->in_use = true;
      target->tenant = scope.tenant;
      Touch(*target);
      lease.pool_ = this;
      lease.id_ = target->id;
      lease.state_ = target->state.get();
      lease.plan_ = std::move(plan);
      evicted = EvictLocked(target->id);
    }
    Hand(std::move(evicted));
    return lease;
  }

  // What Acquire(prompt) would reuse, without changing anything: the plan's
  // n_reuse and, when nothing, why (the disk level compares it with its own
  // best match before deciding where the state comes from).
  // REQUIRES (like Acquire): called on the thread that runs the leases.
  LookupPlan Peek(std::span<const int32_t> prompt, const LookupScope& scope = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::vector<int64_t>> cuts;
    std::vector<EntryInfo> infos = PlanInfosLocked(&cuts, scope);
    return PlanLookup(infos, prompt, options_.lookup);
  }

  // Adds `state` (holding exactly `tokens`, e.g. loaded from disk) as a new
  // entry pinned by the returned lease, which reuses all of `tokens`; then
  // brings the pool back within its limits (the new entry stays).
  Lease Adopt(std::vector<int32_t> tokens, std::unique_ptr<State> state, std::string tenant = "") {
    std::vector<Leaving> evicted;
    Lease lease;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t n = static_cast<int64_t>(tokens.size());
      Entry& target = NewEntryLocked(std::move(tokens), std::move(state));
      target.tenant = std::move(tenant);
      target.prompt_len = n;
      target.in_use = true;
      Touch(target);
      ++counters_.lookups;
      if (n > 0) {
        ++counters_.hits;
        counters_.tokens_reused += static_cast<uint64_t>(n);
      }
      LookupPlan plan;
      plan.kind = ReuseKind::kInPlace;
      plan.entry_id = target.id;
      plan.n_reuse = plan.lcp = plan.entry_len = n;
      lease.pool_ = this;
      lease.id_ = target.id;
      lease.state_ = target.state.get();
      lease.plan_ = std::move(plan);
      evicted = EvictLocked(target.id);
    }
    Hand(std::move(evicted));
    return lease;
  }

  // Removes every entry that is not in use (e.g. before an unload); each
  // goes through the eviction hook.
  void Flush() {
    std::vector<Leaving> out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->second.in_use) {
          ++it;
          continue;
        }
        out.push_back({std::move(it->second.tokens), it->second.prompt_len, std::move(it->second.state),
                       std::move(it->second.tenant)});
        it = entries_.erase(it);
      }
    }
    Hand(std::move(out));
  }

  // Removes `tenant`'s entries (never through the eviction hook: they are
  // gone, not saved). Entries in use are removed when their request ends.
  Forgotten ForgetTenant(const std::string& tenant) {
    std::lock_guard<std::mutex> lock(mu_);
    Forgotten f;
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.tenant != tenant) {
        ++it;
      } else if (it->second.in_use) {
        it->second.forgotten = true;
        ++f.in_use;
        ++it;
      } else {
        ++f.entries;
        f.bytes += it->second.bytes;
        it = entries_.erase(it);
      }
    }
    return f;
  }

  // Re-counts the bytes of the entries in use (their states grow while a
  // request runs) and evicts idle entries while the pool is over its limits.
  // REQUIRES: called by the thread that runs the leases (it reads their
  // states).
  void Recharge() {
    std::vector<Leaving> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t total = 0;
      for (auto& [id, e] : entries_) {
        if (e.in_use) e.bytes = Traits::Bytes(*e.state);
        total += e.bytes;
      }
      if (total <= options_.limits.budget_bytes && entries_.size() <= options_.limits.max_entries) return;
      evicted = EvictLocked(0);
    }
    Hand(std::move(evicted));
  }

  std::vector<EntryStats> Stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<EntryStats> out;
    for (const auto& [id, e] : entries_) {
      out.push_back({id, e.tenant, static_cast<int64_t>(e.tokens.size()), e.bytes, e.last_used_us, e.in_use});
    }
    return out;
  }
  PoolCounters counters() const {
    std::lock_guard<std::mutex> lock(mu_);
    return counters_;
  }
  size_t total_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& [id, e] : entries_) n += e.bytes;
    return n;
  }
  const RamPoolOptions& options() const { return options_; }

 private:
  struct Entry {
    uint64_t id = 0;
    std::vector<int32_t> tokens;
    int64_t prompt_len = 0;
    std::unique_ptr<State> state;
    size_t bytes = 0;
    uint64_t tick = 0;  // recency order
    uint64_t last_used_us = 0;
    bool in_use = false;
    std::string tenant;      // of the request that last used it
    bool forgotten = false;  // its tenant was forgotten while in use: dropped at commit
  };

  // What planning needs of every entry; eviction needs no cut points.
  std::vector<EntryInfo> InfosLocked() const {
    std::vector<EntryInfo> infos;
    infos.reserve(entries_.size());
    for (const auto& [id, e] : entries_) {
      infos.push_back({id, e.tokens, e.prompt_len, e.bytes, e.tick, e.in_use, {}});
    }
    return infos;
  }

  // InfosLocked with each entry's cut points read from its state now
  // (stored in *cuts, which the infos point into). REQUIRES: mu_ held, on
  // the thread that runs the leases (entries in use are read).
  // With scope.isolated only scope.tenant's entries.
  std::vector<EntryInfo> PlanInfosLocked(std::vector<std::vector<int64_t>>* cuts,
                                         const LookupScope& scope) const {
    std::vector<EntryInfo> infos;
    cuts->clear();
    cuts->reserve(entries_.size());
    for (const auto& [id, e] : entries_) {
      if (scope.isolated && e.tenant != scope.tenant) continue;
      cuts->push_back(Traits::CutPoints(*e.state));
    }
    size_t i = 0;
    for (const auto& [id, e] : entries_) {
      if (scope.isolated && e.tenant != scope.tenant) continue;
      infos.push_back({id, e.tokens, e.prompt_len, e.bytes, e.tick, e.in_use, (*cuts)[i]});
      ++i;
    }
    return infos;
  }

  // A new empty entry for a request whose plan could not be applied; the
  // plan becomes "none" with `why` (worded for the log), keeping its lcp.
  Entry& StartFreshLocked(LookupPlan* plan, std::string why) {
    const int64_t lcp = plan->lcp;
    *plan = LookupPlan();
    plan->lcp = lcp;
    plan->why_none = std::move(why);
    return NewEntryLocked({}, fresh_());
  }

  Entry& NewEntryLocked(std::vector<int32_t> tokens, std::unique_ptr<State> state) {
    Entry e;
    e.id = ++next_id_;
    e.tokens = std::move(tokens);
    e.bytes = Traits::Bytes(*state);
    e.state = std::move(state);
    return entries_.emplace(e.id, std::move(e)).first->second;
  }

  void Touch(Entry& e) {
    e.tick = ++tick_;
    e.last_used_us = clock_();
  }

  std::vector<Leaving> EvictLocked(uint64_t keep) {
    std::vector<EntryInfo> infos = InfosLocked();
    std::vector<Leaving> out;
    for (uint64_t id : PlanEviction(infos, options_.limits, keep)) {
      auto it = entries_.find(id);
      out.push_back({std::move(it->second.tokens), it->second.prompt_len, std::move(it->second.state),
                     std::move(it->second.tenant)});
      entries_.erase(it);
      ++counters_.evictions;
    }
    return out;
  }

  void Hand(std::vector<Leaving> evicted) {
    if (!on_evict_) return;
    for (Leaving& l : evicted) on_evict_(std::move(l));
  }

  void Commit(uint64_t id, std::vector<int32_t> tokens, int64_t prompt_len) {
    std::vector<Leaving> evicted;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = entries_.find(id);
      if (it == entries_.end()) return;
      if (it->second.forgotten) {
        entries_.erase(it);
        return;
      }
      Entry& e = it->second;
      e.tokens = std::move(tokens);
      e.prompt_len = std::min<int64_t>(prompt_len, static_cast<int64_t>(e.tokens.size()));
      e.bytes = Traits::Bytes(*e.state);
      e.in_use = false;
      Touch(e);
      evicted = EvictLocked(id);
    }
    Hand(std::move(evicted));
  }

  void Drop(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.erase(id);
  }

  const RamPoolOptions options_;
  const std::function<std::unique_ptr<State>()> fresh_;
  const std::function<uint64_t()> clock_;
  const EvictFn on_evict_;
  mutable std::mutex mu_;
  std::map<uint64_t, Entry> entries_;  // guarded by mu_
  uint64_t next_id_ = 0;               // guarded by mu_
  uint64_t tick_ = 0;                  // guarded by mu_
  PoolCounters counters_;              // guarded by mu_
};

}  // namespace mx::cache
