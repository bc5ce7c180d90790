#include "server/api_keys.h"

#include <cstdio>
#include <map>

#include "core/secure_compare.h"

namespace mx::server {
namespace {

std::string ModeString(uint32_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%04o", mode & 07777);
  return buf;
}

bool IsWordChar(char c) { return c > 0x20 && c < 0x7f; }  // printable ASCII, not space

bool AllWordChars(std::string_view s) {
  for (char c : s) {
    if (!IsWordChar(c)) return false;
  }
  return true;
}

// The words of a line up to a word starting with '#' (a comment).
std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i == line.size() || line[i] == '#') break;
    size_t end = i;
    while (end < line.size() && line[end] != ' ' && line[end] != '\t') ++end;
    words.push_back(line.substr(i, end - i));
    i = end;
  }
  return words;
}

// Why `tenant` cannot be a file tenant, "" when it can.
std::string TenantProblem(std::string_view tenant) {
  if (tenant.size() > kMaxTenantChars) {
    return "the tenant is " + std::to_string(tenant.size()) + " characters long; at most " +
           std::to_string(kMaxTenantChars) + " are allowed";
  }
  if (!AllWordChars(tenant)) return "the tenant holds a character outside printable ASCII";
  if (tenant.find('/') != std::string_view::npos) {
    return "the tenant '" + std::string(tenant) +
           "' holds '/', which is reserved for a trusted key's end users (TENANT/user)";
  }
  return "";
}

}  // namespace

Result<std::vector<ApiKey>> ParseApiKeys(std::string_view text, const std::string& source,
                                         const std::string& admin_token) {
  std::vector<ApiKey> keys;
  std::map<std::string, size_t> line_of;  // key -> line number (parsing only, never serving)
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    auto fail = [&](const std::string& why) -> Status {
      return Status::InvalidArgument(source + " line " + std::to_string(line_no) + ": " + why);
    };
    for (char c : line) {
      if (c != '\t' && (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)) {
        return fail("a control character (expected KEY TENANT [trusted])");
      }
    }
    const std::vector<std::string_view> words = Words(line);
    if (words.empty()) continue;  // blank or a comment
    if (words.size() == 1) return fail("a key without a tenant (expected KEY TENANT [trusted])");
    if (words.size() > 3) {
      return fail(std::to_string(words.size()) + " words (expected KEY TENANT [trusted])");
    }
    ApiKey k{std::string(words[0]), std::string(words[1]), false};
    if (words.size() == 3) {
      if (words[2] != "trusted") {
        return fail("unknown word '" + std::string(words[2]) +
                    "' after the tenant (expected 'trusted' or nothing)");
      }
      k.trusted = true;
    }
    if (k.key.size() < kMinApiKeyChars || k.key.size() > kMaxApiKeyChars) {
      return fail("the key is " + std::to_string(k.key.size()) + " characters long; " +
                  std::to_string(kMinApiKeyChars) + " to " + std::to_string(kMaxApiKeyChars) +
                  " are needed");
    }
    if (!AllWordChars(k.key)) return fail("the key holds a character outside printable ASCII");
    if (const std::string why = TenantProblem(k.tenant); !why.empty()) return fail(why);
    if (!admin_token.empty() && k.key == admin_token) {
      return fail("the key is MATRICXON_ADMIN_TOKEN; an API key and the admin token must differ");
    }
    if (auto [it, added] = line_of.emplace(k.key, line_no); !added) {
      return fail("the same key as line " + std::to_string(it->second));
    }
    keys.push_back(std::move(k));
  }
  if (keys.empty()) {
    return Status::InvalidArgument(source +
                                   " holds no API keys (expected lines KEY TENANT [trusted]): "
                                   "every request would be refused");
  }
  return keys;
}

Result<std::string> RequestTenant(const Caller& caller, const std::string& user) {
  if (!caller.trusted || user.empty()) return caller.tenant;
  if (user.size() > kMaxUserChars || !AllWordChars(user) || user.find('/') != std::string::npos) {
    return Status::InvalidArgument(
        "'user' must be 1 to " + std::to_string(kMaxUserChars) +
        " printable ASCII characters without spaces or '/' (this API key is trusted: 'user' names "
        "the end user whose tenant the request runs for)");
  }
  return caller.tenant + "/" + user;
}

std::string_view BearerToken(std::string_view authorization) {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size()) return {};
  for (size_t i = 0; i < kScheme.size(); ++i) {
    char c = authorization[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kScheme[i]) return {};
  }
  std::string_view rest = authorization.substr(kScheme.size());
  if (rest[0] != ' ') return {};
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t')) rest.remove_suffix(1);
  return rest;
}

Result<std::unique_ptr<ApiKeys>> ApiKeys::Open(Env* env, ApiKeysOptions options) {
  std::unique_ptr<ApiKeys> keys(new ApiKeys(env, std::move(options)));
  MX_ASSIGN_OR_RETURN(std::vector<ApiKey> parsed, keys->Read());
  keys->keys_ = std::make_shared<const std::vector<ApiKey>>(std::move(parsed));
  return keys;
}

Result<std::vector<ApiKey>> ApiKeys::Read() const {
  const std::string& path = options_.path;
  const std::string name = "API keys file " + path;
  MX_ASSIGN_OR_RETURN(FileInfo info, env_->GetFileInfo(path));
  if (!info.is_regular) {
    return Status::InvalidArgument(name + " is " + FileTypeName(info.type) +
                                   ", not a regular file; refused");
  }
  if (info.owner_uid != env_->EffectiveUid()) {
    return Status::InvalidArgument(
        name + " is owned by uid " + std::to_string(info.owner_uid) + ", not by this user (uid " +
        std::to_string(env_->EffectiveUid()) + "); refused: its owner could add keys of their own");
  }
  if ((info.mode & 077) != 0) {
    return Status::InvalidArgument(name + " has mode " + ModeString(info.mode) +
                                   ": group and others must have no access to it (chmod 600 " +
                                   path + ")");
  }
  MX_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(env_, path, {}, kMaxApiKeysFileBytes));
  return ParseApiKeys(text, name, options_.admin_token);
}

Status ApiKeys::Reload() {
  MX_ASSIGN_OR_RETURN(std::vector<ApiKey> parsed, Read());
  auto next = std::make_shared<const std::vector<ApiKey>>(std::move(parsed));
  std::lock_guard<std::mutex> lock(mu_);
  keys_ = std::move(next);
  return Status::Ok();
}

std::shared_ptr<const std::vector<ApiKey>> ApiKeys::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return keys_;
}

std::optional<Caller> ApiKeys::Lookup(std::string_view presented) const {
  const std::shared_ptr<const std::vector<ApiKey>> keys = Current();
  if (presented.empty()) return std::nullopt;
  // Every key is compared, whatever matched before; the match is remembered
  // without a branch on the secret's bytes.
  size_t match = keys->size();
  for (size_t i = 0; i < keys->size(); ++i) {
    const bool equal = ConstantTimeEquals((*keys)[i].key, presented);
    match = equal ? i : match;
  }
  if (match == keys->size()) return std::nullopt;
  return Caller{(*keys)[match].tenant, (*keys)[match].trusted};
}

size_t ApiKeys::size() const { return Current()->size(); }

size_t ApiKeys::trusted_count() const {
  size_t n = 0;
  for (const ApiKey& k : *Current()) n += k.trusted ? 1 : 0;
  return n;
}

}  // namespace mx::server
