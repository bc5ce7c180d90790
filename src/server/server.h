// HttpServer: the HTTP listener (cpp-httplib) and the ONE route table.
// Each route has a method, a path pattern, help text and whether it changes
// state (admin routes that do need the bearer token when one is set). A path
// asked for with a method it does not have gets 405 with an Allow header.
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

#include <httplib.h>

#include "core/env.h"
#include "core/status.h"
#include "engine/saved_cache.h"
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
  std::mutex policy_mu;                      // serializes policy changes
  PersistencePolicy policy;                  // guarded by policy_mu: the effective saved-cache policy
};

using RouteHandler = std::function<void(const httplib::Request&, httplib::Response&)>;

struct Route {
  std::string method;   // GET, POST, PUT, DELETE
  std::string pattern;  // httplib regex path, e.g. /api/models/([^/]+)/load
  std::string help;
  bool mutates = false;  // admin token required when set
  RouteHandler handler;
};

// Route groups, one handler file each.
void AddOpenAiRoutes(ServerContext* ctx, std::vector<Route>* routes);  // handlers_openai.cc
void AddModelRoutes(ServerContext* ctx, std::vector<Route>* routes);   // handlers_models.cc
void AddUtilityRoutes(ServerContext* ctx, std::vector<Route>* routes); // handlers_utility.cc
void AddCacheRoutes(ServerContext* ctx, std::vector<Route>* routes);   // handlers_cache.cc
std::string RenderCacheMetrics(ServerContext* ctx);                    // handlers_cache.cc
void AddPersistenceRoutes(ServerContext* ctx, std::vector<Route>* routes);  // handlers_persistence.cc

// Resolves a request's "model" field: empty means the only model of the
// folder (InvalidArgument when there are several). NotFound when unknown.
Result<std::shared_ptr<ServedModel>> ResolveModel(ServerContext* ctx, const std::string& name);

class HttpServer {
 public:
  HttpServer(ServerOptions options, Env* env);
  ~HttpServer();

  // Binds host:port. IOError naming the address when that fails.
  Status Bind();
  int port() const { return port_; }
  // Serves until Stop(); then waits for replies in flight and unloads models
  // (each unload flushes its RAM pool to the saved caches, bounded in time).
  void Run();
  void Stop();
  const std::vector<Route>& routes() const { return routes_; }

 private:
  void Dispatch(const std::string& pattern, const httplib::Request& req, httplib::Response& res);
  void IdleLoop();

  // Opens the saved caches: the policy file wins over the environment.
  void OpenSavedCaches();

  ServerContext ctx_;
  std::unique_ptr<engine::SavedCacheStore> saved_;  // declared before models_: outlives their flush
  std::unique_ptr<ModelManager> models_;
  Metrics metrics_;
  std::vector<Route> routes_;
  httplib::Server http_;
  int port_ = 0;
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  bool stopping_ = false;
  std::thread idle_thread_;
};

}  // namespace mx::server
