// HttpServer: the ONE route table over the HTTP transport (http_transport.h).
// Each route has a method, a path pattern (`{name}` matches one segment),
// help text and whether it changes state (admin routes that do need the
// bearer token when one is set). A path asked for with a method it does not
// have gets 405 with an Allow header; HEAD runs a GET route without its body.
//
// Before any route: a request whose Origin is not allowed
// (MATRICXON_ALLOWED_ORIGINS) gets 403, and so does one whose Host is not a
// loopback name or address (or an allowed extra name) when the server
// listens on loopback. CORS preflights (OPTIONS) are answered for allowed
// origins only. Then each route's access (AccessOf): an admin route needs the
// admin token, an API route an API key (401 otherwise); the caller an API
// key names (its tenant) goes to the handler in HttpRequest::caller.
//
//   HttpServer server(options, env);
//   MX_RETURN_IF_ERROR(server.Bind());      // port 0: any free port
//   server.Run();                           // until Stop()
//
// Thread-safety: Stop() may be called from any thread (e.g. a signal thread).
#pragma once

#include <functional>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "engine/cache_events.h"
#include "engine/saved_cache.h"
#include "server/api_keys.h"
#include "server/api_types.h"
#include "server/http_transport.h"
#include "server/http_types.h"
#include "server/metrics.h"
#include "server/model_manager.h"
#include "server/options.h"
#include "server/persistence_policy.h"

namespace mx::server {

// What the handlers share.
struct ServerContext {
  ServerOptions options;
  Env* env = nullptr;
  ModelManager* models = nullptr;
  Metrics* metrics = nullptr;
  engine::SavedCacheStore* saved = nullptr;  // null when the cache folder cannot be created
  engine::CacheEventLog* cache_events = nullptr;  // each request's cache log line (the status page)
  std::mutex policy_mu;                      // serializes policy changes
  PersistencePolicy policy;                  // guarded by policy_mu: the effective saved-cache policy
  PolicyFileStamp policy_stamp;              // guarded by policy_mu: the policy file last looked at
};

using RouteHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

struct Route {
  std::string method;   // GET, POST, PUT, DELETE
  std::string pattern;  // e.g. /api/models/{name}/load: a {param} is one path segment
  std::string help;
  bool mutates = false;  // admin token required when set
  RouteHandler handler;
  // Shows what the prompt caches hold or did (entries, sizes, hits, reused
  // tokens): with MATRICXON_PROMPT_CACHE_SHARING=tenant only the admin may call it.
  bool cache_stats = false;
};

// Who may call a route, from the route and the settings (docs/security.md):
// kAdmin: the admin token when one is set (routes that change state, and the
// cache stats with tenant sharing); kApiKey: an API key when the server has
// them (every /v1/ route, /tokenize, /detokenize, /apply-template); else open.
enum class RouteAccess { kOpen, kApiKey, kAdmin };
RouteAccess AccessOf(const Route& route, const ServerOptions& options);
const char* RouteAccessName(RouteAccess access);  // "open", "api_key", "admin"

// Route groups, one handler file each.
void AddOpenAiRoutes(ServerContext* ctx, std::vector<Route>* routes);  // handlers_openai.cc
void AddModelRoutes(ServerContext* ctx, std::vector<Route>* routes);   // handlers_models.cc
void AddUtilityRoutes(ServerContext* ctx, std::vector<Route>* routes); // handlers_utility.cc
void AddCacheRoutes(ServerContext* ctx, std::vector<Route>* routes);   // handlers_cache.cc
std::string RenderCacheMetrics(ServerContext* ctx);                    // handlers_cache.cc
void AddPersistenceRoutes(ServerContext* ctx, std::vector<Route>* routes);  // handlers_persistence.cc
// Cluster nodes: when prompt_cache_policy.json's modification time or size
// changed since the last call, re-reads it and applies a policy another node
// saved (as a PUT does). A file that cannot be read or parsed is logged and
// ignored. Called every kPolicyCheckSeconds (handlers_persistence.cc).
void CheckPolicyFile(ServerContext* ctx);
inline constexpr int kPolicyCheckSeconds = 5;
void AddStatusRoutes(ServerContext* ctx, std::vector<Route>* routes);  // handlers_status.cc

// Resolves a request's "model" field: empty means the only model of the
// folder (InvalidArgument when there are several). NotFound when unknown.
Result<std::shared_ptr<ServedModel>> ResolveModel(ServerContext* ctx, const std::string& name);

// A chat request's body, parsed and checked: its fields, its model, and the
// chat to render (messages, tools and kwargs in the client's key order).
// The errors are the client's (400 / 404 through SendError).
struct ChatCall {
  ChatRequest request;
  std::shared_ptr<ServedModel> model;
  engine::ChatPrompt prompt;
};
Result<ChatCall> ParseChatCall(ServerContext* ctx, const HttpRequest& req);

class HttpServer {
 public:
  HttpServer(ServerOptions options, Env* env);
  ~HttpServer();

  // Reads the API keys (when MATRICXON_API_KEYS_FILE is set), then binds
  // host:port, exclusively. The API keys file's error (api_keys.h) when it
  // cannot be used; IOError naming the address when binding fails (e.g. the
  // port is in use); InvalidArgument when the admin routes would be open (no
  // admin token) on a non-loopback address and allow_open_admin is not set;
  // ResourceExhausted when another server uses the saved-cache folder.
  Status Bind();
  // Re-reads the API keys file (SIGHUP) and logs what happened; on failure
  // the keys in force stay. Any thread; OK and a log line when there are no
  // API keys.
  Status ReloadApiKeys();
  int port() const { return port_; }
  // Serves until Stop(); then waits for replies in flight and unloads models
  // (each unload flushes its RAM pool to the saved caches, bounded in time).
  void Run();
  void Stop();
  const std::vector<Route>& routes() const { return routes_; }

 private:
  // The transport's handler: checks Host and Origin, routes, answers.
  void Handle(HttpRequest& req, HttpResponse& res);
  // 403 text when Host or Origin refuse the request, "" when they allow it.
  std::string Refusal(const HttpRequest& req) const;
  // Error bodies never show the absolute folders the server was given.
  std::string ScrubPaths(std::string body) const;
  void IdleLoop();

  // Opens the saved caches: the policy file wins over the environment. A
  // folder another server holds sets start_error_.
  void OpenSavedCaches();
  Status start_error_;  // why Bind refuses to start (OK: it does not)

  engine::CacheEventLog cache_events_;  // declared before models_: their schedulers push to it
  ServerContext ctx_;
  std::unique_ptr<ApiKeys> api_keys_;  // set by Bind when the server has API keys
  std::unique_ptr<engine::SavedCacheStore> saved_;  // declared before models_: outlives their flush
  std::unique_ptr<ModelManager> models_;
  Metrics metrics_;
  std::vector<Route> routes_;
  std::unique_ptr<HttpTransport> http_;
  int port_ = 0;
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  bool stopping_ = false;
  std::thread idle_thread_;
};

}  // namespace mx::server
