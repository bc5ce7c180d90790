// Prompt-cache routes: GET /api/cache (each loaded model's RAM pool: its
// entries' sizes and times, never their tokens), DELETE
// /api/cache/tenants/{tenant} (forget a tenant's cached chats) and the cache
// gauges of GET /metrics.
#include <sstream>

#include "core/logging.h"
#include "server/http_util.h"
#include "server/metrics.h"
#include "server/server.h"

namespace mx::server {
namespace {

Json PoolJson(const ServedModel& m) {
  const engine::SequencePool& pool = m.scheduler->prompt_cache().pool();
  Json entries = Json::array();
  size_t used = 0;
  for (const cache::EntryStats& e : pool.Stats()) {
    used += e.bytes;
    entries.push_back({{"id", e.id},
                       {"tokens", e.n_tokens},
                       {"bytes", e.bytes},
                       {"last_used_unix_ms", e.last_used_us / 1000},
                       {"in_use", e.in_use}});
  }
  const cache::PoolCounters c = pool.counters();
  return {{"model", m.name},
          {"slots", pool.options().limits.max_entries},
          {"budget_bytes", pool.options().limits.budget_bytes},
          {"used_bytes", used},
          {"entries", entries},
          {"lookups", c.lookups},
          {"hits", c.hits},
          {"tokens_reused", c.tokens_reused},
          {"copies", c.copies},
          {"evictions", c.evictions}};
}

}  // namespace

// Prometheus gauges and counters of every loaded model's pool.
std::string RenderCacheMetrics(ServerContext* ctx) {
  std::ostringstream o;
  o << "# HELP matricxon_prompt_cache_entries Conversations held in a model's RAM pool.\n"
    << "# TYPE matricxon_prompt_cache_entries gauge\n";
  auto models = ctx->models->Loaded();
  for (const auto& m : models) {
    o << "matricxon_prompt_cache_entries{model=\"" << PromLabelValue(m->name) << "\"} "
      << m->scheduler->prompt_cache().pool().Stats().size() << "\n";
  }
  o << "# HELP matricxon_prompt_cache_bytes Bytes of state held in a model's RAM pool.\n"
    << "# TYPE matricxon_prompt_cache_bytes gauge\n";
  for (const auto& m : models) {
    o << "matricxon_prompt_cache_bytes{model=\"" << PromLabelValue(m->name) << "\"} "
      << m->scheduler->prompt_cache().pool().total_bytes() << "\n";
  }
  o << "# HELP matricxon_prompt_cache_evictions_total Entries that left a model's RAM pool.\n"
    << "# TYPE matricxon_prompt_cache_evictions_total counter\n";
  for (const auto& m : models) {
    o << "matricxon_prompt_cache_evictions_total{model=\"" << PromLabelValue(m->name) << "\"} "
      << m->scheduler->prompt_cache().pool().counters().evictions << "\n";
  }
  if (ctx->saved != nullptr) {
    const engine::SavedCacheUsage u = ctx->saved->Usage();
    o << "# HELP matricxon_saved_cache_files Saved caches on disk (checked files).\n"
      << "# TYPE matricxon_saved_cache_files gauge\n"
      << "matricxon_saved_cache_files " << u.files << "\n"
      << "# HELP matricxon_saved_cache_bytes Bytes of saved caches on disk.\n"
      << "# TYPE matricxon_saved_cache_bytes gauge\n"
      << "matricxon_saved_cache_bytes " << u.used_bytes << "\n"
      << "# HELP matricxon_saved_cache_queued Chats that left RAM and wait to be written.\n"
      << "# TYPE matricxon_saved_cache_queued gauge\n"
      << "matricxon_saved_cache_queued " << u.queued << "\n"
      << "# HELP matricxon_saved_cache_queued_bytes Memory held by the chats waiting to be "
         "written.\n"
      << "# TYPE matricxon_saved_cache_queued_bytes gauge\n"
      << "matricxon_saved_cache_queued_bytes " << u.queued_bytes << "\n"
      << "# HELP matricxon_saved_cache_writes_total Saved caches written since start.\n"
      << "# TYPE matricxon_saved_cache_writes_total counter\n"
      << "matricxon_saved_cache_writes_total " << u.writes << "\n"
      << "# HELP matricxon_saved_cache_write_during_replies_seconds_total Time saving took between "
         "the decode steps of running replies.\n"
      << "# TYPE matricxon_saved_cache_write_during_replies_seconds_total counter\n"
      << "matricxon_saved_cache_write_during_replies_seconds_total "
      << static_cast<double>(u.gate.busy_slice_us) / 1e6 << "\n"
      << "# HELP matricxon_saved_cache_step_wait_seconds_total Time decode steps waited for a "
         "write slice to end.\n"
      << "# TYPE matricxon_saved_cache_step_wait_seconds_total counter\n"
      << "matricxon_saved_cache_step_wait_seconds_total "
      << static_cast<double>(u.gate.step_wait_us) / 1e6 << "\n";
  }
  return o.str();
}

// Forgets a tenant (SPEC §13): its chats in every loaded model's RAM pool
// (ones in use go when their request ends) and its saved chats, queued or
// written. The tenant is one path segment, percent-encoded ("acme%2Fu1"
// for a trusted key's user "u1"); the route table has decoded it already
// (decoding again would turn a tenant's own "%41" into "A").
void ForgetTenant(ServerContext* ctx, const HttpRequest& req, HttpResponse& res) {
  const std::string& tenant = req.matches[1];
  size_t entries = 0, bytes = 0, in_use = 0;
  for (const auto& m : ctx->models->Loaded()) {
    const engine::SequencePool::Forgotten f = m->scheduler->ForgetTenant(tenant);
    entries += f.entries;
    bytes += f.bytes;
    in_use += f.in_use;
  }
  Json disk = {{"files", 0}, {"bytes", 0}};
  if (ctx->saved != nullptr) {
    auto removed = ctx->saved->ForgetTenant(tenant);
    if (!removed.ok()) return SendError(res, removed.status());
    disk = {{"files", removed->files}, {"bytes", removed->bytes}};
  }
  MX_LOG(kInfo) << "forgot tenant '" << tenant << "': " << entries << " cached chats in RAM ("
                << bytes << " bytes, " << in_use << " more when their replies end), "
                << disk["files"].get<size_t>() << " saved";
  SendJson(res, {{"tenant", tenant},
                 {"ram", {{"entries", entries}, {"bytes", bytes}, {"in_use", in_use}}},
                 {"disk", disk}});
}

void AddCacheRoutes(ServerContext* ctx, std::vector<Route>* routes) {
  routes->push_back(
      {"DELETE", "/api/cache/tenants/{tenant}",
       "forget a tenant's cached chats in RAM and on disk (admin)", true,
       [ctx](const HttpRequest& req, HttpResponse& res) { ForgetTenant(ctx, req, res); }});
  routes->push_back(
      {"GET", "/api/cache",
       "each loaded model's RAM pool: entries (tokens, bytes, last used, in use) and counters",
       false, [ctx](const HttpRequest&, HttpResponse& res) {
         Json models = Json::array();
         for (const auto& m : ctx->models->Loaded()) models.push_back(PoolJson(*m));
         SendJson(res, {{"models", models}});
       },
       /*cache_stats=*/true});
}

}  // namespace mx::server
