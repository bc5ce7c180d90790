// Model routes: GET /v1/models (OpenAI list), GET /api/models (with load
// state), POST /api/models/{name}/load and /unload (admin).
#include "core/logging.h"
#include "server/http_util.h"
#include "server/server.h"

namespace mx::server {
namespace {

// What a model does: every model chats; one with a vision projector beside
// it takes pictures too.
Json Capabilities(const ModelInfo& m) {
  Json c = Json::array({"chat"});
  if (!m.projector.empty()) c.push_back("vision");
  return c;
}

void ListOpenAi(ServerContext* ctx, HttpResponse& res) {
  auto list = ctx->models->List();
  if (!list.ok()) return SendError(res, list.status());
  Json data = Json::array();
  for (const ModelInfo& m : *list) {
    data.push_back({{"id", m.name},
                    {"object", "model"},
                    {"created", 0},
                    {"owned_by", "matricxon"},
                    {"capabilities", Capabilities(m)}});
  }
  SendJson(res, {{"object", "list"}, {"data", data}});
}

void ListApi(ServerContext* ctx, HttpResponse& res) {
  auto list = ctx->models->List();
  if (!list.ok()) return SendError(res, list.status());
  Json models = Json::array();
  for (const ModelInfo& m : *list) {
    models.push_back({{"name", m.name},
                      {"path", m.name + ".gguf"},
                      {"size_bytes", m.size_bytes},
                      {"loaded", m.loaded},
                      {"active_requests", m.active},
                      {"capabilities", Capabilities(m)},
                      {"projector", m.projector.empty() ? Json(nullptr) : Json(m.projector)}});
  }
  SendJson(res, {{"models", models}});
}

void Load(ServerContext* ctx, const HttpRequest& req, HttpResponse& res) {
  const std::string name = req.matches[1];
  auto served = ctx->models->Acquire(name);
  if (!served.ok()) return SendError(res, served.status());
  SendJson(res, {{"name", name}, {"loaded", true}, {"n_ctx", (*served)->scheduler->n_ctx()}});
}

void Unload(ServerContext* ctx, const HttpRequest& req, HttpResponse& res) {
  const std::string name = req.matches[1];
  Status st = ctx->models->Unload(name);
  if (!st.ok()) return SendError(res, st);
  SendJson(res, {{"name", name}, {"loaded", false}});
}

}  // namespace

void AddModelRoutes(ServerContext* ctx, std::vector<Route>* routes) {
  routes->push_back({"GET", "/v1/models", "the served models (OpenAI list)", false,
                     [ctx](const HttpRequest&, HttpResponse& res) { ListOpenAi(ctx, res); }});
  // Its active_requests show how busy every model is: the admin's with tenant sharing.
  routes->push_back({"GET", "/api/models", "the served models with their load state", false,
                     [ctx](const HttpRequest&, HttpResponse& res) { ListApi(ctx, res); },
                     /*cache_stats=*/true});
  routes->push_back({"POST", "/api/models/{name}/load", "loads a model now", true,
                     [ctx](const HttpRequest& req, HttpResponse& res) { Load(ctx, req, res); }});
  routes->push_back({"POST", "/api/models/{name}/unload", "unloads a model (waits for its replies)",
                     true,
                     [ctx](const HttpRequest& req, HttpResponse& res) { Unload(ctx, req, res); }});
}

}  // namespace mx::server
