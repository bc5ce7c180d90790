// API keys and the tenant of a request (SPEC §13, docs/security.md).
//
// MATRICXON_API_KEYS_FILE holds one key a line:
//
//   # comment (a word starting with '#' starts a comment to the end of the line)
//   KEY TENANT [trusted]
//
// KEY: 16..512 printable ASCII characters, no whitespace, not starting with
// '#', each key on one line only. TENANT: 1..128 printable ASCII characters,
// no whitespace and no '/' ('/' separates a trusted key's tenant from its end
// user). `trusted`: the key belongs to a front end (such as pAIring) that
// authenticates its own users and names them in the OpenAI `user` field; the
// request's tenant is then "TENANT/user". The file must be a regular file (a
// symbolic link is followed), owned by the user the server runs as, with no
// permission bits for group or others (0600 or 0400).
//
//   MX_ASSIGN_OR_RETURN(auto keys, ApiKeys::Open(env, {.path = p, .admin_token = t}));
//   if (auto caller = keys->Lookup(presented)) ...;   // any thread
//   Status st = keys->Reload();                        // SIGHUP; old keys stay on failure
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "server/http_types.h"

namespace mx::server {

inline constexpr size_t kMinApiKeyChars = 16;
inline constexpr size_t kMaxApiKeyChars = 512;
inline constexpr size_t kMaxTenantChars = 128;
inline constexpr size_t kMaxUserChars = 128;
inline constexpr uint64_t kMaxApiKeysFileBytes = 1 << 20;

// One line of the file.
struct ApiKey {
  std::string key;
  std::string tenant;
  bool trusted = false;
};

struct ApiKeysOptions {
  std::string path;
  // A key equal to the admin token is refused: one secret must never open
  // both the API and the admin routes. Empty: no admin token.
  std::string admin_token;
};

// Parses the file's text. InvalidArgument naming `source` and the line
// ("API keys file /etc/mx/keys line 3: ..."); a message never shows a key.
// A text without any key is refused too (every request would get 401).
Result<std::vector<ApiKey>> ParseApiKeys(std::string_view text, const std::string& source,
                                         const std::string& admin_token = "");

// The tenant a request runs for, decided in this ONE place: the caller's
// tenant; for a trusted caller naming a user (the OpenAI `user` field), that
// tenant + "/" + user. An untrusted caller's `user` is ignored. InvalidArgument
// (HTTP 400, naming 'user') when a trusted caller's user is longer than
// kMaxUserChars or holds anything but printable ASCII without spaces or '/'.
Result<std::string> RequestTenant(const Caller& caller, const std::string& user);

// The key of an `Authorization: Bearer KEY` header value (scheme in any case),
// "" when the value is not of that form.
std::string_view BearerToken(std::string_view authorization);

// The keys in force. Thread-safety: Lookup, Reload and the accessors may be
// called from any thread at once.
class ApiKeys {
 public:
  // Reads and checks the file (see the top of this file). InvalidArgument
  // naming the file for its type, owner or mode, or a line; NotFound or
  // IOError when it cannot be read.
  static Result<std::unique_ptr<ApiKeys>> Open(Env* env, ApiKeysOptions options);

  // Re-reads the file. On failure the keys in force stay and the error is
  // returned (the caller logs it); on success the new keys are used by every
  // later Lookup.
  Status Reload();

  // The caller whose key `presented` is, or nullopt. The presented key is
  // compared with EVERY key in constant time (no early exit, no lookup by the
  // secret), so the time depends only on its length and the number of keys.
  std::optional<Caller> Lookup(std::string_view presented) const;

  size_t size() const;
  size_t trusted_count() const;
  const std::string& path() const { return options_.path; }

 private:
  ApiKeys(Env* env, ApiKeysOptions options) : env_(env), options_(std::move(options)) {}
  Result<std::vector<ApiKey>> Read() const;
  std::shared_ptr<const std::vector<ApiKey>> Current() const;

  Env* env_;
  const ApiKeysOptions options_;
  mutable std::mutex mu_;
  std::shared_ptr<const std::vector<ApiKey>> keys_;  // guarded by mu_; never null after Open
};

}  // namespace mx::server
