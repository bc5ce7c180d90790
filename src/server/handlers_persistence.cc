// Saved-cache policy routes (SPEC §7):
//   GET    /api/cache/persistence  -> {"enabled", "budget_mb", "ttl_hours", "used_bytes", "files", "key_source"}
//   PUT    /api/cache/persistence  any of enabled / budget_mb / ttl_hours: validated (400 naming the
//                                  field, nothing changed), saved to prompt_cache_policy.json, applied now
//   DELETE /api/cache/persistence  deletes every saved file -> {"deleted_files", "deleted_bytes"}
//                                  (cluster: not other nodes' temporaries of writes in progress)
// Cluster nodes apply a policy file another node changed (CheckPolicyFile).
// Turning saving off deletes every saved file; shrinking the budget evicts at once.
#include "core/logging.h"
#include "server/http_util.h"
#include "server/persistence_policy.h"
#include "server/server.h"

namespace mx::server {
namespace {

Json PersistenceJson(ServerContext* ctx) {
  const PersistencePolicy& p = ctx->policy;
  Json j = {{"enabled", false},
            {"budget_mb", p.budget_mb},
            {"ttl_hours", p.ttl_hours},
            {"used_bytes", 0},
            {"files", 0},
            {"key_source", "none"}};
  if (ctx->saved != nullptr) {
    const engine::SavedCacheUsage u = ctx->saved->Usage();
    j["enabled"] = u.enabled;
    j["used_bytes"] = u.used_bytes;
    j["files"] = u.files;
    j["key_source"] = cache::KeySourceName(u.key_source);
    // Chats that left RAM and wait to be written (still in memory), and how
    // writing shared the machine with replies (docs/saved_caches.md).
    j["queued"] = u.queued;
    j["queued_bytes"] = u.queued_bytes;
    j["writes"] = u.writes;
    j["write_slices"] = {{"total", u.gate.slices},
                         {"during_replies", u.gate.busy_slices},
                         {"during_replies_ms", static_cast<double>(u.gate.busy_slice_us) / 1000.0},
                         {"longest_ms", static_cast<double>(u.gate.max_slice_us) / 1000.0},
                         {"longest_step_wait_ms", static_cast<double>(u.gate.max_step_wait_us) / 1000.0}};
    if (!u.enabled) j["disabled_reason"] = ctx->saved->disabled_reason();
  }
  return j;
}

uint64_t BudgetBytes(const PersistencePolicy& p) {
  return static_cast<uint64_t>(p.budget_mb) << 20;
}
uint64_t TtlMicros(const PersistencePolicy& p) {
  return static_cast<uint64_t>(p.ttl_hours) * 3600 * 1000000;
}

// Turns saving on under `next`'s limits. Opening the key can still fail
// (e.g. a key file readable by others): then `before`'s limits are put back,
// nothing has changed and the error is returned.
Status TurnOn(ServerContext* ctx, const PersistencePolicy& before, const PersistencePolicy& next) {
  ctx->saved->SetLimits(BudgetBytes(next), TtlMicros(next));
  Status st = ctx->saved->SetEnabled(true).status();
  if (!st.ok()) ctx->saved->SetLimits(BudgetBytes(before), TtlMicros(before));
  return st;
}

// The rest of applying `next` (in force already): turning off deletes every
// saved file; a smaller budget or TTL evicts now.
void ApplyRest(ServerContext* ctx, const PersistencePolicy& next) {
  Status applied = next.enabled ? Status::Ok() : ctx->saved->SetEnabled(false).status();
  if (applied.ok()) applied = ctx->saved->SetLimits(BudgetBytes(next), TtlMicros(next)).status();
  if (!applied.ok()) {
    // The policy is saved and in force; deleting files failed part-way.
    MX_LOG(kWarn) << "saved caches: the new policy could not be fully applied: "
                  << applied.ToString();
  }
}

void HandlePut(ServerContext* ctx, const HttpRequest& req, HttpResponse& res) {
  if (ctx->saved == nullptr) {
    SendError(res, 503, "saved caches are unavailable: the cache folder could not be created", "unavailable");
    return;
  }
  std::lock_guard<std::mutex> lock(ctx->policy_mu);
  std::string field;
  auto next = ApplyPolicyPatch(ctx->policy, req.body, &field);
  if (!next.ok()) {
    SendJson(res, ErrorJson(next.status(), field), 400);
    return;
  }
  const bool turning_on = next->enabled && !ctx->saved->enabled();
  if (turning_on) {
    if (Status st = ctx->saved->CanEnable(); !st.ok()) {
      SendJson(res, ErrorJson(st, "enabled"), 400);
      return;
    }
  }
  // Saved first: a policy that cannot be persisted is not applied.
  const std::string policy_path = JoinPath(ctx->options.prompt_cache_dir, kPolicyFileName);
  const bool had_policy_file = ctx->env->FileExists(policy_path);
  if (Status st = SavePolicyFile(ctx->env, ctx->options.prompt_cache_dir, *next); !st.ok()) {
    SendError(res, st.WithContext("saving " + std::string(kPolicyFileName)));
    return;
  }
  const PersistencePolicy before = ctx->policy;
  if (turning_on) {
    if (Status st = TurnOn(ctx, before, *next); !st.ok()) {
      Status back = had_policy_file ? SavePolicyFile(ctx->env, ctx->options.prompt_cache_dir, before)
                                    : ctx->env->RemoveFile(policy_path);
      if (!back.ok()) {
        MX_LOG(kError) << "saved caches: could not restore " << kPolicyFileName << ": " << back.ToString();
      }
      SendJson(res, ErrorJson(st, "enabled"), HttpCode(st));
      return;
    }
  }
  ctx->policy = *next;
  const std::string line = PolicyJson(*next);
  MX_LOG(kInfo) << "saved caches: policy changed to " << line.substr(0, line.size() - 1);
  ApplyRest(ctx, *next);
  SendJson(res, PersistenceJson(ctx));
}

}  // namespace

void CheckPolicyFile(ServerContext* ctx) {
  if (ctx->saved == nullptr) return;
  std::lock_guard<std::mutex> lock(ctx->policy_mu);
  const std::string& dir = ctx->options.prompt_cache_dir;
  const PolicyFileStamp stamp = StatPolicyFile(ctx->env, dir);
  if (stamp == ctx->policy_stamp) return;
  ctx->policy_stamp = stamp;
  if (!stamp.exists) return;  // removed: the policy in force stays
  auto next = LoadPolicyFile(ctx->env, dir);
  if (!next.ok()) {
    const std::string kept = PolicyJson(ctx->policy);
    MX_LOG(kWarn) << "saved caches: " << next.status().ToString() << "; ignored, the policy stays "
                  << kept.substr(0, kept.size() - 1);
    return;
  }
  if (*next == ctx->policy) return;  // this node's own PUT, or no change
  if (next->enabled && !ctx->saved->enabled()) {
    if (Status st = TurnOn(ctx, ctx->policy, *next); !st.ok()) {
      MX_LOG(kWarn) << "saved caches: another node turned saving on, but this node cannot: "
                    << st.ToString();
      return;
    }
  }
  ctx->policy = *next;
  const std::string line = PolicyJson(*next);
  MX_LOG(kInfo) << "saved caches: policy changed by another node: "
                << line.substr(0, line.size() - 1);
  ApplyRest(ctx, *next);
}

void AddPersistenceRoutes(ServerContext* ctx, std::vector<Route>* routes) {
  const std::string path = "/api/cache/persistence";
  routes->push_back({"GET", path, "saved caches on disk: policy, usage and key source", false,
                     [ctx](const HttpRequest&, HttpResponse& res) {
                       std::lock_guard<std::mutex> lock(ctx->policy_mu);
                       SendJson(res, PersistenceJson(ctx));
                     },
                     /*cache_stats=*/true});
  routes->push_back({"PUT", path, "change any of enabled, budget_mb, ttl_hours (saved, applied at once)", true,
                     [ctx](const HttpRequest& req, HttpResponse& res) { HandlePut(ctx, req, res); }});
  routes->push_back({"DELETE", path, "delete every saved cache file", true,
                     [ctx](const HttpRequest&, HttpResponse& res) {
                       if (ctx->saved == nullptr) {
                         SendJson(res, {{"deleted_files", 0}, {"deleted_bytes", 0}});
                         return;
                       }
                       auto removed = ctx->saved->Purge();
                       if (!removed.ok()) {
                         SendError(res, removed.status());
                         return;
                       }
                       MX_LOG(kInfo) << "saved caches: deleted " << removed->files << " files on request";
                       SendJson(res, {{"deleted_files", removed->files}, {"deleted_bytes", removed->bytes}});
                     }});
}

}  // namespace mx::server
