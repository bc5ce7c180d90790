#include "server/picture_fetch.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "server/http_types.h"

namespace mx::server {
namespace {

struct HttpUrl {
  std::string scheme, host, path;
  int port = 0;
};

// scheme://host[:port][/path[?query]]; no user info, no IPv6 literals.
Result<HttpUrl> ParseHttpUrl(const std::string& url) {
  HttpUrl u;
  const size_t colon = url.find("://");
  u.scheme = AsciiLower(url.substr(0, colon));
  const size_t host_at = colon + 3;
  const size_t path_at = std::min(url.find_first_of("/?#", host_at), url.size());
  std::string authority = url.substr(host_at, path_at - host_at);
  if (authority.find('@') != std::string::npos) {
    return Status::InvalidArgument("picture URL " + ShownPictureUrl(url) + ": user names in URLs are refused");
  }
  if (authority.empty() || authority[0] == '[') {
    return Status::InvalidArgument("picture URL " + ShownPictureUrl(url) + ": expected a host name");
  }
  u.port = u.scheme == "https" ? 443 : 80;
  if (const size_t c = authority.find(':'); c != std::string::npos) {
    const std::string port = authority.substr(c + 1);
    char* end = nullptr;
    const long p = std::strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 65535) {
      return Status::InvalidArgument("picture URL " + ShownPictureUrl(url) + ": bad port '" + port + "'");
    }
    u.port = static_cast<int>(p);
    authority.resize(c);
  }
  u.host = AsciiLower(authority);
  u.path = path_at < url.size() ? url.substr(path_at) : "/";
  if (u.path[0] != '/') u.path = "/" + u.path;
  if (const size_t hash = u.path.find('#'); hash != std::string::npos) u.path.resize(hash);
  return u;
}

std::string V4Kind(uint32_t a) {  // host byte order
  auto in = [a](uint32_t net, int bits) { return (a >> (32 - bits)) == (net >> (32 - bits)); };
  if (in(0x7f000000, 8)) return "loopback";
  if (in(0xa9fe0000, 16)) return "link-local";
  if (in(0x0a000000, 8) || in(0xac100000, 12) || in(0xc0a80000, 16)) return "private";
  if (in(0x64400000, 10)) return "carrier-grade NAT";
  if (in(0x00000000, 8)) return "unspecified";
  if (in(0xe0000000, 4)) return "multicast";
  if (in(0xf0000000, 4) || in(0xc0000000, 24) || in(0xc6120000, 15)) return "reserved";
  return "";
}

// The text form of a resolved address (inet_ntop).
std::string AddressText(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

// Ends a fetch at its deadline: shuts the fetch's socket down (a copy of
// its descriptor, so that the socket outlives the client's own close and
// the number is never another socket's), which makes every blocking
// connect, send or receive on it return at once.
class Deadline {
 public:
  explicit Deadline(uint64_t ms) : ms_(ms), watch_([this] { Watch(); }) {}
  ~Deadline() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      over_ = true;
      if (fd_ >= 0) ::close(fd_);
      fd_ = -1;
    }
    cv_.notify_all();
    watch_.join();
  }
  // The client's socket (from its socket-options hook).
  void Adopt(int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = ::dup(fd);
    if (expired_ && fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }
  bool expired() {
    std::lock_guard<std::mutex> lock(mu_);
    return expired_;
  }

 private:
  void Watch() {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::milliseconds(ms_), [this] { return over_; })) return;
    expired_ = true;
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }
  const uint64_t ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  int fd_ = -1;          // guarded by mu_
  bool over_ = false;    // guarded by mu_: the fetch returned
  bool expired_ = false; // guarded by mu_
  std::thread watch_;
};

}  // namespace

std::string NonPublicAddressKind(const std::string& ip) {
  in_addr v4{};
  if (inet_pton(AF_INET, ip.c_str(), &v4) == 1) return V4Kind(ntohl(v4.s_addr));
  in6_addr v6{};
  if (inet_pton(AF_INET6, ip.c_str(), &v6) != 1) return "not an address";
  const uint8_t* b = v6.s6_addr;
  static const uint8_t kZero[16] = {};
  if (std::memcmp(b, kZero, 15) == 0 && (b[15] == 0 || b[15] == 1)) return b[15] == 0 ? "unspecified" : "loopback";
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(b, kMapped, 12) == 0 || std::memcmp(b, kZero, 12) == 0) {  // IPv4-mapped / -compatible
    return V4Kind(uint32_t{b[12]} << 24 | uint32_t{b[13]} << 16 | uint32_t{b[14]} << 8 | b[15]);
  }
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return "link-local";
  if ((b[0] & 0xfe) == 0xfc) return "private";  // unique local fc00::/7
  if (b[0] == 0xff) return "multicast";
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return "private";  // site-local (deprecated)
  static const uint8_t kNat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
  if (std::memcmp(b, kNat64, 12) == 0) {
    return V4Kind(uint32_t{b[12]} << 24 | uint32_t{b[13]} << 16 | uint32_t{b[14]} << 8 | b[15]);
  }
  return "";
}

bool FetchPicture(const std::string& url, const ImageInputOptions& options, std::string* bytes,
                  ImageError* error) {
  auto parsed = ParseHttpUrl(url);
  if (!parsed.ok()) {
    *error = {400, parsed.status().message()};
    return false;
  }
  const HttpUrl& u = *parsed;
  const auto& hosts = options.url_hosts;
  if (std::find(hosts.begin(), hosts.end(), u.host) == hosts.end()) {
    *error = {400, "picture URL " + ShownPictureUrl(url) + ": the server does not fetch from '" + u.host +
                       "' (only hosts listed in MATRICXON_IMAGE_URL_HOSTS; send the picture as a data: URL)"};
    return false;
  }
  const auto started = std::chrono::steady_clock::now();
  const uint64_t timeout_ms = static_cast<uint64_t>(options.fetch_timeout_s) * 1000;
  // Resolve once and choose an address the rules allow; the fetch connects
  // to that one.
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(u.host.c_str(), nullptr, &hints, &found); rc != 0) {
    *error = {400, "picture URL " + ShownPictureUrl(url) + ": '" + u.host + "' does not resolve (" + gai_strerror(rc) + ")"};
    return false;
  }
  std::string chosen, refused, refused_kind;
  for (addrinfo* a = found; a != nullptr && chosen.empty(); a = a->ai_next) {
    const std::string ip = AddressText(a->ai_addr);
    if (ip.empty()) continue;
    const std::string kind = NonPublicAddressKind(ip);
    if (kind.empty() || std::find(hosts.begin(), hosts.end(), AsciiLower(ip)) != hosts.end()) {
      chosen = ip;
    } else if (refused.empty()) {
      refused = ip;
      refused_kind = kind;
    }
  }
  freeaddrinfo(found);
  if (chosen.empty()) {
    *error = {400, "picture URL " + ShownPictureUrl(url) + ": '" + u.host + "' is " +
                       (refused.empty() ? std::string("not an address the server can reach")
                                        : refused + ", a " + refused_kind + " address") +
                       "; the server fetches from loopback, link-local and private addresses only when "
                       "MATRICXON_IMAGE_URL_HOSTS names the address itself"};
    return false;
  }
  const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  const uint64_t left_ms = timeout_ms > static_cast<uint64_t>(spent.count()) ? timeout_ms - spent.count() : 1;
  Deadline deadline(left_ms);
  httplib::Client client(u.scheme + "://" + u.host + ":" + std::to_string(u.port));
  client.set_hostname_addr_map({{u.host, chosen}});
  client.set_follow_location(false);
  const auto secs = static_cast<time_t>(left_ms / 1000);
  const auto usecs = static_cast<time_t>(left_ms % 1000 * 1000);
  client.set_connection_timeout(secs, usecs);
  client.set_read_timeout(secs, usecs);
  client.set_write_timeout(secs, usecs);
  client.set_socket_options([&deadline](socket_t fd) { deadline.Adopt(fd); });
  bytes->clear();
  bool too_big = false;
  auto res = client.Get(u.path, [&](const char* data, size_t n) {
    if (bytes->size() + n > options.max_bytes) {
      too_big = true;
      return false;
    }
    bytes->append(data, n);
    return true;
  });
  if (too_big) {
    *error = {413, "picture URL " + ShownPictureUrl(url) + ": more than the limit of " +
                       std::to_string(options.max_bytes >> 20) + " MiB (MATRICXON_IMAGE_MAX_MB)"};
    return false;
  }
  if (deadline.expired()) {
    *error = {400, "picture URL " + ShownPictureUrl(url) + ": not fetched within " + std::to_string(options.fetch_timeout_s) +
                       " s (MATRICXON_IMAGE_FETCH_TIMEOUT_S)"};
    return false;
  }
  if (!res) {
    *error = {400, "picture URL " + ShownPictureUrl(url) + ": fetch failed (" + httplib::to_string(res.error()) + ")"};
    return false;
  }
  if (res->status != 200) {
    *error = {400, "picture URL " + ShownPictureUrl(url) + ": the server answered HTTP " + std::to_string(res->status) +
                       (res->status / 100 == 3 ? " (redirects are not followed)" : "")};
    return false;
  }
  return true;
}

}  // namespace mx::server
