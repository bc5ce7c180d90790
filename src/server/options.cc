#include "server/options.h"

#include <cerrno>
#include <cstdlib>

#include "server/request_guard.h"

namespace mx::server {

const std::vector<SettingSpec>& ServerSettings() {
  static const std::vector<SettingSpec> kSettings = {
      {"MATRICXON_HOST", "host", "127.0.0.1", "address to listen on"},
      {"MATRICXON_PORT", "port", "8080", "port to listen on (0: any free port; 0..65535)"},
      {"MATRICXON_MODELS_DIR", "models-dir", "./data/models",
       "GGUF files served; a model's name is its file name without .gguf"},
      {"MATRICXON_THREADS", "threads", "physical cores",
       "compute threads per loaded model (1..1024)"},
      {"MATRICXON_CTX_SIZE", "ctx-size", "model's, capped at 8192",
       "context window per chat (0 = model's; 0..4194304)"},
      {"MATRICXON_PARALLEL", "parallel", "4", "chats decoded at once per model (1..256)"},
      {"MATRICXON_KV_TYPE", "kv-type", "f16",
       "attention KV rows, keys and values: f16, q8_0, q4_0 or f32 (q8_0 and q4_0 need head dims "
       "that are multiples of 32)"},
      {"MATRICXON_KV_TYPE_K", "kv-type-k", "MATRICXON_KV_TYPE",
       "attention keys only: f16, q8_0, q4_0 or f32"},
      {"MATRICXON_KV_TYPE_V", "kv-type-v", "MATRICXON_KV_TYPE",
       "attention values only: f16, q8_0, q4_0 or f32"},
      {"MATRICXON_MAX_LOADED_MODELS", "max-loaded-models", "2", "models in memory at once (1..64)"},
      {"MATRICXON_KEEP_ALIVE_S", "keep-alive-s", "1800", "idle seconds before a model unloads (0 = never; 0..31536000)"},
      {"MATRICXON_ADMIN_TOKEN", "admin-token", "unset", "bearer token required by admin routes when set"},
      {"MATRICXON_API_KEYS_FILE", "api-keys-file", "unset",
       "file of API keys, one 'KEY TENANT [trusted]' a line, mode 0600; when set, the OpenAI routes, "
       "/tokenize, /detokenize and /apply-template need 'Authorization: Bearer KEY' (re-read on SIGHUP)"},
      {"MATRICXON_PROMPT_CACHE_SHARING", "prompt-cache-sharing", "all",
       "all (any chat may reuse any cached start) or tenant (a prompt only reuses its own tenant's "
       "cached chats; needs MATRICXON_API_KEYS_FILE and MATRICXON_ADMIN_TOKEN)"},
      {"MATRICXON_ALLOW_OPEN_ADMIN", "allow-open-admin", "false",
       "start on a non-loopback address without an admin token (admin routes open to the network; "
       "true/false)"},
      {"MATRICXON_ALLOWED_ORIGINS", "allowed-origins", "unset",
       "origins allowed to call the API from a browser, comma-separated scheme://host[:port], or "
       "*; "
       "other requests with an Origin get 403"},
      {"MATRICXON_ALLOWED_HOSTS", "allowed-hosts", "unset",
       "extra Host names accepted when listening on loopback, comma-separated (loopback names and "
       "addresses always are)"},
      {"MATRICXON_MAX_BODY_MB", "max-body-mb", "8",
       "largest request body, MiB, any framing (1..1024)"},
      {"MATRICXON_MAX_CONNECTIONS", "max-connections", "1024",
       "HTTP connections open at once (1..65536)"},
      {"MATRICXON_MAX_CONNECTIONS_PER_CLIENT", "max-connections-per-client", "256",
       "HTTP connections open at once from one client address (1..65536)"},
      {"MATRICXON_REQUEST_HEAD_TIMEOUT_S", "request-head-timeout-s", "10",
       "seconds from a request's first byte to the end of its head (1..3600)"},
      {"MATRICXON_REQUEST_TIMEOUT_S", "request-timeout-s", "60",
       "seconds from a request's first byte to the end of its body (1..86400)"},
      {"MATRICXON_HTTP_IDLE_TIMEOUT_S", "http-idle-timeout-s", "30",
       "seconds a keep-alive connection may wait for its next request (1..86400)"},
      {"MATRICXON_HTTP_WRITE_TIMEOUT_S", "http-write-timeout-s", "60",
       "seconds a client may take none of its reply's bytes before its connection is closed and its "
       "request cancelled (1..86400)"},
      {"MATRICXON_PROMPT_CACHE_SLOTS", "prompt-cache-slots", "4",
       "conversations kept in RAM per model (1..64)"},
      {"MATRICXON_PROMPT_CACHE_BUDGET_MB", "prompt-cache-budget-mb", "2048",
       "RAM the cached conversations of a model may use together, MiB (1..16777216)"},
      {"MATRICXON_PROMPT_CACHE_CONTEXT_SHIFT", "prompt-cache-context-shift", "true",
       "keep a chat's cache when old messages are trimmed (true/false)"},
      {"MATRICXON_PROMPT_CACHE_SNAPSHOT_EVERY", "prompt-cache-snapshot-every", "256",
       "hybrid models: snapshot the recurrent state every N prompt tokens, and before the prompt's "
       "end (16..1048576)"},
      {"MATRICXON_PROMPT_CACHE_SNAPSHOTS", "prompt-cache-snapshots", "8",
       "hybrid models: recurrent snapshots kept per cached chat, the most useful (message "
       "boundaries before periodic ones; 1..8)"},
      {"MATRICXON_PROMPT_CACHE_SNAPSHOT_MB", "prompt-cache-snapshot-mb", "256",
       "hybrid models: most MiB of recurrent snapshots per cached chat (each is one whole "
       "recurrent state; 0 = none; 0..16777216)"},
      {"MATRICXON_PROMPT_CACHE_IMAGES", "prompt-cache-images", "fresh",
       "prompts with pictures: fresh (never reuse a cached chat) or hash (match pictures by a hash "
       "of "
       "their decoded pixels)"},
      {"MATRICXON_IMAGE_MAX_MB", "image-max-mb", "8",
       "largest picture file, MiB (1..1024; a data: URL also counts against the body limit)"},
      {"MATRICXON_IMAGE_MAX_MEGAPIXELS", "image-max-megapixels", "50",
       "largest decoded picture, width x height in units of 2^20 pixels (1..1024)"},
      {"MATRICXON_MAX_IMAGES", "max-images", "8", "pictures per request (0 = none; 0..256)"},
      {"MATRICXON_IMAGE_URL_HOSTS", "image-url-hosts", "unset",
       "hosts whose http(s) picture URLs the server may fetch, comma-separated host names (any "
       "port); "
       "unset: only data: URLs"},
      {"MATRICXON_IMAGE_FETCH_TIMEOUT_S", "image-fetch-timeout-s", "10",
       "seconds to fetch one remote picture (1..600)"},
      {"MATRICXON_PERSIST_PROMPT_CACHE", "persist-prompt-cache", "true",
       "save caches to disk (true/false)"},
      {"MATRICXON_PERSIST_CACHE_BUDGET_MB", "persist-cache-budget-mb", "4096",
       "disk space for saved caches, MiB (1..16777216; first-run default, the saved policy wins)"},
      {"MATRICXON_PERSIST_CACHE_TTL_HOURS", "persist-cache-ttl-hours", "168",
       "hours before a saved cache expires (0 = never; 0..876000; first-run default)"},
      {"MATRICXON_PERSIST_WRITE_DEFER_MS", "persist-write-defer-ms", "2000",
       "while replies run, a chat that left RAM waits this long for an idle moment before it is "
       "written "
       "between decode steps (0..3600000)"},
      {"MATRICXON_PERSIST_WRITE_SHARE", "persist-write-share", "10",
       "percent of the time saving may take from running replies (1..100)"},
      {"MATRICXON_PERSIST_WRITE_QUEUE_MB", "persist-write-queue-mb", "256",
       "chats waiting to be written beyond this many MiB are written without waiting for their "
       "share (1..16777216)"},
      {"MATRICXON_PERSIST_FLUSH_TIMEOUT_S", "persist-flush-timeout-s", "60",
       "at shutdown, longest time spent writing the chats still in RAM (0..86400)"},
      {"MATRICXON_PROMPT_CACHE_DIR", "prompt-cache-dir", "./data/prompt_cache",
       "where saved caches, the key and the policy live (created with mode 0700)"},
      {"MATRICXON_CACHE_KEY", "cache-key", "generated",
       "passphrase the saved-cache key is derived from (prefer the variable: flags show in ps)"},
      {"MATRICXON_CLUSTER_NODE", "cluster-node", "false",
       "this server is a cluster node: it never creates a key (true/false)"},
  };
  return kSettings;
}

namespace {

Result<int64_t> ParseRange(const std::string& name, const std::string& value, int64_t min, int64_t max) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || end == nullptr || *end != '\0' || errno != 0 || v < min || v > max) {
    return Status::InvalidArgument(name + "='" + value + "': expected an integer in [" + std::to_string(min) +
                                   ", " + std::to_string(max) + "]");
  }
  return static_cast<int64_t>(v);
}

Result<bool> ParseBoolSetting(const std::string& name, const std::string& value) {
  if (value == "true" || value == "1" || value == "yes" || value == "on") return true;
  if (value == "false" || value == "0" || value == "no" || value == "off") return false;
  return Status::InvalidArgument(name + "='" + value + "': expected true or false");
}

}  // namespace

Result<ServerOptions> LoadServerOptions(
    const std::map<std::string, std::string>& flags,
    const std::function<std::optional<std::string>(const std::string&)>& getenv) {
  ServerOptions o;
  for (const SettingSpec& s : ServerSettings()) {
    std::optional<std::string> value;
    std::string name;
    if (auto it = flags.find(s.flag); it != flags.end()) {
      value = it->second;
      name = "--" + s.flag;
    } else if (auto env = getenv(s.env)) {
      value = *env;
      name = s.env;
    }
    if (!value) continue;
    const std::string& v = *value;
    if (s.flag == "host") {
      if (v.empty()) return Status::InvalidArgument(name + " is empty: expected an address such as 127.0.0.1");
      o.host = v;
    } else if (s.flag == "port") {
      MX_ASSIGN_OR_RETURN(int64_t p, ParseRange(name, v, 0, 65535));
      o.port = static_cast<int>(p);
    } else if (s.flag == "models-dir") {
      if (v.empty()) return Status::InvalidArgument(name + " is empty: expected a folder");
      o.models_dir = v;
    } else if (s.flag == "threads") {
      MX_ASSIGN_OR_RETURN(int64_t t, ParseRange(name, v, 1, 1024));
      o.threads = static_cast<int>(t);
    } else if (s.flag == "ctx-size") {
      MX_ASSIGN_OR_RETURN(o.ctx_size, ParseRange(name, v, 0, int64_t{1} << 22));
    } else if (s.flag == "parallel") {
      MX_ASSIGN_OR_RETURN(int64_t p, ParseRange(name, v, 1, 256));
      o.parallel = static_cast<int>(p);
    } else if (s.flag == "kv-type" || s.flag == "kv-type-k" || s.flag == "kv-type-v") {
      DType t;
      const bool known = v == "f16" || v == "f32" || v == "q8_0" || v == "q4_0";
      if (!known || !DTypeFromName(v, &t)) {
        return Status::InvalidArgument(name + "='" + v + "': expected f16, q8_0, q4_0 or f32");
      }
      if (s.flag == "kv-type") {
        o.kv_type = t;
      } else if (s.flag == "kv-type-k") {
        o.kv_type_k = t;
      } else {
        o.kv_type_v = t;
      }
    } else if (s.flag == "max-loaded-models") {
      MX_ASSIGN_OR_RETURN(int64_t m, ParseRange(name, v, 1, 64));
      o.max_loaded_models = static_cast<int>(m);
    } else if (s.flag == "keep-alive-s") {
      MX_ASSIGN_OR_RETURN(o.keep_alive_s, ParseRange(name, v, 0, 31536000));
    } else if (s.flag == "admin-token") {
      o.admin_token = v;
    } else if (s.flag == "api-keys-file") {
      if (v.empty()) return Status::InvalidArgument(name + " is empty: expected a file");
      o.api_keys_file = v;
    } else if (s.flag == "prompt-cache-sharing") {
      if (v != "all" && v != "tenant") {
        return Status::InvalidArgument(name + "='" + v + "': expected all or tenant");
      }
      o.prompt_cache_sharing_tenant = v == "tenant";
    } else if (s.flag == "allow-open-admin") {
      MX_ASSIGN_OR_RETURN(o.allow_open_admin, ParseBoolSetting(name, v));
    } else if (s.flag == "allowed-origins") {
      MX_ASSIGN_OR_RETURN(o.allowed_origins, ParseOriginList(name, v));
    } else if (s.flag == "allowed-hosts") {
      MX_ASSIGN_OR_RETURN(o.allowed_hosts, ParseHostList(name, v));
    } else if (s.flag == "max-body-mb") {
      MX_ASSIGN_OR_RETURN(int64_t mb, ParseRange(name, v, 1, 1024));
      o.max_body_bytes = static_cast<size_t>(mb) << 20;
    } else if (s.flag == "max-connections") {
      MX_ASSIGN_OR_RETURN(int64_t n, ParseRange(name, v, 1, 65536));
      o.max_connections = static_cast<int>(n);
    } else if (s.flag == "max-connections-per-client") {
      MX_ASSIGN_OR_RETURN(int64_t n, ParseRange(name, v, 1, 65536));
      o.max_connections_per_client = static_cast<int>(n);
    } else if (s.flag == "request-head-timeout-s") {
      MX_ASSIGN_OR_RETURN(o.request_head_timeout_s, ParseRange(name, v, 1, 3600));
    } else if (s.flag == "request-timeout-s") {
      MX_ASSIGN_OR_RETURN(o.request_timeout_s, ParseRange(name, v, 1, 86400));
    } else if (s.flag == "http-idle-timeout-s") {
      MX_ASSIGN_OR_RETURN(o.http_idle_timeout_s, ParseRange(name, v, 1, 86400));
    } else if (s.flag == "http-write-timeout-s") {
      MX_ASSIGN_OR_RETURN(o.http_write_timeout_s, ParseRange(name, v, 1, 86400));
    } else if (s.flag == "prompt-cache-slots") {
      MX_ASSIGN_OR_RETURN(int64_t n, ParseRange(name, v, 1, 64));
      o.prompt_cache_slots = static_cast<int>(n);
    } else if (s.flag == "prompt-cache-budget-mb") {
      MX_ASSIGN_OR_RETURN(o.prompt_cache_budget_mb, ParseRange(name, v, 1, int64_t{1} << 24));
    } else if (s.flag == "prompt-cache-snapshot-every") {
      MX_ASSIGN_OR_RETURN(o.prompt_cache_snapshot_every, ParseRange(name, v, 16, 1 << 20));
    } else if (s.flag == "prompt-cache-snapshots") {
      MX_ASSIGN_OR_RETURN(o.prompt_cache_snapshots, ParseRange(name, v, 1, 8));
    } else if (s.flag == "prompt-cache-snapshot-mb") {
      MX_ASSIGN_OR_RETURN(o.prompt_cache_snapshot_mb, ParseRange(name, v, 0, int64_t{1} << 24));
    } else if (s.flag == "prompt-cache-context-shift") {
      MX_ASSIGN_OR_RETURN(o.prompt_cache_context_shift, ParseBoolSetting(name, v));
    } else if (s.flag == "prompt-cache-images") {
      if (v != "fresh" && v != "hash") {
        return Status::InvalidArgument(name + "='" + v + "': expected fresh or hash");
      }
      o.prompt_cache_images_hash = v == "hash";
    } else if (s.flag == "image-max-mb") {
      MX_ASSIGN_OR_RETURN(int64_t mb, ParseRange(name, v, 1, 1024));
      o.image_max_bytes = mb << 20;
    } else if (s.flag == "image-max-megapixels") {
      MX_ASSIGN_OR_RETURN(int64_t mp, ParseRange(name, v, 1, 1024));
      o.image_max_pixels = mp << 20;
    } else if (s.flag == "max-images") {
      MX_ASSIGN_OR_RETURN(int64_t n, ParseRange(name, v, 0, 256));
      o.max_images = static_cast<int>(n);
    } else if (s.flag == "image-url-hosts") {
      MX_ASSIGN_OR_RETURN(o.image_url_hosts, ParseHostList(name, v));
    } else if (s.flag == "image-fetch-timeout-s") {
      MX_ASSIGN_OR_RETURN(o.image_fetch_timeout_s, ParseRange(name, v, 1, 600));
    } else if (s.flag == "persist-prompt-cache") {
      MX_ASSIGN_OR_RETURN(o.persist_prompt_cache, ParseBoolSetting(name, v));
    } else if (s.flag == "persist-cache-budget-mb") {
      MX_ASSIGN_OR_RETURN(o.persist_cache_budget_mb, ParseRange(name, v, 1, int64_t{1} << 24));
    } else if (s.flag == "persist-cache-ttl-hours") {
      MX_ASSIGN_OR_RETURN(o.persist_cache_ttl_hours, ParseRange(name, v, 0, 876000));
    } else if (s.flag == "persist-write-defer-ms") {
      MX_ASSIGN_OR_RETURN(o.persist_write_defer_ms, ParseRange(name, v, 0, 3600000));
    } else if (s.flag == "persist-write-share") {
      MX_ASSIGN_OR_RETURN(o.persist_write_share_pct, ParseRange(name, v, 1, 100));
    } else if (s.flag == "persist-write-queue-mb") {
      MX_ASSIGN_OR_RETURN(o.persist_write_queue_mb, ParseRange(name, v, 1, int64_t{1} << 24));
    } else if (s.flag == "persist-flush-timeout-s") {
      MX_ASSIGN_OR_RETURN(o.persist_flush_timeout_s, ParseRange(name, v, 0, 86400));
    } else if (s.flag == "prompt-cache-dir") {
      if (v.empty()) return Status::InvalidArgument(name + " is empty: expected a folder");
      o.prompt_cache_dir = v;
    } else if (s.flag == "cache-key") {
      o.cache_key = v;
    } else if (s.flag == "cluster-node") {
      MX_ASSIGN_OR_RETURN(o.cluster_node, ParseBoolSetting(name, v));
    }
  }
  // Isolation without keys would isolate nothing (every request the same
  // tenant), and without an admin token any tenant could use the admin routes
  // that show and delete every tenant's caches.
  if (o.prompt_cache_sharing_tenant && o.api_keys_file.empty()) {
    return Status::InvalidArgument(
        "MATRICXON_PROMPT_CACHE_SHARING=tenant needs MATRICXON_API_KEYS_FILE (--api-keys-file): "
        "without API keys every request is the same tenant, so nothing would be isolated");
  }
  if (o.prompt_cache_sharing_tenant && o.admin_token.empty()) {
    return Status::InvalidArgument(
        "MATRICXON_PROMPT_CACHE_SHARING=tenant needs MATRICXON_ADMIN_TOKEN (--admin-token): "
        "without it any tenant may call the admin routes, which show and delete every tenant's "
        "caches");
  }
  return o;
}

}  // namespace mx::server
