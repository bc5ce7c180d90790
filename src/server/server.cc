#include "server/server.h"

#include <set>

#include "core/logging.h"
#include "core/thread_pool.h"
#include "server/http_util.h"

namespace mx::server {

Result<std::shared_ptr<ServedModel>> ResolveModel(ServerContext* ctx, const std::string& name) {
  if (!name.empty()) return ctx->models->Acquire(name);
  MX_ASSIGN_OR_RETURN(auto list, ctx->models->List());
  if (list.size() == 1) return ctx->models->Acquire(list[0].name);
  if (list.empty()) return Status::NotFound("no models in " + ctx->options.models_dir);
  return Status::InvalidArgument("'model' is required: " + std::to_string(list.size()) + " models are served");
}

HttpServer::HttpServer(ServerOptions options, Env* env) {
  ctx_.options = std::move(options);
  ctx_.env = env;
  OpenSavedCaches();
  ModelManagerOptions mo;
  mo.models_dir = ctx_.options.models_dir;
  mo.max_loaded = ctx_.options.max_loaded_models;
  mo.keep_alive_s = ctx_.options.keep_alive_s;
  mo.scheduler.n_threads = ctx_.options.threads > 0 ? ctx_.options.threads : PhysicalCoreCount();
  mo.scheduler.n_ctx = ctx_.options.ctx_size;
  mo.scheduler.n_parallel = ctx_.options.parallel;
  mo.scheduler.cache.slots = ctx_.options.prompt_cache_slots;
  mo.scheduler.cache.budget_bytes = static_cast<uint64_t>(ctx_.options.prompt_cache_budget_mb) << 20;
  mo.scheduler.cache.context_shift = ctx_.options.prompt_cache_context_shift;
  mo.scheduler.cache.snapshot_every = ctx_.options.prompt_cache_snapshot_every;
  mo.scheduler.cache.snapshot_count = ctx_.options.prompt_cache_snapshots;
  mo.scheduler.cache.saved = saved_.get();
  models_ = std::make_unique<ModelManager>(env, mo);
  ctx_.models = models_.get();
  ctx_.metrics = &metrics_;

  AddOpenAiRoutes(&ctx_, &routes_);
  AddModelRoutes(&ctx_, &routes_);
  AddUtilityRoutes(&ctx_, &routes_);
  AddCacheRoutes(&ctx_, &routes_);
  AddPersistenceRoutes(&ctx_, &routes_);

  // Every pattern is registered for every method; Dispatch picks the route or
  // answers 405, so wrong methods never fall through to 404.
  std::set<std::string> patterns;
  for (const Route& r : routes_) patterns.insert(r.pattern);
  for (const std::string& p : patterns) {
    auto h = [this, p](const httplib::Request& req, httplib::Response& res) { Dispatch(p, req, res); };
    http_.Get(p, h);
    http_.Post(p, h);
    http_.Put(p, h);
    http_.Delete(p, h);
    http_.Patch(p, h);
  }
  // Streaming replies hold a worker each: room for many clients at once.
  http_.new_task_queue = [] { return new httplib::ThreadPool(64); };
  http_.set_payload_max_length(ctx_.options.max_body_bytes);
  // httplib calls this for every status >= 400; only fill in bodies that
  // httplib left empty (no route, body too large, bad request line).
  http_.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413) {
      SendError(res, 413, "the request body is larger than the server accepts", "request_too_large");
    } else if (res.status == 404) {
      SendError(res, 404, "no route for " + req.method + " " + req.path, "not_found");
    } else {
      SendError(res, res.status, "HTTP error " + std::to_string(res.status));
    }
  });
  http_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    SendError(res, 500, "internal error: " + what);
  });
  http_.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    MX_LOG(kInfo) << req.remote_addr << " " << req.method << " " << req.path << " -> " << res.status;
  });
}

void HttpServer::OpenSavedCaches() {
  const ServerOptions& o = ctx_.options;
  PersistencePolicy policy{o.persist_prompt_cache, o.persist_cache_budget_mb, o.persist_cache_ttl_hours};
  if (auto saved = LoadPolicyFile(ctx_.env, o.prompt_cache_dir); saved.ok()) {
    policy = *saved;
    MX_LOG(kInfo) << "saved caches: policy from " << JoinPath(o.prompt_cache_dir, kPolicyFileName)
                  << " (it overrides the environment)";
  } else if (saved.status().code() != Status::Code::kNotFound) {
    MX_LOG(kWarn) << "saved caches: " << saved.status().ToString() << "; using the environment's settings";
  }
  ctx_.policy = policy;
  engine::SavedCacheOptions so;
  so.dir = o.prompt_cache_dir;
  so.enabled = policy.enabled;
  so.budget_bytes = static_cast<uint64_t>(policy.budget_mb) << 20;
  so.ttl_us = static_cast<uint64_t>(policy.ttl_hours) * 3600 * 1000000;
  so.passphrase = o.cache_key;
  so.cluster_node = o.cluster_node;
  so.defer_ms = static_cast<uint64_t>(o.persist_write_defer_ms);
  so.busy_share = static_cast<double>(o.persist_write_share_pct) / 100.0;
  so.queue_budget_bytes = static_cast<uint64_t>(o.persist_write_queue_mb) << 20;
  so.flush_timeout_ms = static_cast<uint64_t>(o.persist_flush_timeout_s) * 1000;
  auto store = engine::SavedCacheStore::Open(ctx_.env, so);
  if (!store.ok()) {
    MX_LOG(kError) << "saved caches are off: " << store.status().ToString();
    return;
  }
  saved_ = std::move(store).value();
  ctx_.saved = saved_.get();
}

HttpServer::~HttpServer() {
  Stop();
  if (idle_thread_.joinable()) idle_thread_.join();
}

Status HttpServer::Bind() {
  if (ctx_.options.port == 0) {
    port_ = http_.bind_to_any_port(ctx_.options.host);
  } else {
    port_ = http_.bind_to_port(ctx_.options.host, ctx_.options.port) ? ctx_.options.port : -1;
  }
  if (port_ <= 0) {
    return Status::IOError("cannot listen on " + ctx_.options.host + ":" + std::to_string(ctx_.options.port));
  }
  return Status::Ok();
}

void HttpServer::Run() {
  idle_thread_ = std::thread([this] { IdleLoop(); });
  if (auto names = ctx_.env->ListDir(ctx_.options.models_dir); !names.ok()) {
    MX_LOG(kWarn) << "models folder " << ctx_.options.models_dir << " cannot be read (" << names.status().ToString()
                  << "); set MATRICXON_MODELS_DIR or --models-dir";
  }
  MX_LOG(kInfo) << "listening on http://" << ctx_.options.host << ":" << port_;
  http_.listen_after_bind();
  MX_LOG(kInfo) << "stopped accepting requests; unloading models";
  {
    std::lock_guard<std::mutex> lock(idle_mu_);
    stopping_ = true;
  }
  idle_cv_.notify_all();
  if (idle_thread_.joinable()) idle_thread_.join();
  models_->Shutdown();
  // Every model's chats are queued now; write them all before exiting.
  if (saved_ != nullptr) saved_->DrainAll(saved_->flush_timeout_ms());
}

void HttpServer::Stop() {
  {
    std::lock_guard<std::mutex> lock(idle_mu_);
    stopping_ = true;
  }
  idle_cv_.notify_all();
  http_.stop();
}

void HttpServer::IdleLoop() {
  std::unique_lock<std::mutex> lock(idle_mu_);
  while (!stopping_) {
    idle_cv_.wait_for(lock, std::chrono::seconds(1));
    if (stopping_) break;
    lock.unlock();
    models_->UnloadIdle();
    lock.lock();
  }
}

void HttpServer::Dispatch(const std::string& pattern, const httplib::Request& req, httplib::Response& res) {
  metrics_.CountRequest();
  std::string allow;
  for (const Route& r : routes_) {
    if (r.pattern != pattern) continue;
    if (r.method != req.method) {
      allow += (allow.empty() ? "" : ", ") + r.method;
      continue;
    }
    if (r.mutates && !ctx_.options.admin_token.empty()) {
      const std::string expected = "Bearer " + ctx_.options.admin_token;
      if (req.get_header_value("Authorization") != expected) {
        SendError(res, 401, "this route needs 'Authorization: Bearer <MATRICXON_ADMIN_TOKEN>'", "unauthorized");
        return;
      }
    }
    r.handler(req, res);
    return;
  }
  res.set_header("Allow", allow);
  SendError(res, 405, "method " + req.method + " is not allowed on " + req.path + " (allowed: " + allow + ")",
            "method_not_allowed");
}

}  // namespace mx::server
