#include "engine/prompt_cache.h"

namespace mx::engine {
namespace {

cache::RamPoolOptions PoolOptions(const PromptCacheOptions& o, bool recurrent) {
  cache::RamPoolOptions p;
  p.limits.max_entries = static_cast<size_t>(o.slots);
  p.limits.budget_bytes = static_cast<size_t>(o.budget_bytes);
  p.lookup.recurrent = recurrent;
  return p;
}

std::string Rereading(size_t n, const std::string& why) {
  return "re-reading the entire chat (" + std::to_string(n) + " tokens): " + why;
}

}  // namespace

PromptCache::PromptCache(const models::Runner& runner, const PromptCacheOptions& options, Env* env,
                         SequencePool::EvictFn on_evict)
    : runner_(runner),
      pool_(PoolOptions(options, runner.layout()->n_recurrent > 0),
            [&runner] { return runner.NewSequence(); }, [env] { return env->WallMicros(); },
            std::move(on_evict)) {}

Result<CacheTicket> PromptCache::Start(std::span<const int32_t> prompt, bool use_cache,
                                       bool has_images) {
  CacheTicket t;
  if (!use_cache || has_images) {
    t.private_ = runner_.NewSequence();
    t.log_ = Rereading(prompt.size(), has_images ? "the prompt has images"
                                                 : "the request turned the cache off (cache_prompt: false)");
    return t;
  }
  MX_ASSIGN_OR_RETURN(t.lease_, pool_.Acquire(prompt));
  const cache::LookupPlan& plan = t.lease_.plan();
  t.n_reused_ = t.lease_.n_reused();
  switch (plan.kind) {
    case cache::ReuseKind::kNone:
      t.log_ = Rereading(prompt.size(), plan.why_none);
      break;
    case cache::ReuseKind::kInPlace:
    case cache::ReuseKind::kTruncateInPlace:
      t.log_ = "reused " + std::to_string(t.n_reused_) + " of " + std::to_string(prompt.size()) +
               " tokens from RAM";
      if (plan.kind == cache::ReuseKind::kTruncateInPlace) {
        t.log_ += " (cut the cached chat's last " + std::to_string(plan.entry_len - t.n_reused_) +
                  " tokens)";
      }
      break;
    case cache::ReuseKind::kCopyPrefix:
      t.log_ = "reused " + std::to_string(t.n_reused_) + " of " + std::to_string(prompt.size()) +
               " tokens from a copy of a cached chat's shared start";
      break;
  }
  return t;
}

void PromptCache::Finish(CacheTicket ticket, std::vector<int32_t> tokens, int64_t prompt_len) {
  if (ticket.lease_.valid()) ticket.lease_.Commit(std::move(tokens), prompt_len);
}

void PromptCache::Abandon(CacheTicket ticket) {
  // Destroying an uncommitted lease drops its entry.
  ticket.lease_ = SequencePool::Lease();
}

}  // namespace mx::engine
