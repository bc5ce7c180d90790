// The HTTP front against hostile and careless clients, over raw sockets to
// the real `matricxon serve` binary on loopback: slow and idle connection
// floods, oversized heads and bodies (RSS of the server checked), keep-alive
// latency, pipelining, methods, Origin and Host refusals, an exclusive bind,
// clients that leave in every phase of a request, and names that try to
// forge log lines or metric series.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "http_helpers.h"
#include "server_process.h"

namespace mx::testing {
namespace {

using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;
namespace fs = std::filesystem;

double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// A raw client socket with bounded waits.
class Raw {
 public:
  explicit Raw(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(fd_);
      fd_ = -1;
    }
    int one = 1;
    if (fd_ >= 0) setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~Raw() { Close(); }
  Raw(const Raw&) = delete;
  bool ok() const { return fd_ >= 0; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  bool Send(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads whatever arrives within `ms` (until the peer closes or stops).
  std::string ReadFor(int ms) {
    std::string out;
    const auto t0 = Clock::now();
    char buf[65536];
    while (MsSince(t0) < ms) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // Reads one response with a Content-Length body (or up to close).
  std::string ReadResponse(int timeout_ms = 5000) {
    const auto t0 = Clock::now();
    char buf[65536];
    while (MsSince(t0) < timeout_ms) {
      size_t end = pending_.find("\r\n\r\n");
      if (end != std::string::npos) {
        std::string head = pending_.substr(0, end);
        size_t cl = 0;
        std::string lower = head;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (size_t p = lower.find("content-length:"); p != std::string::npos) {
          cl = std::strtoull(lower.c_str() + p + 15, nullptr, 10);
        }
        if (pending_.size() >= end + 4 + cl) {
          std::string r = pending_.substr(0, end + 4 + cl);
          pending_.erase(0, end + 4 + cl);
          return r;
        }
      }
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      pending_.append(buf, static_cast<size_t>(n));
    }
    std::string r = pending_;
    pending_.clear();
    return r;
  }
  // True when the server closed the connection within `ms`.
  bool ClosedWithin(int ms) {
    const auto t0 = Clock::now();
    char buf[4096];
    while (MsSince(t0) < ms) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return true;
    }
    return false;
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  std::string pending_;
};

int StatusOf(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0) return 0;
  return std::atoi(response.c_str() + 9);
}

std::string HeaderOf(const std::string& response, const std::string& name) {
  std::string lower = response.substr(0, response.find("\r\n\r\n"));
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t p = lower.find("\r\n" + name + ":");
  if (p == std::string::npos) return "";
  p += 3 + name.size();
  size_t e = lower.find("\r\n", p);
  std::string v = response.substr(p, e - p);
  while (!v.empty() && v[0] == ' ') v.erase(0, 1);
  return v;
}

std::string BodyOf(const std::string& response) {
  size_t p = response.find("\r\n\r\n");
  return p == std::string::npos ? "" : response.substr(p + 4);
}

std::string Get(const std::string& path, const std::string& extra = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra + "\r\n";
}

std::string PostJson(const std::string& path, const std::string& body, const std::string& extra = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra + "\r\n" + body;
}

// One request on a fresh connection.
std::string Exchange(int port, const std::string& request, int timeout_ms = 5000) {
  Raw c(port);
  if (!c.ok() || !c.Send(request)) return "";
  return c.ReadResponse(timeout_ms);
}

int64_t RssKb(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return -1;
}

class HttpFrontTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    signal(SIGPIPE, SIG_IGN);
    dir_ = new std::string(TempDir("http_front"));
    ASSERT_TRUE(MakeModel(*dir_ + "/models/tiny.gguf"));
    server_ = new ServerProcess();
    std::string error;
    ASSERT_TRUE(server_->Start({"--threads", "1", "--parallel", "2", "--ctx-size", "512",
                                "--request-head-timeout-s", "2"},
                               {{"MATRICXON_MODELS_DIR", *dir_ + "/models"},
                                {"MATRICXON_ALLOWED_ORIGINS", "http://good.example"},
                                {"MATRICXON_ALLOWED_HOSTS", "my-box.lan"}},
                               *dir_ + "/server.log", &error))
        << error;
  }
  static void TearDownTestSuite() {
    delete server_;
    fs::remove_all(*dir_);
    delete dir_;
  }
  static int port() { return server_->port(); }
  // Asserts that /health answers within `ms` on a new connection.
  static void ExpectHealthy(int ms) {
    const auto t0 = Clock::now();
    std::string r = Exchange(port(), Get("/health"), ms);
    EXPECT_EQ(StatusOf(r), 200) << r;
    EXPECT_LT(MsSince(t0), ms);
  }

  static std::string* dir_;
  static ServerProcess* server_;
};
std::string* HttpFrontTest::dir_ = nullptr;
ServerProcess* HttpFrontTest::server_ = nullptr;

TEST_F(HttpFrontTest, SlowlorisConnectionsCostNoThreadAndMeetTheirDeadline) {
  std::vector<std::unique_ptr<Raw>> slow;
  for (int i = 0; i < 64; ++i) {
    slow.push_back(std::make_unique<Raw>(port()));
    ASSERT_TRUE(slow.back()->ok());
    ASSERT_TRUE(slow.back()->Send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
  }
  // One header line each every ~0.7 s; normal requests go on meanwhile.
  for (int round = 0; round < 3; ++round) {
    for (auto& c : slow) c->Send("X-Slow-" + std::to_string(round) + ": 1\r\n");
    for (int i = 0; i < 5; ++i) ExpectHealthy(500);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  // The head deadline (2 s here) is for the whole head, not per line: all of
  // them are answered 408 and closed though they kept sending.
  int timed_out = 0;
  for (auto& c : slow) {
    std::string r = c->ReadFor(1500);
    if (StatusOf(r) == 408) ++timed_out;
  }
  EXPECT_EQ(timed_out, 64);
}

TEST_F(HttpFrontTest, IdleConnectionsDoNotStopTheServer) {
  std::vector<std::unique_ptr<Raw>> idle;
  for (int i = 0; i < 300; ++i) {  // past the per-client limit (256): the oldest make room
    idle.push_back(std::make_unique<Raw>(port()));
    ASSERT_TRUE(idle.back()->ok()) << i;
  }
  for (int i = 0; i < 10; ++i) ExpectHealthy(500);
  // A keep-alive client in the middle of its work is never the one evicted.
  Raw busy(port());
  ASSERT_TRUE(busy.Send(Get("/health")));
  EXPECT_EQ(StatusOf(busy.ReadResponse()), 200);
  EXPECT_TRUE(idle.front()->ClosedWithin(1000));  // evicted to make room
}

TEST_F(HttpFrontTest, ChunkedBodyFloodIsRefusedEarly) {
  const int64_t before = RssKb(server_->pid());
  Raw c(port());
  ASSERT_TRUE(c.Send("POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"));
  std::string chunk(64 << 10, 'a');
  char size[16];
  std::snprintf(size, sizeof(size), "%zx\r\n", chunk.size());
  const std::string framed = size + chunk + "\r\n";
  size_t sent = 0;
  std::atomic<bool> stop{false};
  std::string response;
  std::thread reader([&] { response = c.ReadResponse(20000); stop = true; });
  while (sent < (64u << 20) && !stop) {
    if (!c.Send(framed)) break;
    sent += chunk.size();
  }
  reader.join();
  EXPECT_EQ(StatusOf(response), 413) << response.substr(0, 300);
  EXPECT_LT(sent, 64u << 20) << "the server read the whole 64 MiB";
  const int64_t after = RssKb(server_->pid());
  EXPECT_LT(after - before, 32 << 10) << before << " kB -> " << after << " kB";
  ExpectHealthy(500);
}

// Framing a proxy in front might read differently is refused: a chunk line
// ended by a bare LF, an unclosed quoted chunk extension, two Authorization
// fields (the server would use one, a proxy perhaps the other).
TEST_F(HttpFrontTest, AmbiguousFramingAndDuplicateCredentialsAre400) {
  const std::string chunked = "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string body = "{\"content\":\"a\"}";
  char size[16];
  std::snprintf(size, sizeof(size), "%zx", body.size());
  for (const std::string& bad : {chunked + size + "\n" + body + "\r\n0\r\n\r\n",
                                 chunked + size + ";a=\"open\r\n" + body + "\r\n0\r\n\r\n",
                                 chunked + size + "\r\n" + body + "\n0\r\n\r\n",
                                 PostJson("/tokenize", body, "Authorization: Bearer a\r\nAuthorization: Bearer b\r\n")}) {
    const std::string r = Exchange(port(), bad);
    EXPECT_EQ(StatusOf(r), 400) << bad << "\n" << r;
  }
  const std::string good = chunked + size + ";a=\"quoted;ok\"\r\n" + body + "\r\n0\r\n\r\n";
  EXPECT_EQ(StatusOf(Exchange(port(), good)), 200);
  ExpectHealthy(500);
}

TEST_F(HttpFrontTest, HeaderFloodIsRefusedEarly) {
  const int64_t before = RssKb(server_->pid());
  Raw c(port());
  ASSERT_TRUE(c.Send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"));
  std::string lines;
  for (int i = 0; i < 1000; ++i) lines += "X-Flood-" + std::to_string(i) + ": " + std::string(40, 'v') + "\r\n";
  size_t sent = 0;
  std::atomic<bool> stop{false};
  std::string response;
  std::thread reader([&] { response = c.ReadResponse(20000); stop = true; });
  while (sent < (64u << 20) && !stop) {
    if (!c.Send(lines)) break;
    sent += lines.size();
  }
  reader.join();
  EXPECT_EQ(StatusOf(response), 431) << response.substr(0, 300);
  EXPECT_LT(sent, 64u << 20);
  EXPECT_LT(RssKb(server_->pid()) - before, 32 << 10);
  // A too-long request line is refused as such.
  EXPECT_EQ(StatusOf(Exchange(port(), "GET /" + std::string(10000, 'a') + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")), 414);
}

TEST_F(HttpFrontTest, DeclaredBodyOverTheLimitIs413BeforeItIsSent) {
  Raw c(port());
  ASSERT_TRUE(c.Send("POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1073741824\r\n"
                     "Expect: 100-continue\r\n\r\n"));
  EXPECT_EQ(StatusOf(c.ReadResponse(2000)), 413);
  // Under the limit, with any content type (curl -d sends a form type), the
  // body is read: here it is JSON and the request succeeds.
  std::string text(100 << 10, 'x');
  std::string body = Json{{"content", text}}.dump();
  std::string r = Exchange(port(), "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                   "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: " +
                                       std::to_string(body.size()) + "\r\n\r\n" + body);
  EXPECT_EQ(StatusOf(r), 200) << r.substr(0, 300);
}

TEST_F(HttpFrontTest, ManyLargeUploadsAtOnceAreBoundedTogether) {
  // 1 MiB per body: 32 MiB for all bodies being received at once.
  std::string dir = TempDir("uploads");
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start({"--max-body-mb", "1"}, {{"MATRICXON_MODELS_DIR", dir + "/models"}},
                           dir + "/server.log", &error))
      << error;
  std::vector<std::unique_ptr<Raw>> uploads;
  const std::string part(1000000, 'a');
  for (int i = 0; i < 40; ++i) {
    uploads.push_back(std::make_unique<Raw>(server.port()));
    ASSERT_TRUE(uploads.back()->Send("POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1048576\r\n\r\n"));
    uploads.back()->Send(part);  // may fail once refused
  }
  int busy = 0;
  for (auto& u : uploads) {
    std::string r = u->ReadFor(25);
    if (StatusOf(r) == 503) ++busy;
    EXPECT_TRUE(r.empty() || StatusOf(r) == 503) << r.substr(0, 200);
  }
  EXPECT_GE(busy, 6);  // 40 x 1e6 bytes against 32 MiB: the last ones at least
  EXPECT_LE(busy, 8);
  std::string r = Exchange(server.port(), Get("/health"));
  EXPECT_EQ(StatusOf(r), 200);
  fs::remove_all(dir);
}

TEST_F(HttpFrontTest, KeepAliveRequestsTakeUnderFiveMilliseconds) {
  Raw c(port());
  std::vector<double> ms;
  const std::string tok = PostJson("/tokenize", R"({"content":"hello"})");
  for (int i = 0; i < 40; ++i) {
    const auto t0 = Clock::now();
    ASSERT_TRUE(c.Send(i % 2 ? tok : Get("/health")));
    ASSERT_EQ(StatusOf(c.ReadResponse()), 200);
    ms.push_back(MsSince(t0));
  }
  std::sort(ms.begin(), ms.end());
  EXPECT_LT(ms[ms.size() / 2], 5.0) << "median keep-alive request";
}

TEST_F(HttpFrontTest, PipelinedRequestsAreAnsweredInOrder) {
  Raw c(port());
  ASSERT_TRUE(c.Send(Get("/health") + PostJson("/tokenize", R"({"content":"a b"})") + Get("/v1/models") +
                     Get("/no/such/route")));
  std::string a = c.ReadResponse(), b = c.ReadResponse(), m = c.ReadResponse(), n = c.ReadResponse();
  EXPECT_EQ(StatusOf(a), 200);
  EXPECT_NE(BodyOf(a).find("\"ok\""), std::string::npos) << a;
  EXPECT_EQ(StatusOf(b), 200);
  EXPECT_NE(BodyOf(b).find("tokens"), std::string::npos) << b;
  EXPECT_EQ(StatusOf(m), 200);
  EXPECT_NE(BodyOf(m).find("\"list\""), std::string::npos) << m;
  EXPECT_EQ(StatusOf(n), 404);
}

TEST_F(HttpFrontTest, BodylessPostIsAnEmptyBody) {
  const auto t0 = Clock::now();
  std::string r = Exchange(port(), "POST /api/models/tiny/load HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(StatusOf(r), 200) << r;
  EXPECT_LT(MsSince(t0), 2000);
  r = Exchange(port(), "POST /tokenize HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(StatusOf(r), 400) << r;
  EXPECT_NE(BodyOf(r).find("JSON"), std::string::npos) << r;
}

// A HEAD response: its head only (Content-Length tells the size of a body not sent).
std::string ExchangeHead(int port, const std::string& request) {
  Raw c(port);
  if (!c.ok() || !c.Send(request)) return "";
  std::string r;
  const auto t0 = Clock::now();
  while (r.find("\r\n\r\n") == std::string::npos && MsSince(t0) < 5000) {
    std::string more = c.ReadFor(20);
    r += more;
  }
  return r;
}

TEST_F(HttpFrontTest, MethodsHeadAndOptions) {
  std::string head = ExchangeHead(port(), "HEAD /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(StatusOf(head), 200) << head;
  EXPECT_EQ(BodyOf(head), "");
  EXPECT_NE(HeaderOf(head, "content-length"), "0");
  std::string r = ExchangeHead(port(), "HEAD /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(StatusOf(r), 405);
  EXPECT_EQ(HeaderOf(r, "allow"), "POST");
  r = Exchange(port(), "OPTIONS /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(StatusOf(r), 405);
  EXPECT_EQ(HeaderOf(r, "allow"), "GET, HEAD");
  r = Exchange(port(), "DELETE /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(StatusOf(r), 405);
  EXPECT_EQ(HeaderOf(r, "allow"), "GET, HEAD");
  r = Exchange(port(), "PATCH /api/cache/persistence HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(HeaderOf(r, "allow"), "GET, HEAD, PUT, DELETE");
}

TEST_F(HttpFrontTest, ForeignOriginsAreRefused) {
  const std::string evil = "Origin: http://evil.example\r\n";
  std::string r = Exchange(port(), "DELETE /api/cache/persistence HTTP/1.1\r\nHost: 127.0.0.1\r\n" + evil + "\r\n");
  EXPECT_EQ(StatusOf(r), 403) << r;
  EXPECT_NE(BodyOf(r).find("MATRICXON_ALLOWED_ORIGINS"), std::string::npos);
  // A "simple" cross-site form post is refused before anything is parsed.
  r = Exchange(port(), "POST /api/models/tiny/unload HTTP/1.1\r\nHost: 127.0.0.1\r\n" + evil +
                           "Content-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}");
  EXPECT_EQ(StatusOf(r), 403);
  EXPECT_EQ(StatusOf(Exchange(port(), Get("/health", "Origin: null\r\n"))), 403);
  // Preflights: answered for the allowed origin only.
  r = Exchange(port(), "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: http://good.example\r\n"
                       "Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type\r\n\r\n");
  EXPECT_EQ(StatusOf(r), 204) << r;
  EXPECT_EQ(HeaderOf(r, "access-control-allow-origin"), "http://good.example");
  EXPECT_EQ(HeaderOf(r, "access-control-allow-methods"), "POST");
  r = Exchange(port(), "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + evil +
                           "Access-Control-Request-Method: POST\r\n\r\n");
  EXPECT_EQ(StatusOf(r), 403);
  r = Exchange(port(), Get("/health", "Origin: http://good.example\r\n"));
  EXPECT_EQ(StatusOf(r), 200);
  EXPECT_EQ(HeaderOf(r, "access-control-allow-origin"), "http://good.example");
}

TEST_F(HttpFrontTest, ForeignHostsAreRefusedOnLoopback) {
  auto with_host = [&](const std::string& host) {
    return Exchange(port(), "GET /api/cache/persistence HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
  };
  std::string r = Exchange(port(), "DELETE /api/cache/persistence HTTP/1.1\r\nHost: attacker.example\r\n\r\n");
  EXPECT_EQ(StatusOf(r), 403) << r;
  EXPECT_EQ(StatusOf(with_host("attacker.example:" + std::to_string(port()))), 403);
  EXPECT_EQ(StatusOf(with_host("127.0.0.1.attacker.example")), 403);
  EXPECT_EQ(StatusOf(with_host("localhost:" + std::to_string(port()))), 200);
  EXPECT_EQ(StatusOf(with_host("[::1]:" + std::to_string(port()))), 200);
  EXPECT_EQ(StatusOf(with_host("127.0.0.1")), 200);
  EXPECT_EQ(StatusOf(with_host("My-Box.lan:8080")), 200);  // MATRICXON_ALLOWED_HOSTS
}

TEST_F(HttpFrontTest, APortInUseIsAStartupErrorNamingIt) {
  ServerProcess second;
  std::string error;
  // (Its own saved-cache folder: the first server holds its own.)
  EXPECT_FALSE(second.Start({"--port", std::to_string(port())},
                            {{"MATRICXON_MODELS_DIR", *dir_ + "/models"},
                             {"MATRICXON_PROMPT_CACHE_DIR", *dir_ + "/second_cache"}},
                            *dir_ + "/second.log", &error));
  EXPECT_NE(error.find("127.0.0.1:" + std::to_string(port())), std::string::npos) << error;
  EXPECT_NE(error.find("in use"), std::string::npos) << error;
  ExpectHealthy(500);
}

TEST_F(HttpFrontTest, OpenAdminRoutesOffLoopbackRefuseToStart) {
  ServerProcess open;
  std::string error;
  // Refused before anything is bound: nothing listens on the network.
  EXPECT_FALSE(open.Start({"--host", "0.0.0.0"},
                          {{"MATRICXON_MODELS_DIR", *dir_ + "/models"},
                           {"MATRICXON_PROMPT_CACHE_DIR", *dir_ + "/open_cache"}},
                          *dir_ + "/open.log", &error));
  EXPECT_NE(error.find("MATRICXON_ADMIN_TOKEN"), std::string::npos) << error;
  EXPECT_NE(error.find("MATRICXON_ALLOW_OPEN_ADMIN"), std::string::npos) << error;
}

TEST_F(HttpFrontTest, NamesCannotForgeLogLinesOrMetricSeries) {
  // A model file whose name closes its label and starts a series of its own.
  const std::string evil = "evil\"} 1\nmatricxon_forged_total 7\n#";
  fs::copy_file(*dir_ + "/models/tiny.gguf", *dir_ + "/models/" + evil + ".gguf");
  std::string encoded;
  for (unsigned char ch : evil) {
    char b[4];
    std::snprintf(b, sizeof(b), "%%%02X", ch);
    encoded += b;
  }
  std::string r = Exchange(port(), "POST /api/models/" + encoded + "/load HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(StatusOf(r), 200) << r;
  std::string metrics = BodyOf(Exchange(port(), Get("/metrics")));
  EXPECT_NE(metrics.find("matricxon_prompt_cache_entries{model=\"evil\\\"} 1\\nmatricxon_forged_total 7\\n#\"}"),
            std::string::npos)
      << metrics;
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);) EXPECT_NE(line.rfind("matricxon_forged", 0), 0u) << line;
  Exchange(port(), "POST /api/models/" + encoded + "/unload HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
  fs::remove(*dir_ + "/models/" + evil + ".gguf");
  // CR/LF/NUL from the URL never reach the log raw.
  auto count_404 = [&] {
    size_t n = 0;
    const std::string log = server_->Log();
    for (size_t at = log.find("-> 404"); at != std::string::npos; at = log.find("-> 404", at + 1)) ++n;
    return n;
  };
  const size_t logged_404 = count_404();
  r = Exchange(port(), "POST /api/models/x%0D%0A2026-01-01T00:00:00.000Z%20INFO%20forged%00/load HTTP/1.1\r\n"
                       "Host: 127.0.0.1\r\n\r\n");
  EXPECT_EQ(StatusOf(r), 404) << r;
  // Errors name the model, not the absolute folder it was looked for in.
  EXPECT_EQ(BodyOf(r).find(*dir_), std::string::npos) << r;
  // The request's log line is written after its reply: wait for it.
  for (int i = 0; i < 200 && count_404() == logged_404; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_GT(count_404(), logged_404) << server_->Log();
  const std::string log = server_->Log();
  std::istringstream log_lines(log);
  for (std::string line; std::getline(log_lines, line);) {
    EXPECT_EQ(line.find("Z INFO forged"), std::string::npos) << line;
    EXPECT_EQ(line.find('\r'), std::string::npos) << line;
  }
  std::string models = BodyOf(Exchange(port(), Get("/api/models")));
  EXPECT_EQ(models.find(*dir_), std::string::npos) << models;
}

// Clients that leave: a model slow enough (~4 ms a token, ~1 ms a prompt
// token on one thread) that every phase lasts seconds, and one slot.
class DisconnectTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    signal(SIGPIPE, SIG_IGN);
    dir_ = new std::string(TempDir("disconnect_phases"));
    const std::string cmd = BinaryPath() + " make-model --out " + *dir_ +
                            "/models/slow.gguf --layers 8 --dim 512 --ffn 1536 --heads 8 --kv-heads 8 "
                            "--type q8_0 --context 8192 --quiet";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    server_ = new ServerProcess();
    std::string error;
    ASSERT_TRUE(server_->Start({"--threads", "1", "--parallel", "1", "--ctx-size", "4096"},
                               {{"MATRICXON_MODELS_DIR", *dir_ + "/models"}}, *dir_ + "/server.log", &error))
        << error;
    ASSERT_EQ(StatusOf(Exchange(server_->port(), "POST /api/models/slow/load HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                                30000)),
              200);
  }
  static void TearDownTestSuite() {
    delete server_;
    fs::remove_all(*dir_);
    delete dir_;
  }
  static int port() { return server_->port(); }
  static int Active() {
    Json j = Json::parse(BodyOf(Exchange(port(), Get("/api/models"))), nullptr, false);
    if (!j.is_object()) return -1;
    return j["models"][0]["active_requests"].get<int>();
  }
  // Waits until the request just sent holds the slot (gives up after 10 s).
  static void WaitUntilActive() {
    const auto t0 = Clock::now();
    while (Active() != 1 && MsSince(t0) < 10000) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(Active(), 1) << server_->Log();
  }
  // Waits (up to 10 s, a bound for a broken build, not a timing claim) until
  // `done` holds; returns whether it did.
  static bool WaitFor(const std::function<bool()>& done) {
    const auto t0 = Clock::now();
    while (!done() && MsSince(t0) < 10000) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return done();
  }
  static size_t Cancelled() { return Count(server_->Log(), "request cancelled after"); }
  // The request just dropped by its client was cancelled (not run to its
  // end: the replies here are far longer than the wait) and its slot is free.
  static void ExpectCancelledAndIdle(size_t cancelled_before) {
    EXPECT_TRUE(WaitFor([&] { return Cancelled() > cancelled_before; })) << server_->Log();
    EXPECT_EQ(Cancelled(), cancelled_before + 1) << server_->Log();
    EXPECT_TRUE(WaitFor([] { return Active() == 0; })) << server_->Log();
  }
  static size_t Count(const std::string& haystack, const std::string& needle) {
    size_t n = 0;
    for (size_t at = haystack.find(needle); at != std::string::npos; at = haystack.find(needle, at + 1)) ++n;
    return n;
  }
  static std::string Chat(int max_tokens, bool stream, const std::string& text = "talk") {
    return PostJson("/v1/chat/completions",
                    Json{{"messages", {{{"role", "user"}, {"content", text}}}},
                         {"max_tokens", max_tokens},
                         {"ignore_eos", true},
                         {"stream", stream}}
                        .dump());
  }
  static std::string* dir_;
  static ServerProcess* server_;
};
std::string* DisconnectTest::dir_ = nullptr;
ServerProcess* DisconnectTest::server_ = nullptr;

TEST_F(DisconnectTest, WhileGeneratingAWholeReply) {
  const size_t before = Cancelled();
  Raw c(port());
  ASSERT_TRUE(c.Send(Chat(1500, false)));
  WaitUntilActive();
  c.Close();
  ExpectCancelledAndIdle(before);
  EXPECT_EQ(StatusOf(Exchange(port(), Chat(2, false))), 200);
  EXPECT_EQ(Active(), 0);  // exact right after a reply too
}

TEST_F(DisconnectTest, WhileStreaming) {
  const size_t before = Cancelled();
  Raw c(port());
  ASSERT_TRUE(c.Send(Chat(1500, true)));
  std::string first = c.ReadFor(400);
  EXPECT_EQ(StatusOf(first), 200) << first;
  c.Close();
  ExpectCancelledAndIdle(before);
}

TEST_F(DisconnectTest, WhileReadingThePrompt) {
  std::string text;
  for (int i = 0; i < 1150; ++i) text += "word ";  // ~3500 tokens: ~3.5 s to read
  const size_t before = Count(server_->Log(), "request cancelled after 0 generated tokens");
  Raw c(port());
  ASSERT_TRUE(c.Send(Chat(4, false, text)));
  WaitUntilActive();  // reading its prompt now: that takes seconds
  c.Close();
  EXPECT_TRUE(WaitFor([] { return Active() == 0; })) << server_->Log();
  EXPECT_EQ(Count(server_->Log(), "request cancelled after 0 generated tokens"), before + 1) << server_->Log();
}

TEST_F(DisconnectTest, WhileQueued) {
  Raw a(port());
  ASSERT_TRUE(a.Send(Chat(1500, true)));
  ASSERT_EQ(StatusOf(a.ReadFor(300)), 200);
  Raw b(port());
  ASSERT_TRUE(b.Send(Chat(1500, false, "queued")));
  // B waits for the slot A holds (A's client does not read, so A stays).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const size_t gone_before = Count(server_->Log(), "client gone");
  b.Close();
  // B's request ends (its handler returns) while A still holds the slot.
  EXPECT_TRUE(WaitFor([&] { return Count(server_->Log(), "client gone") > gone_before; }))
      << server_->Log();
  EXPECT_EQ(Active(), 1);
  const size_t cancelled_before = Cancelled();
  a.Close();
  ExpectCancelledAndIdle(cancelled_before);
}

}  // namespace
}  // namespace mx::testing
