#include "server/cache_events_api.h"

#include <charconv>

#include "server/http_parser.h"

namespace mx::server {
namespace {

// A form-encoded query value: '+' is a space, then %XX escapes.
bool DecodeQueryValue(std::string_view in, std::string* out) {
  std::string plus(in);
  for (char& c : plus) {
    if (c == '+') c = ' ';
  }
  return PercentDecode(plus, out);
}

bool ParseCount(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 20) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

std::string Scrub(std::string text,
                  const std::vector<std::pair<std::string, std::string>>& folders) {
  for (const auto& [dir, label] : folders) {
    if (dir.empty() || dir[0] != '/') continue;  // relative: as configured, nothing to hide
    for (size_t at = text.find(dir); at != std::string::npos; at = text.find(dir, at)) {
      size_t len = dir.size();
      std::string with = label;
      if (at + len < text.size() && text[at + len] == '/') {  // a file inside: its name is enough
        ++len;
        with = "";
      }
      text.replace(at, len, with);
      at += with.size();
    }
  }
  return text;
}

}  // namespace

Result<EventsQuery> ParseEventsQuery(std::string_view query) {
  EventsQuery q;
  bool seen_since = false, seen_limit = false;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    const std::string_view name = pair.substr(0, eq);
    std::string value;
    if (!DecodeQueryValue(eq == std::string_view::npos ? "" : pair.substr(eq + 1), &value)) {
      return Status::InvalidArgument("'" + std::string(name) + "': bad percent-encoding");
    }
    if (name == "since") {
      if (seen_since) return Status::InvalidArgument("'since' is given twice");
      seen_since = true;
      if (!ParseCount(value, &q.since)) {
        return Status::InvalidArgument("'since' must be a sequence number (0 or more), got '" +
                                       value.substr(0, 64) + "'");
      }
    } else if (name == "limit") {
      if (seen_limit) return Status::InvalidArgument("'limit' is given twice");
      seen_limit = true;
      uint64_t n = 0;
      if (!ParseCount(value, &n) || n < 1 || n > kMaxEventsLimit) {
        return Status::InvalidArgument("'limit' must be 1 to " + std::to_string(kMaxEventsLimit) +
                                       ", got '" + value.substr(0, 64) + "'");
      }
      q.limit = static_cast<size_t>(n);
    } else if (name == "tenant") {
      if (q.tenant) return Status::InvalidArgument("'tenant' is given twice");
      q.tenant = std::move(value);
    } else {
      std::string shown;
      if (!DecodeQueryValue(name, &shown)) shown = std::string(name);
      return Status::InvalidArgument("unknown query parameter '" + shown.substr(0, 64) +
                                     "' (expected since, limit, tenant)");
    }
  }
  return q;
}

Json CacheEventsJson(const engine::CacheEventPage& page,
                     const std::vector<std::pair<std::string, std::string>>& folders) {
  Json events = Json::array();
  for (const engine::CacheEvent& e : page.events) {
    events.push_back({{"seq", e.seq},
                      {"time_unix_ms", e.time_unix_ms},
                      {"model", e.model},
                      {"tenant", e.tenant},
                      {"prompt_tokens", e.prompt_tokens},
                      {"cached_tokens", e.cached_tokens},
                      {"source", engine::CacheSourceName(e.source)},
                      {"line", Scrub(e.line, folders)}});
  }
  return {{"events", events}, {"last_seq", page.last_seq}, {"skipped", page.skipped}};
}

}  // namespace mx::server
