// Small HTTP and file helpers shared by the integration tests.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "server_process.h"

namespace mx::testing {

using Json = nlohmann::json;
namespace fs = std::filesystem;

// A whole file's bytes ("" when it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// ../shared/ref/<file> parsed (discarded when missing or malformed).
inline Json LoadRefJson(const std::string& file) {
  return Json::parse(ReadFile(std::string(MATRICXON_REF_DIR) + "/" + file), nullptr, false);
}

// Bytes from the reference's "pieces_hex" strings.
inline std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// Polls `done` every 10 ms until it holds or `timeout_ms` passed; returns
// whether it holds. The bound is for a broken build, not a timing claim:
// callers assert on the condition itself.
inline bool WaitUntil(const std::function<bool()>& done, int timeout_ms = 30000) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

inline std::string TempDir(const std::string& name) {
  fs::path p = fs::path(::testing::TempDir()) / ("mx_it_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(p);
  fs::create_directories(p / "models");
  return p.string();
}

inline bool MakeModel(const std::string& path) {
  std::string cmd = BinaryPath() + " make-model --out " + path + " --quiet";
  return std::system(cmd.c_str()) == 0;
}

struct Reply {
  int status = 0;
  Json body;
  std::string raw;
};

// What a client call returned (status 0 when there was no answer).
inline Reply ToReply(const httplib::Result& res) {
  Reply r;
  if (!res) return r;
  r.status = res->status;
  r.raw = res->body;
  r.body = Json::parse(res->body, nullptr, false);
  return r;
}

// A POST that waits at most `timeout_s` for its answer (a test of "does
// not hang" passes a short one).
inline Reply Post(int port, const std::string& path, const std::string& body,
                  const httplib::Headers& headers = {}, int timeout_s = 120) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(timeout_s, 0);
  cli.set_write_timeout(timeout_s, 0);
  return ToReply(cli.Post(path.c_str(), headers, body, "application/json"));
}

inline Reply Get(int port, const std::string& path) {
  httplib::Client cli("127.0.0.1", port);
  return ToReply(cli.Get(path.c_str()));
}

// Parses an SSE body into its JSON events; *done says whether [DONE] ended it.
inline std::vector<Json> ParseSse(const std::string& body, bool* done) {
  std::vector<Json> events;
  *done = false;
  std::istringstream in(body);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("data: ", 0) != 0) continue;
    std::string data = line.substr(6);
    if (data == "[DONE]") {
      *done = true;
      continue;
    }
    events.push_back(Json::parse(data, nullptr, false));
  }
  return events;
}

// A field of /proc/PID/status (VmRSS, VmHWM, ...) in MiB; -1 when unreadable.
inline int64_t StatusMb(pid_t pid, const std::string& field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1) >> 10;
  }
  return -1;
}

// Resets a process's peak RSS (VmHWM) to its current RSS.
inline void ResetPeakRss(pid_t pid) {
  std::ofstream f("/proc/" + std::to_string(pid) + "/clear_refs");
  f << "5";
}

// A chat message, a greedy chat completion against model "tiny", and what
// the reply says about the prompt cache.
struct Msg {
  std::string role, content;
};

struct Turn {
  std::string text;
  int64_t prompt_tokens = 0, cached = 0;
};

inline Json ChatRequestBody(const std::vector<Msg>& msgs, int max_tokens, bool cache = true) {
  Json m = Json::array();
  for (const auto& x : msgs) m.push_back({{"role", x.role}, {"content", x.content}});
  return {{"model", "tiny"}, {"messages", m}, {"max_tokens", max_tokens}, {"temperature", 0},
          {"cache_prompt", cache}};
}

inline Turn Chat(int port, const std::vector<Msg>& msgs, int max_tokens = 8, bool cache = true) {
  Reply r = Post(port, "/v1/chat/completions", ChatRequestBody(msgs, max_tokens, cache).dump());
  EXPECT_EQ(r.status, 200) << r.raw;
  if (r.status != 200) return {};
  return {r.body["choices"][0]["message"]["content"].get<std::string>(),
          r.body["usage"]["prompt_tokens"].get<int64_t>(),
          r.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>()};
}

// One greedy chat completion with each token's logprob: its status, reply,
// usage and choices[0].logprobs.content (thread-safe; no assertion, so a
// caller can compare a failed answer too).
struct Answer {
  int status = 0;
  std::string raw;
  std::string text;
  int64_t prompt_tokens = 0, cached = 0;
  Json tokens;  // choices[0].logprobs.content
};
inline Answer Ask(int port, const std::vector<Msg>& msgs, bool cache, int max_tokens = 8) {
  Json body = ChatRequestBody(msgs, max_tokens, cache);
  body["logprobs"] = true;
  Reply r = Post(port, "/v1/chat/completions", body.dump());
  Answer a;
  a.status = r.status;
  a.raw = r.raw;
  if (r.status != 200 || !r.body.is_object()) return a;
  a.text = r.body["choices"][0]["message"]["content"].get<std::string>();
  a.prompt_tokens = r.body["usage"]["prompt_tokens"].get<int64_t>();
  a.cached = r.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  a.tokens = r.body["choices"][0]["logprobs"]["content"];
  return a;
}

}  // namespace mx::testing
