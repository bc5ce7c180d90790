#include "server/server.h"

#include <algorithm>
#include <string_view>

#include "core/logging.h"
#include "core/secure_compare.h"
#include "core/thread_pool.h"
#include "server/http_util.h"
#include "server/request_guard.h"
#include "toolcalls/tool_call_history.h"

namespace mx::server {

Result<ChatCall> ParseChatCall(ServerContext* ctx, const HttpRequest& req) {
  MX_ASSIGN_OR_RETURN(Json body, ParseJsonBody(req.body));
  ChatCall call;
  MX_ASSIGN_OR_RETURN(call.request, ParseChatRequest(body));
  MX_RETURN_IF_ERROR(
      ParseOutputFields(body, req.body, &call.request.gen.format, &call.request.tools));
  MX_ASSIGN_OR_RETURN(call.model, ResolveModel(ctx, call.request.gen.model));
  MX_ASSIGN_OR_RETURN(call.prompt, ChatPromptFromBody(req.body));
  // A client that leaves stops its template's render too.
  if (req.exchange) call.prompt.should_stop = [ex = req.exchange] { return ex->disconnected(); };
  // tool_choice "none": the reply never calls a tool, so the template is
  // not shown any (the model then has nothing to call).
  if (call.request.tools.choice == ToolChoice::kNone) call.prompt.tools = jinja::Value::None();
  // Past tool calls as this template expects them (arguments as an object
  // or a JSON string, content null or "").
  const std::string& jinja = call.model->model->chat_template_text;
  if (!jinja.empty()) {
    call.prompt.messages =
        toolcalls::NormalizeToolCallHistory(call.prompt.messages, toolcalls::DetectHistoryForm(jinja));
  }
  return call;
}

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
  mo.scheduler.kv_type = ctx_.options.kv_type;
  mo.scheduler.k_type = ctx_.options.kv_type_k;
  mo.scheduler.v_type = ctx_.options.kv_type_v;
  mo.scheduler.cache.slots = ctx_.options.prompt_cache_slots;
  mo.scheduler.cache.budget_bytes = static_cast<uint64_t>(ctx_.options.prompt_cache_budget_mb) << 20;
  mo.scheduler.cache.context_shift = ctx_.options.prompt_cache_context_shift;
  mo.scheduler.cache.snapshot_every = ctx_.options.prompt_cache_snapshot_every;
  mo.scheduler.cache.snapshot_count = ctx_.options.prompt_cache_snapshots;
  mo.scheduler.cache.snapshot_budget_bytes =
      static_cast<uint64_t>(ctx_.options.prompt_cache_snapshot_mb) << 20;
  mo.scheduler.cache.saved = saved_.get();
  mo.scheduler.events = &cache_events_;
  ctx_.cache_events = &cache_events_;
  models_ = std::make_unique<ModelManager>(env, mo);
  ctx_.models = models_.get();
  ctx_.metrics = &metrics_;

  AddOpenAiRoutes(&ctx_, &routes_);
  AddModelRoutes(&ctx_, &routes_);
  AddUtilityRoutes(&ctx_, &routes_);
  AddCacheRoutes(&ctx_, &routes_);
  AddPersistenceRoutes(&ctx_, &routes_);
  AddStatusRoutes(&ctx_, &routes_);

  TransportOptions to;
  to.host = ctx_.options.host;
  to.port = ctx_.options.port;
  to.limits.max_body_bytes = ctx_.options.max_body_bytes;
  to.max_receiving_bytes = 32 * ctx_.options.max_body_bytes;
  to.max_connections = ctx_.options.max_connections;
  to.max_connections_per_client = ctx_.options.max_connections_per_client;
  to.head_timeout_ms = ctx_.options.request_head_timeout_s * 1000;
  to.request_timeout_ms = std::max(ctx_.options.request_timeout_s, ctx_.options.request_head_timeout_s) * 1000;
  to.idle_timeout_ms = ctx_.options.http_idle_timeout_s * 1000;
  to.write_timeout_ms = ctx_.options.http_write_timeout_s * 1000;
  http_ = std::make_unique<HttpTransport>(
      to, env, [this](HttpRequest& req, HttpResponse& res) { Handle(req, res); },
      [this](int status, const std::string& message) { return ScrubPaths(Dump(ErrorJson(status, message))); });
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
  // The file as read now: a later change is another node's (CheckPolicyFile).
  ctx_.policy_stamp = StatPolicyFile(ctx_.env, o.prompt_cache_dir);
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
  if (!store.ok() && store.status().code() == Status::Code::kResourceExhausted) {
    start_error_ = store.status();  // another server's folder: Bind refuses to start
    return;
  }
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
  MX_RETURN_IF_ERROR(start_error_);
  const ServerOptions& o = ctx_.options;
  if (!o.api_keys_file.empty()) {
    MX_ASSIGN_OR_RETURN(api_keys_,
                        ApiKeys::Open(ctx_.env, {.path = o.api_keys_file, .admin_token = o.admin_token}));
    MX_LOG(kInfo) << "API keys: " << api_keys_->size() << " from " << o.api_keys_file << " ("
                  << api_keys_->trusted_count() << " trusted); prompt cache sharing: "
                  << (o.prompt_cache_sharing_tenant ? "tenant" : "all");
  }
  if (!IsLoopbackHost(o.host) && o.admin_token.empty()) {
    if (!o.allow_open_admin) {
      return Status::InvalidArgument(
          "refusing to listen on " + o.host + " (not a loopback address) with the admin routes open: set "
          "MATRICXON_ADMIN_TOKEN (--admin-token), or MATRICXON_ALLOW_OPEN_ADMIN=true (--allow-open-admin true) to "
          "serve them to the network anyway");
    }
    MX_LOG(kWarn) << "the admin routes (load/unload models, delete saved caches) are open to anyone who can reach "
                  << o.host << ": no MATRICXON_ADMIN_TOKEN is set";
  }
  MX_RETURN_IF_ERROR(http_->Bind());
  port_ = http_->port();
  return Status::Ok();
}

Status HttpServer::ReloadApiKeys() {
  if (api_keys_ == nullptr) {
    MX_LOG(kInfo) << "SIGHUP: no MATRICXON_API_KEYS_FILE to re-read";
    return Status::Ok();
  }
  const size_t before = api_keys_->size();
  if (Status st = api_keys_->Reload(); !st.ok()) {
    MX_LOG(kError) << "API keys not re-read; the " << before << " keys in force stay: " << st.ToString();
    return st;
  }
  MX_LOG(kInfo) << "API keys re-read: " << api_keys_->size() << " from " << api_keys_->path() << " ("
                << api_keys_->trusted_count() << " trusted; " << before << " before)";
  return Status::Ok();
}

void HttpServer::Run() {
  idle_thread_ = std::thread([this] { IdleLoop(); });
  if (auto names = ctx_.env->ListDir(ctx_.options.models_dir); !names.ok()) {
    MX_LOG(kWarn) << "models folder " << ctx_.options.models_dir << " cannot be read (" << names.status().ToString()
                  << "); set MATRICXON_MODELS_DIR or --models-dir";
  }
  MX_LOG(kInfo) << "listening on http://" << ctx_.options.host << ":" << port_;
  http_->Run();
  MX_LOG(kInfo) << "stopped accepting requests; unloading models";
  {
    std::lock_guard<std::mutex> lock(idle_mu_);
    stopping_ = true;
  }
  idle_cv_.notify_all();
  if (idle_thread_.joinable()) idle_thread_.join();
  // The chats the models queue as they unload are written at once, with no
  // share limit; DrainAll then waits for the rest.
  if (saved_ != nullptr) saved_->BeginDrain();
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
  // Loads in progress give up now: a worker stuck in a long load would
  // otherwise hold the shutdown (which joins the workers) until it ends.
  models_->Stop();
  http_->Stop();
}

void HttpServer::IdleLoop() {
  std::unique_lock<std::mutex> lock(idle_mu_);
  auto policy_checked = std::chrono::steady_clock::now();
  while (!stopping_) {
    idle_cv_.wait_for(lock, std::chrono::seconds(1));
    if (stopping_) break;
    lock.unlock();
    models_->UnloadIdle();
    // Cluster nodes share the policy file: another node's PUT is applied
    // here within kPolicyCheckSeconds (docs/cluster.md).
    const auto now = std::chrono::steady_clock::now();
    if (ctx_.options.cluster_node &&
        now - policy_checked >= std::chrono::seconds(kPolicyCheckSeconds)) {
      policy_checked = now;
      CheckPolicyFile(&ctx_);
    }
    lock.lock();
  }
}

namespace {

// Matches `path` against `pattern`, segment by segment; a `{param}` segment
// matches any non-empty segment, whose decoded text goes to *params.
bool MatchPath(std::string_view pattern, std::string_view path, std::vector<std::string>* params) {
  params->clear();
  while (!pattern.empty() || !path.empty()) {
    if (pattern.empty() || path.empty() || pattern[0] != '/' || path[0] != '/') return false;
    pattern.remove_prefix(1);
    path.remove_prefix(1);
    const std::string_view p = pattern.substr(0, pattern.find('/'));
    const std::string_view s = path.substr(0, path.find('/'));
    if (p.size() >= 2 && p.front() == '{' && p.back() == '}') {
      std::string decoded;
      if (s.empty() || !PercentDecode(s, &decoded)) return false;
      params->push_back(std::move(decoded));
    } else if (p != s) {
      return false;
    }
    pattern.remove_prefix(p.size());
    path.remove_prefix(s.size());
  }
  return true;
}

// The routes an API key opens (SPEC §13): every OpenAI route, and the
// utility routes that read a model's tokenizer and template.
bool NeedsApiKey(std::string_view pattern) {
  return pattern.starts_with("/v1/") || pattern == "/tokenize" || pattern == "/detokenize" ||
         pattern == "/apply-template";
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

RouteAccess AccessOf(const Route& route, const ServerOptions& options) {
  if (route.mutates) return RouteAccess::kAdmin;
  if (!options.api_keys_file.empty() && NeedsApiKey(route.pattern)) return RouteAccess::kApiKey;
  if (options.prompt_cache_sharing_tenant && route.cache_stats) return RouteAccess::kAdmin;
  return RouteAccess::kOpen;
}

const char* RouteAccessName(RouteAccess access) {
  switch (access) {
    case RouteAccess::kOpen: return "open";
    case RouteAccess::kApiKey: return "api_key";
    case RouteAccess::kAdmin: return "admin";
  }
  return "open";
}

std::string HttpServer::Refusal(const HttpRequest& req) const {
  const ServerOptions& o = ctx_.options;
  if (IsLoopbackHost(o.host) && req.has_header("host") && !LoopbackHostAllowed(req.header("host"), o.allowed_hosts)) {
    return "this server listens on " + o.host +
           " and answers only requests for a loopback host name (localhost, 127.0.0.1, [::1]) or one named in "
           "MATRICXON_ALLOWED_HOSTS";
  }
  if (req.has_header("origin") && !OriginAllowed(req.header("origin"), o.allowed_origins) &&
      !IsOwnOrigin(req.header("origin"), req.header("host"), o.allowed_hosts)) {
    return "requests from web pages of this origin are refused: add it to MATRICXON_ALLOWED_ORIGINS to allow them";
  }
  return "";
}

std::string HttpServer::ScrubPaths(std::string body) const {
  // The folders as they appear inside JSON strings.
  for (const std::string& dir : {ctx_.options.models_dir, ctx_.options.prompt_cache_dir}) {
    if (dir.empty() || dir[0] != '/') continue;  // relative: as configured, nothing to hide
    std::string quoted = Dump(Json(dir));
    const std::string needle = quoted.substr(1, quoted.size() - 2);
    const std::string label = dir == ctx_.options.models_dir ? "the models folder" : "the cache folder";
    for (size_t at = body.find(needle); at != std::string::npos; at = body.find(needle, at)) {
      size_t len = needle.size();
      std::string with = label;
      if (at + len < body.size() && body[at + len] == '/') {  // a file inside: its name is enough
        ++len;
        with = "";
      }
      body.replace(at, len, with);
      at += with.size();
    }
  }
  return body;
}

void HttpServer::Handle(HttpRequest& req, HttpResponse& res) {
  metrics_.CountRequest();
  if (const std::string why = Refusal(req); !why.empty()) {
    SendError(res, 403, why, "forbidden");
    return;
  }
  const std::string origin = req.header("origin");  // allowed when present
  if (!origin.empty()) {
    res.set_header("Access-Control-Allow-Origin", origin);
    res.set_header("Vary", "Origin");
  }
  // The routes on this path, and the methods they take.
  std::vector<std::string> methods;
  const Route* route = nullptr;
  std::vector<std::string> params, matched;
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  for (const Route& r : routes_) {
    if (!MatchPath(r.pattern, req.path, &params)) continue;
    methods.push_back(r.method);
    if (r.method == "GET") methods.push_back("HEAD");
    if (r.method == method && route == nullptr) {
      route = &r;
      matched = params;
    }
  }
  if (methods.empty()) {
    SendError(res, 404, "no route for " + req.method + " " + req.path, "not_found");
    return;
  }
  if (req.method == "OPTIONS" && !origin.empty()) {  // a CORS preflight from an allowed origin
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", Join(methods));
    std::string asked = req.header("access-control-request-headers");
    res.set_header("Access-Control-Allow-Headers", asked.empty() ? "Authorization, Content-Type" : asked);
    res.set_header("Access-Control-Max-Age", "600");
    return;
  }
  if (route == nullptr) {
    const std::string allow = Join(methods);
    res.set_header("Allow", allow);
    SendError(res, 405, "method " + req.method + " is not allowed on " + req.path + " (allowed: " + allow + ")",
              "method_not_allowed");
    return;
  }
  // An API key is never the admin token (ParseApiKeys refuses that key), so
  // neither opens the other's routes.
  const RouteAccess access = AccessOf(*route, ctx_.options);
  const std::string authorization = req.header("authorization");
  const std::string_view presented = BearerToken(authorization);
  if (access == RouteAccess::kAdmin && !ctx_.options.admin_token.empty() &&
      (presented.empty() || !ConstantTimeEquals(ctx_.options.admin_token, presented))) {
    res.set_header("WWW-Authenticate", "Bearer");
    SendError(res, 401, "this route needs 'Authorization: Bearer <MATRICXON_ADMIN_TOKEN>'", "unauthorized");
    return;
  }
  if (access == RouteAccess::kApiKey) {
    std::optional<Caller> caller = api_keys_ != nullptr ? api_keys_->Lookup(presented) : std::nullopt;
    if (!caller) {
      res.set_header("WWW-Authenticate", "Bearer");
      SendError(res, 401,
                presented.empty() ? "this route needs an API key: send 'Authorization: Bearer <key>'"
                                  : "the API key sent is not valid",
                "invalid_api_key");
      return;
    }
    req.caller = std::move(*caller);
    res.log_note = "tenant " + req.caller.tenant;
  }
  req.matches.clear();
  req.matches.push_back(req.path);
  for (std::string& p : matched) req.matches.push_back(std::move(p));
  route->handler(req, res);
  if (res.status >= 400 && !res.stream) res.body = ScrubPaths(std::move(res.body));
}

}  // namespace mx::server
