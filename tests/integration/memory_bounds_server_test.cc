// Memory a small request can make the server claim (docs/http_api.md,
// "Memory per request"): each case sends what once made the server grow by
// gigabytes and checks the process's peak RSS (VmHWM, reset before the
// request) against the prompt cache's budget plus the allowance the docs
// state, or that the request is refused naming the limit.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <fstream>
#include <random>
#include <thread>

#include "http_helpers.h"
#include "server_process.h"

namespace mx::testing {
namespace {

class MemoryBoundsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);
    dir_ = TempDir(std::string("mem_") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(MakeModel(dir_ + "/models/tiny.gguf"));
  }
  void TearDown() override {
    if (HasFailure() && server_ != nullptr) std::cerr << "server log (tail):\n" << Tail(Log(), 4000);
    server_.reset();
    fs::remove_all(dir_);
  }
  void Start(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    server_ = std::make_unique<ServerProcess>();
    args.insert(args.end(), {"--threads", "1", "--persist-prompt-cache", "false"});
    env.emplace("MATRICXON_MODELS_DIR", dir_ + "/models");
    std::string error;
    ASSERT_TRUE(server_->Start(args, env, dir_ + "/server.log", &error)) << error;
  }
  static std::string Tail(const std::string& s, size_t n) { return s.size() > n ? s.substr(s.size() - n) : s; }
  int port() const { return server_->port(); }
  pid_t pid() const { return server_->pid(); }
  std::string Log() const { return server_->Log(); }
  // Peak RSS growth over the baseline of a warmed-up server while `fn` runs.
  int64_t PeakGrowthMb(const std::function<void()>& fn) {
    const int64_t base = StatusMb(pid(), "VmRSS");
    ResetPeakRss(pid());
    fn();
    return StatusMb(pid(), "VmHWM") - base;
  }

  std::string dir_;
  std::unique_ptr<ServerProcess> server_;
};

// 7.8 MB of text the vocabulary spells byte by byte is 7.8 million tokens:
// with their pieces, the reply is written token by token and streamed, so
// the server never holds millions of JSON objects (3.6 GB once).
TEST_F(MemoryBoundsTest, TokenizeWithPiecesOfAFewMegabytes) {
  Start({});
  ASSERT_EQ(Post(port(), "/tokenize", R"({"content":"warm up"})").status, 200);
  std::mt19937 rng(1);
  std::string text;
  for (int i = 0; i < 2600000; ++i) {  // CJK characters: 3 bytes, 3 tokens each here
    const uint32_t cp = 0x4e00 + rng() % 0x5000;
    text += static_cast<char>(0xe0 | (cp >> 12));
    text += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    text += static_cast<char>(0x80 | (cp & 0x3f));
  }
  const std::string body = Json{{"content", text}, {"with_pieces", true}}.dump();
  Reply r;
  const int64_t growth = PeakGrowthMb([&] { r = Post(port(), "/tokenize", body); });
  ASSERT_EQ(r.status, 200) << r.raw.substr(0, 300);
  ASSERT_TRUE(r.body["tokens"].is_array());
  EXPECT_EQ(r.body["tokens"].size(), 7800000u);
  EXPECT_TRUE(r.body["tokens"][5].contains("piece") && r.body["tokens"][5]["id"].is_number());
  // docs/http_api.md: a /tokenize request holds at most about 40 times its
  // body while it runs.
  EXPECT_LE(growth, static_cast<int64_t>(40 * body.size()) >> 20) << growth << " MiB";
  std::cerr << "peak RSS growth " << growth << " MiB for a " << (body.size() >> 20) << " MiB body\n";
}

// n = 16 choices of a long prompt would hold 16 states: refused (400 naming
// the budget) when they cannot fit in the prompt cache's budget; choices that
// fit run, and the process stays within the budget plus the allowance.
TEST_F(MemoryBoundsTest, ChoicesAreChargedToThePoolsBudget) {
  const std::string wide = dir_ + "/models/wide.gguf";
  const std::string cmd = BinaryPath() + " make-model --out " + wide +
                          " --layers 8 --dim 512 --heads 8 --kv-heads 8 --ffn 512 --context 8192 --quiet";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  Start({"--ctx-size", "8192", "--prompt-cache-budget-mb", "64"});
  std::string words;
  for (int i = 0; i < 300; ++i) words += "w" + std::to_string(i % 97) + " ";
  auto ask = [&](int n, int max_tokens) {
    Json body = {{"model", "wide"},      {"messages", {{{"role", "user"}, {"content", words}}}},
                 {"n", n},               {"max_tokens", max_tokens},
                 {"temperature", 0.7},   {"seed", 3}};
    return Post(port(), "/v1/chat/completions", body.dump());
  };
  ASSERT_EQ(ask(1, 2).status, 200);  // loaded, threads started
  Reply too_many;
  const int64_t refused_growth = PeakGrowthMb([&] { too_many = ask(16, 64); });
  EXPECT_EQ(too_many.status, 400) << too_many.raw;
  EXPECT_NE(too_many.raw.find("more than the prompt cache's budget of 64 MiB"), std::string::npos) << too_many.raw;
  EXPECT_LE(refused_growth, 16) << "a refused request claimed " << refused_growth << " MiB";
  // 16 KiB a token: two states of about 940 tokens (30 MiB) fit in 64 MiB.
  Reply two;
  const int64_t growth = PeakGrowthMb([&] { two = ask(2, 64); });
  ASSERT_EQ(two.status, 200) << two.raw;
  EXPECT_EQ(two.body["choices"].size(), 2u);
  EXPECT_LE(growth, 64 + 32) << growth << " MiB";
}

// A whole reply (not streamed) keeps every logprob until it is sent: asking
// for 16 choices of the whole context with 20 alternatives each is refused
// naming the limit instead of claiming hundreds of MiB (804 once).
TEST_F(MemoryBoundsTest, WholeRepliesBoundTheirLogprobs) {
  Start({"--ctx-size", "8192"});
  Json body = {{"model", "tiny"},     {"messages", {{{"role", "user"}, {"content", "hi"}}}},
               {"n", 16},             {"logprobs", true},
               {"top_logprobs", 20},  {"ignore_eos", true}};
  Reply r;
  const int64_t growth = PeakGrowthMb([&] { r = Post(port(), "/v1/chat/completions", body.dump()); });
  EXPECT_EQ(r.status, 400) << r.raw.substr(0, 300);
  EXPECT_NE(r.raw.find("holds at most 524288 logprobs"), std::string::npos) << r.raw.substr(0, 300);
  EXPECT_LE(growth, 16) << growth << " MiB";
  body["max_tokens"] = 64;  // 16 x 64 x 21 entries: fine
  Reply small = Post(port(), "/v1/chat/completions", body.dump());
  ASSERT_EQ(small.status, 200) << small.raw.substr(0, 300);
  EXPECT_EQ(small.body["choices"][15]["logprobs"]["content"].size(), 64u);
}

// A client that stops reading a stream (n = 16 with logprobs: the fastest
// way to pile up events) pauses its generation: the server's memory stays
// flat, and at the write deadline the connection is closed and the request
// cancelled, while another chat is served all along.
TEST_F(MemoryBoundsTest, AStalledStreamPausesAndIsCutAtTheWriteDeadline) {
  Start({"--ctx-size", "8192"}, {{"MATRICXON_HTTP_WRITE_TIMEOUT_S", "3"}});
  ASSERT_EQ(Post(port(), "/tokenize", R"({"content":"warm up"})").status, 200);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string payload =
      Json{{"model", "tiny"},   {"messages", {{{"role", "user"}, {"content", "go on"}}}},
           {"n", 16},           {"logprobs", true},
           {"top_logprobs", 20}, {"max_tokens", 6000},
           {"ignore_eos", true}, {"stream", true}}
          .dump();
  const std::string request = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                              "application/json\r\nContent-Length: " +
                              std::to_string(payload.size()) + "\r\n\r\n" + payload;
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  const int64_t base = StatusMb(pid(), "VmRSS");
  ResetPeakRss(pid());
  // Never read. Meanwhile another chat is answered.
  const auto t0 = std::chrono::steady_clock::now();
  Turn other = Chat(port(), {{"user", "another chat"}}, 4);
  EXPECT_GT(other.prompt_tokens, 0);
  ASSERT_TRUE(WaitUntil([&] { return Log().find("took no byte of its reply for 3 s") != std::string::npos; }, 20000))
      << Log().substr(Log().size() > 3000 ? Log().size() - 3000 : 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 8.0);
  EXPECT_TRUE(WaitUntil([&] { return Log().find("request cancelled after") != std::string::npos; }, 5000));
  const int64_t growth = StatusMb(pid(), "VmHWM") - base;
  EXPECT_LE(growth, 24) << growth << " MiB";
  // What the client can still read ends: the server closed the connection.
  char buf[65536];
  ssize_t n = 0;
  size_t got = 0;
  while ((n = recv(fd, buf, sizeof(buf), 0)) > 0) got += static_cast<size_t>(n);
  close(fd);
  EXPECT_GT(got, 0u);
  EXPECT_LT(got, size_t{64} << 20) << "the server must not have generated the whole reply";
  EXPECT_EQ(Get(port(), "/health").status, 200);
}

}  // namespace
}  // namespace mx::testing
