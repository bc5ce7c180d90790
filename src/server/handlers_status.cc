// Status page routes: GET / (the page), GET /ui/<file> (its script, style
// and icon, embedded in the binary: ui_assets.h) and GET /api/cache/events
// (the last cache log lines per request, cache_events_api.h). The page only
// reads the JSON routes and calls the admin routes with the token its
// operator pastes; it holds no data and no secret of its own.
#include "engine/cache_events.h"
#include "server/cache_events_api.h"
#include "server/http_util.h"
#include "server/server.h"
#include "server/ui_assets.h"

namespace mx::server {
namespace {

// Only the server's own files run, style or load; nothing may frame the
// page, nor post a form anywhere. The page's fetches go to this server
// (same origin), so the Origin and Host rules of the API apply to them.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

void SendAsset(const UiAsset& asset, HttpResponse& res) {
  res.set_content(std::string(asset.body), std::string(asset.content_type));
  res.set_header("Content-Security-Policy", kContentSecurityPolicy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Cache-Control", "no-store");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("X-Frame-Options", "DENY");
}

void Events(ServerContext* ctx, const HttpRequest& req, HttpResponse& res) {
  auto query = ParseEventsQuery(req.query);
  if (!query.ok()) return SendJson(res, ErrorJson(query.status()), 400);
  engine::CacheEventPage page;
  if (ctx->cache_events != nullptr)
    page = ctx->cache_events->Since(query->since, query->limit, query->tenant);
  SendJson(res, CacheEventsJson(page, {{ctx->options.prompt_cache_dir, "the cache folder"},
                                       {ctx->options.models_dir, "the models folder"}}));
}

}  // namespace

void AddStatusRoutes(ServerContext* ctx, std::vector<Route>* routes) {
  for (const UiAsset& asset : UiAssets()) {
    const std::string help = asset.path == "/" ? "the status page (HTML; reads the JSON routes)"
                                               : "a file of the status page";
    routes->push_back({"GET", std::string(asset.path), help, false,
                       [&asset](const HttpRequest&, HttpResponse& res) { SendAsset(asset, res); }});
  }
  // Shows what the prompt caches did, like GET /api/cache: cache stats, so
  // the admin's only with MATRICXON_PROMPT_CACHE_SHARING=tenant.
  routes->push_back(
      {"GET", "/api/cache/events",
       "the last prompt-cache log lines per request (counts and reasons, never prompt "
       "text): ?since=seq&limit=n&tenant=t",
       false, [ctx](const HttpRequest& req, HttpResponse& res) { Events(ctx, req, res); },
       /*cache_stats=*/true});
}

}  // namespace mx::server
