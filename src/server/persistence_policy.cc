#include "server/persistence_policy.h"

#include <nlohmann/json.hpp>

namespace mx::server {

Result<PersistencePolicy> ApplyPolicyPatch(const PersistencePolicy& current, std::string_view body,
                                           std::string* field) {
  auto fail = [field](const std::string& name, const std::string& message) {
    if (field != nullptr) *field = name;
    return Status::InvalidArgument(message);
  };
  nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return fail("", "the body is not valid JSON");
  if (!j.is_object()) return fail("", "the body must be a JSON object with any of enabled, budget_mb, ttl_hours");
  PersistencePolicy p = current;
  for (const auto& [key, value] : j.items()) {
    if (key == "enabled") {
      if (!value.is_boolean()) return fail(key, "'enabled' must be true or false");
      p.enabled = value.get<bool>();
    } else if (key == "budget_mb" || key == "ttl_hours") {
      const int64_t min = key == "budget_mb" ? 1 : 0;
      const int64_t max = key == "budget_mb" ? kMaxBudgetMb : kMaxTtlHours;
      const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
      if (!value.is_number_integer()) return fail(key, "'" + key + "' must be an integer in " + range);
      // Unsigned values above int64 range are out of range too.
      if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(max)) {
        return fail(key, "'" + key + "' must be an integer in " + range);
      }
      const int64_t v = value.get<int64_t>();
      if (v < min || v > max) {
        return fail(key, "'" + key + "' = " + std::to_string(v) + " is out of range " + range);
      }
      (key == "budget_mb" ? p.budget_mb : p.ttl_hours) = v;
    } else {
      return fail(key, "unknown field '" + key + "' (allowed: enabled, budget_mb, ttl_hours)");
    }
  }
  return p;
}

std::string PolicyJson(const PersistencePolicy& policy) {
  nlohmann::json j = {{"enabled", policy.enabled}, {"budget_mb", policy.budget_mb}, {"ttl_hours", policy.ttl_hours}};
  return j.dump() + "\n";
}

Result<PersistencePolicy> LoadPolicyFile(Env* env, const std::string& dir) {
  const std::string path = JoinPath(dir, kPolicyFileName);
  if (!env->FileExists(path) && env->GetLinkInfo(path).status().code() == Status::Code::kNotFound) {
    return Status::NotFound(path + " does not exist");
  }
  // A regular file only (never blocking on a FIFO), not through a symbolic
  // link (nothing in the cache folder is followed), and of a sane size.
  MX_ASSIGN_OR_RETURN(std::string text,
                      ReadSmallFile(env, path, {.follow_symlinks = false}, kMaxPolicyFileBytes));
  auto p = ApplyPolicyPatch(PersistencePolicy{}, text);
  if (!p.ok()) return Status::InvalidArgument(path + ": " + p.status().message());
  return p;
}

PolicyFileStamp StatPolicyFile(Env* env, const std::string& dir) {
  auto info = env->GetLinkInfo(JoinPath(dir, kPolicyFileName));
  if (!info.ok()) return {};
  return {.exists = true, .mtime_micros = info->mtime_micros, .size_bytes = info->size_bytes};
}

Status SavePolicyFile(Env* env, const std::string& dir, const PersistencePolicy& policy) {
  MX_RETURN_IF_ERROR(env->CreateDirs(dir, 0700));
  return env->WriteFileAtomic(JoinPath(dir, kPolicyFileName), PolicyJson(policy), 0600);
}

}  // namespace mx::server
