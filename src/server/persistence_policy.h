// The saved-cache policy (SPEC §7): enabled, disk budget and TTL. The
// environment gives first-run defaults; once changed through
// PUT /api/cache/persistence the policy is written (atomically) to
// prompt_cache_policy.json in the cache folder and wins from then on.
//
//   {"enabled": true, "budget_mb": 4096, "ttl_hours": 168}
//
// Parsing is separate from handling so that both the file and request
// bodies go through the same validation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/env.h"
#include "core/status.h"

namespace mx::server {

inline constexpr char kPolicyFileName[] = "prompt_cache_policy.json";
inline constexpr int64_t kMaxBudgetMb = int64_t{1} << 24;
inline constexpr int64_t kMaxTtlHours = 876000;

struct PersistencePolicy {
  bool enabled = true;
  int64_t budget_mb = 4096;  // 1..kMaxBudgetMb
  int64_t ttl_hours = 168;   // 0 (never) .. kMaxTtlHours
  bool operator==(const PersistencePolicy&) const = default;
};

// `current` with the fields of the JSON object `body` applied. Any of
// enabled (bool), budget_mb, ttl_hours (integers in range); InvalidArgument
// whose message names the field for bad JSON, a non-object, an unknown
// field, a wrong type or a value out of range. *field gets that name
// ("" for bad JSON).
Result<PersistencePolicy> ApplyPolicyPatch(const PersistencePolicy& current, std::string_view body,
                                           std::string* field = nullptr);

// The policy saved in `dir`; NotFound when there is none; InvalidArgument /
// IOError naming the file when it cannot be read or parsed, or when it is
// not a regular file (a FIFO is refused without blocking, a symbolic link
// is not followed) or larger than kMaxPolicyFileBytes.
inline constexpr uint64_t kMaxPolicyFileBytes = 64 << 10;
Result<PersistencePolicy> LoadPolicyFile(Env* env, const std::string& dir);
// Writes the policy atomically (temp, fsync, rename), mode 0600.
Status SavePolicyFile(Env* env, const std::string& dir, const PersistencePolicy& policy);
std::string PolicyJson(const PersistencePolicy& policy);

// What tells a changed policy file (another cluster node's PUT) without
// reading it: its modification time and size; exists = false when there is
// none (or it cannot be described).
struct PolicyFileStamp {
  bool exists = false;
  uint64_t mtime_micros = 0;
  uint64_t size_bytes = 0;
  bool operator==(const PolicyFileStamp&) const = default;
};
PolicyFileStamp StatPolicyFile(Env* env, const std::string& dir);

}  // namespace mx::server
