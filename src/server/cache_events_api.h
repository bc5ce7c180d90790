// GET /api/cache/events: the query it takes and the JSON it answers, apart
// from the route (handlers_status.cc) so both are tested on their own.
//
//   ?since=N   events after sequence number N (default 0: the newest ones)
//   &limit=M   at most M events, the newest (1..1000, default 200)
//   &tenant=T  only tenant T's ("" is the tenant of requests without an API key)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "engine/cache_events.h"
#include "server/http_util.h"

namespace mx::server {

struct EventsQuery {
  uint64_t since = 0;
  size_t limit = 200;
  std::optional<std::string> tenant;
};
inline constexpr size_t kMaxEventsLimit = 1000;

// Parses the query string (without '?'). InvalidArgument naming the
// parameter when one is unknown, repeated, not a number or out of range.
Result<EventsQuery> ParseEventsQuery(std::string_view query);

// {"events": [{"seq", "time_unix_ms", "model", "tenant", "prompt_tokens",
// "cached_tokens", "source", "line"}], "last_seq", "skipped"}. Each
// `folders` pair (absolute folder, label) is replaced in the lines by its
// label, as error bodies hide the folders (a saved cache that failed to load
// may name its file).
Json CacheEventsJson(const engine::CacheEventPage& page,
                     const std::vector<std::pair<std::string, std::string>>& folders);

}  // namespace mx::server
