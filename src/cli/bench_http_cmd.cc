// matricxon bench http: the HTTP layer of a running server, over raw
// sockets (no client library in the way):
//   1. GET /health on one keep-alive connection, one request at a time:
//      latency per request (what Nagle's algorithm without TCP_NODELAY costs);
//   2. GET /health on N keep-alive connections at once: requests/s;
//   3. S streaming chat completions at once (SSE, ignore_eos): generated
//      tokens/s summed over the streams and the slowest stream's time.
// Point it at a server started with enough slots for the streams
// (`--parallel S`) and a small model (`make-model`), so the figures measure
// the front, not the engine.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/percentile.h"

namespace mx::cli {
namespace {

using Clock = std::chrono::steady_clock;

const std::vector<FlagSpec> kFlags = {
    {"host", "127.0.0.1", "server address (IPv4)"},
    {"port", "8080", "server port"},
    {"model", "", "model name for the streams (empty: the server's only model)"},
    {"seconds", "3", "duration of each /health run"},
    {"connections", "8", "keep-alive connections of the /health throughput run"},
    {"streams", "64", "streaming clients at once"},
    {"tokens", "200", "max_tokens of each stream (ignore_eos: every stream generates them all)"},
};

int Connect(const std::string& host, int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, host.c_str(), &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads one response with a Content-Length body from a keep-alive
// connection; `buf` keeps bytes read past it. False on error or close.
bool ReadResponse(int fd, std::string* buf) {
  char tmp[16384];
  for (;;) {
    size_t end = buf->find("\r\n\r\n");
    if (end != std::string::npos) {
      size_t cl = 0;
      std::string head = buf->substr(0, end);
      for (auto& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      size_t p = head.find("content-length:");
      if (p != std::string::npos) cl = std::strtoull(head.c_str() + p + 15, nullptr, 10);
      if (buf->size() >= end + 4 + cl) {
        buf->erase(0, end + 4 + cl);
        return true;
      }
    }
    ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf->append(tmp, static_cast<size_t>(n));
  }
}

struct HealthResult {
  int64_t requests = 0;
  double seconds = 0;
  std::vector<double> latencies_ms;
};

HealthResult RunHealth(const std::string& host, int port, int connections, double seconds, bool keep_latencies) {
  const std::string req = "GET /health HTTP/1.1\r\nHost: " + host + "\r\n\r\n";
  std::atomic<int64_t> total{0};
  std::vector<std::vector<double>> lat(static_cast<size_t>(connections));
  const auto t0 = Clock::now();
  const auto stop = t0 + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int i = 0; i < connections; ++i) {
    threads.emplace_back([&, i] {
      int fd = Connect(host, port);
      if (fd < 0) return;
      std::string buf;
      while (Clock::now() < stop) {
        const auto a = Clock::now();
        if (!SendAll(fd, req) || !ReadResponse(fd, &buf)) break;
        if (keep_latencies) {
          lat[static_cast<size_t>(i)].push_back(std::chrono::duration<double, std::milli>(Clock::now() - a).count());
        }
        total.fetch_add(1);
      }
      close(fd);
    });
  }
  for (auto& t : threads) t.join();
  HealthResult r;
  r.requests = total.load();
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& v : lat) r.latencies_ms.insert(r.latencies_ms.end(), v.begin(), v.end());
  std::sort(r.latencies_ms.begin(), r.latencies_ms.end());
  return r;
}

// One streaming completion, read to the end (Connection: close). Returns the
// completion tokens the final usage chunk reports, or -1.
int64_t RunStream(const std::string& host, int port, const std::string& body) {
  int fd = Connect(host, port);
  if (fd < 0) return -1;
  const std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: " + host +
                          "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                          std::to_string(body.size()) + "\r\n\r\n" + body;
  if (!SendAll(fd, req)) {
    close(fd);
    return -1;
  }
  std::string all;
  char tmp[16384];
  for (;;) {
    ssize_t n = recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) break;
    all.append(tmp, static_cast<size_t>(n));
  }
  close(fd);
  const size_t u = all.rfind("\"completion_tokens\":");
  if (u == std::string::npos) return -1;
  return std::strtoll(all.c_str() + u + 20, nullptr, 10);
}

}  // namespace

int BenchHttpCommand(int argc, char** argv) {
  auto flags = Flags::Parse(kFlags, argc, argv, 3);
  if (!flags.ok()) {
    std::fprintf(stderr, "matricxon bench http: %s\n", flags.status().message().c_str());
    return 2;
  }
  if (flags->help()) {
    std::fputs(Flags::Usage("bench http", "Requests/s and SSE tokens/s of a running server's HTTP layer.", kFlags)
                   .c_str(),
               stdout);
    return 0;
  }
  const std::string host = flags->Get("host");
  auto port = flags->GetInt("port", 1, 65535);
  auto seconds = flags->GetDouble("seconds", 0.1, 3600);
  auto conns = flags->GetInt("connections", 1, 4096);
  auto streams = flags->GetInt("streams", 0, 4096);
  auto tokens = flags->GetInt("tokens", 1, 100000);
  for (const Status& st : {port.status(), seconds.status(), conns.status(), streams.status(), tokens.status()}) {
    if (!st.ok()) {
      std::fprintf(stderr, "matricxon bench http: %s\n", st.message().c_str());
      return 2;
    }
  }
  HealthResult one = RunHealth(host, static_cast<int>(*port), 1, *seconds, true);
  std::printf("health, 1 keep-alive connection:  %8.0f requests/s, latency p50 %.3f ms, p99 %.3f ms\n",
              static_cast<double>(one.requests) / one.seconds, Percentile(one.latencies_ms, 0.5),
              Percentile(one.latencies_ms, 0.99));
  HealthResult many = RunHealth(host, static_cast<int>(*port), static_cast<int>(*conns), *seconds, false);
  std::printf("health, %d keep-alive connections: %8.0f requests/s\n", static_cast<int>(*conns),
              static_cast<double>(many.requests) / many.seconds);
  if (*streams > 0) {
    nlohmann::json body = {{"messages", {{{"role", "user"}, {"content", "stream a long answer"}}}},
                           {"max_tokens", *tokens},
                           {"temperature", 0},
                           {"ignore_eos", true},
                           {"stream", true},
                           {"stream_options", {{"include_usage", true}}}};
    if (!flags->Get("model").empty()) body["model"] = flags->Get("model");
    const std::string text = body.dump();
    RunStream(host, static_cast<int>(*port), text);  // warm-up: loads the model
    std::vector<int64_t> got(static_cast<size_t>(*streams), -1);
    std::vector<std::thread> threads;
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < *streams; ++i) {
      threads.emplace_back([&, i] { got[static_cast<size_t>(i)] = RunStream(host, static_cast<int>(*port), text); });
    }
    for (auto& t : threads) t.join();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    int64_t total = 0, failed = 0;
    for (int64_t g : got) {
      if (g < 0) {
        ++failed;
      } else {
        total += g;
      }
    }
    std::printf("SSE, %d streams x %d tokens:       %8.0f tokens/s (all streams done in %.2f s, %d failed)\n",
                static_cast<int>(*streams), static_cast<int>(*tokens), static_cast<double>(total) / s, s,
                static_cast<int>(failed));
  }
  return 0;
}

}  // namespace mx::cli
