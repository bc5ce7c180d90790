#include "server/request_guard.h"

#include <arpa/inet.h>

#include <algorithm>

#include "server/http_types.h"

namespace mx::server {
namespace {

bool ValidHostName(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  return std::all_of(h.begin(), h.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
  });
}

bool ValidPort(std::string_view p) {
  return !p.empty() && p.size() <= 5 && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
         std::stoi(std::string(p)) <= 65535;
}

std::vector<std::string_view> SplitList(std::string_view value) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t comma = value.find(',');
    std::string_view item = TrimOws(value.substr(0, comma));
    if (!item.empty()) out.push_back(item);
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

bool IsLoopbackHost(std::string_view host) {
  std::string h = AsciiLower(host);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  if (!h.empty() && h.back() == '.') h.pop_back();
  if (h == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

std::string HostOfHostField(std::string_view value) {
  std::string v = AsciiLower(TrimOws(value));
  if (v.empty()) return "";
  std::string host;
  if (v[0] == '[') {
    const size_t close = v.find(']');
    if (close == std::string::npos) return "";
    host = v.substr(1, close - 1);
    std::string_view rest = std::string_view(v).substr(close + 1);
    if (!rest.empty() && (rest[0] != ':' || !ValidPort(rest.substr(1)))) return "";
    in6_addr v6{};
    if (inet_pton(AF_INET6, host.c_str(), &v6) != 1) return "";
    return host;
  }
  const size_t colon = v.find(':');
  host = v.substr(0, colon);
  if (colon != std::string::npos && !ValidPort(std::string_view(v).substr(colon + 1))) return "";
  if (!host.empty() && host.back() == '.') host.pop_back();
  if (!ValidHostName(host)) return "";
  return host;
}

bool LoopbackHostAllowed(std::string_view host_field, const std::vector<std::string>& extra) {
  const std::string host = HostOfHostField(host_field);
  if (host.empty()) return false;
  if (IsLoopbackHost(host)) return true;
  return std::find(extra.begin(), extra.end(), host) != extra.end();
}

std::string NormalizeOrigin(std::string_view origin) {
  std::string o = AsciiLower(TrimOws(origin));
  if (!o.empty() && o.back() == '/') o.pop_back();
  size_t scheme_end = o.find("://");
  if (scheme_end == std::string::npos) return "";
  const std::string scheme = o.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") return "";
  const std::string authority = o.substr(scheme_end + 3);
  if (authority.find('/') != std::string::npos || authority.find('@') != std::string::npos) return "";
  if (HostOfHostField(authority).empty()) return "";
  return o;
}

bool OriginAllowed(std::string_view origin, const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) return true;
  const std::string o = NormalizeOrigin(origin);
  if (o.empty()) return false;  // e.g. "null" (sandboxed pages, files)
  return std::find(allowed.begin(), allowed.end(), o) != allowed.end();
}

bool IsOwnOrigin(std::string_view origin, std::string_view host_field,
                 const std::vector<std::string>& extra_hosts) {
  if (!LoopbackHostAllowed(host_field, extra_hosts)) return false;
  const std::string o = NormalizeOrigin(origin);
  return !o.empty() && o == "http://" + AsciiLower(TrimOws(host_field));
}

Result<std::vector<std::string>> ParseOriginList(const std::string& name, const std::string& value) {
  std::vector<std::string> out;
  for (std::string_view item : SplitList(value)) {
    if (item == "*") {
      out.emplace_back("*");
      continue;
    }
    std::string o = NormalizeOrigin(item);
    if (o.empty()) {
      return Status::InvalidArgument(name + ": '" + std::string(item) +
                                     "' is not an origin: expected scheme://host[:port] with scheme http or https "
                                     "(comma-separated), or *");
    }
    out.push_back(std::move(o));
  }
  return out;
}

Result<std::vector<std::string>> ParseHostList(const std::string& name, const std::string& value) {
  std::vector<std::string> out;
  for (std::string_view item : SplitList(value)) {
    std::string h = AsciiLower(item);
    if (!h.empty() && h.back() == '.') h.pop_back();
    if (!ValidHostName(h)) {
      return Status::InvalidArgument(name + ": '" + std::string(item) +
                                     "' is not a host name: expected letters, digits, '-', '.' (comma-separated, "
                                     "no port)");
    }
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace mx::server
