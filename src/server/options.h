// ServerOptions: every knob of `matricxon serve`, read in ONE place. Each
// setting is an environment variable (SPEC §9) and a `serve` flag of the
// same meaning; a flag wins over the variable, the variable over the default.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace mx::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string models_dir = "./data/models";
  int threads = 0;            // 0: physical cores
  int64_t ctx_size = 0;       // 0: the model's, capped at 8192
  int parallel = 4;
  DType kv_type = DType::kF16;     // attention KV rows, keys and values
  std::optional<DType> kv_type_k = std::nullopt;  // keys only, overriding kv_type
  std::optional<DType> kv_type_v = std::nullopt;  // values only, overriding kv_type
  int max_loaded_models = 2;
  int64_t keep_alive_s = 1800;
  std::string admin_token;    // empty: admin routes are open
  // Tenants (SPEC §13, docs/security.md).
  std::string api_keys_file;  // empty: no API keys, every request is tenant ""
  bool prompt_cache_sharing_tenant = false;  // MATRICXON_PROMPT_CACHE_SHARING=tenant (default all)
  // The HTTP front (SPEC §14, http_api.md "Limits").
  size_t max_body_bytes = 8u << 20;          // for every framing, chunked too
  int max_connections = 1024;                // open at once, all clients
  int max_connections_per_client = 256;      // open at once from one address
  int64_t request_head_timeout_s = 10;       // first byte -> end of the request head
  int64_t request_timeout_s = 60;            // first byte -> end of the body
  int64_t http_idle_timeout_s = 30;          // keep-alive connection without a request
  int64_t http_write_timeout_s = 60;         // a reply whose client takes none of its bytes
  std::vector<std::string> allowed_origins;  // normalized origins, or "*"; empty: none
  std::vector<std::string> allowed_hosts;    // extra Host names accepted on loopback
  bool allow_open_admin = false;             // listen off loopback without an admin token
  int prompt_cache_slots = 4;             // conversations kept in RAM per model
  int64_t prompt_cache_budget_mb = 2048;  // RAM those conversations may use together
  bool prompt_cache_context_shift = true;  // keep the cache when a client trims old messages
  int64_t prompt_cache_snapshot_every = 256;  // hybrid models: snapshot every N prompt tokens
  int64_t prompt_cache_snapshots = 8;         // hybrid models: snapshots kept per chat
  int64_t prompt_cache_snapshot_mb = 256;     // hybrid models: most MiB of snapshots per chat
  // Pictures (SPEC §11, docs/vision.md).
  bool prompt_cache_images_hash = false;  // MATRICXON_PROMPT_CACHE_IMAGES=hash (default fresh)
  int64_t image_max_bytes = int64_t{8} << 20;     // one picture's file
  int64_t image_max_pixels = int64_t{50} << 20;   // one picture's decoded width * height
  int max_images = 8;                             // pictures per request (0: none)
  std::vector<std::string> image_url_hosts;       // hosts remote picture URLs may name; empty: none
  int64_t image_fetch_timeout_s = 10;
  // Saved caches (SPEC §5-§7). The three limits are first-run defaults:
  // prompt_cache_policy.json in the cache folder wins once written.
  bool persist_prompt_cache = true;
  int64_t persist_cache_budget_mb = 4096;
  int64_t persist_cache_ttl_hours = 168;    // 0: never expire
  // When chats that left RAM are written (docs/saved_caches.md).
  int64_t persist_write_defer_ms = 2000;
  int64_t persist_write_share_pct = 10;
  int64_t persist_write_queue_mb = 256;
  int64_t persist_flush_timeout_s = 60;
  std::string prompt_cache_dir = "./data/prompt_cache";
  std::string cache_key;                    // passphrase; empty: generated key file
  bool cluster_node = false;
};

// One row of the settings table.
struct SettingSpec {
  std::string env;    // MATRICXON_PORT
  std::string flag;   // port
  std::string default_text;
  std::string help;
};
const std::vector<SettingSpec>& ServerSettings();

// Builds the options from `flags` (flag name -> value, only flags given) and
// `getenv` (nullopt when unset). InvalidArgument naming the variable (or
// flag) and the allowed range when a value is bad, or naming the settings
// that do not go together (tenant sharing needs API keys and an admin token).
Result<ServerOptions> LoadServerOptions(
    const std::map<std::string, std::string>& flags,
    const std::function<std::optional<std::string>(const std::string&)>& getenv);

}  // namespace mx::server
