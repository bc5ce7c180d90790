// Saved caches under load, through the real server (docs/saved_caches.md,
// "When states are written"): chats that leave a busy pool come back from
// disk (or from the write queue), shutdown and unload write every chat even
// when the pool is larger than the write queue, one model's saves wait for
// another model's reply, and a state bigger than the memory left fails its
// own request while the server goes on.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iostream>
#include <thread>

#include "http_helpers.h"
#include "server_process.h"

namespace mx::testing {
namespace {

Json ChatBody(const std::string& model, const std::vector<Msg>& msgs, int max_tokens,
              bool cache = true) {
  Json body = ChatRequestBody(msgs, max_tokens, cache);
  body["model"] = model;
  body["ignore_eos"] = true;  // every reply has exactly max_tokens tokens
  return body;
}

Turn ChatOn(int port, const std::string& model, const std::vector<Msg>& msgs, int max_tokens = 8,
            bool cache = true) {
  Reply r = Post(port, "/v1/chat/completions", ChatBody(model, msgs, max_tokens, cache).dump());
  EXPECT_EQ(r.status, 200) << r.raw;
  if (r.status != 200) return {};
  return {r.body["choices"][0]["message"]["content"].get<std::string>(),
          r.body["usage"]["prompt_tokens"].get<int64_t>(),
          r.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>()};
}

size_t SavedFiles(const std::string& dir) {
  size_t n = 0;
  if (!fs::exists(dir)) return 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".mxpc";
  return n;
}

// VmSize of a process, in bytes (0 when unreadable).
uint64_t VmSizeBytes(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::strtoull(line.c_str() + 7, nullptr, 10) << 10;
  }
  return 0;
}

class SaveUnderLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);
    dir_ = TempDir(std::string("load_") +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    cache_dir_ = dir_ + "/prompt_cache";
    ASSERT_TRUE(MakeModel(dir_ + "/models/tiny.gguf"));
  }
  void TearDown() override {
    if (HasFailure() && server_ != nullptr) std::cerr << "server log:\n" << Log();
    server_.reset();
    fs::remove_all(dir_);
  }
  void Start(std::vector<std::string> args, std::map<std::string, std::string> env = {}) {
    server_ = std::make_unique<ServerProcess>();
    args.insert(args.end(), {"--threads", "1"});
    env.emplace("MATRICXON_MODELS_DIR", dir_ + "/models");
    env.emplace("MATRICXON_PROMPT_CACHE_DIR", cache_dir_);
    std::string error;
    ASSERT_TRUE(
        server_->Start(args, env, dir_ + "/server" + std::to_string(++starts_) + ".log", &error))
        << error;
  }
  void Stop() {
    const int status = server_->StopWith(SIGTERM);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  int port() const { return server_->port(); }
  std::string Log() const { return server_->Log(); }
  Json Persistence() { return Get(port(), "/api/cache/persistence").body; }
  // Each user's chat differs from the start of its system prompt (numbers
  // alone could make one user's prompt look like another's trimmed chat).
  static std::vector<Msg> Opening(int user) {
    static const char* kNames[] = {"Alice",      "Bartholomew", "Cecilia",    "Dmitri",
                                   "Eleanor",    "Fujiko",      "Gustavo",    "Hildegard",
                                   "Ignatius",   "Jasmine",     "Konstantin", "Leopold",
                                   "Maximilian", "Natalia",     "Octavia",    "Percival"};
    const std::string name = kNames[user % 16];
    return {
        {"system", name + " reads these notes. You answer questions about the notes of " + name +
                       ". The notes are long enough that re-reading them costs real time."},
        {"user", name + " asks the first question."}};
  }

  std::string dir_, cache_dir_;
  std::unique_ptr<ServerProcess> server_;
  int starts_ = 0;
};

// Three users chat once and leave while four others keep a 2-slot pool
// busy; when the three come back, each goes on from its saved state.
TEST_F(SaveUnderLoadTest, ChatsThatLeftABusyPoolComeBack) {
  Start({"--prompt-cache-slots", "2", "--parallel", "4", "--ctx-size", "2048"});
  std::vector<std::vector<Msg>> leaving;
  std::vector<Turn> first;
  for (int u = 0; u < 3; ++u) {
    leaving.push_back(Opening(u));
    first.push_back(ChatOn(port(), "tiny", leaving.back(), 12));
  }
  // Four busy users, a bounded number of turns each, all at once.
  std::vector<std::thread> busy;
  std::atomic<int> failures{0};
  for (int u = 10; u < 14; ++u) {
    busy.emplace_back([&, u] {
      std::vector<Msg> chat = Opening(u);
      for (int turn = 0; turn < 8; ++turn) {
        Turn t = ChatOn(port(), "tiny", chat, 12);
        if (t.prompt_tokens == 0) ++failures;
        chat.push_back({"assistant", t.text});
        chat.push_back(
            {"user", "Turn " + std::to_string(turn) + " of user " + std::to_string(u) + "."});
      }
    });
  }
  for (auto& t : busy) t.join();
  ASSERT_EQ(failures.load(), 0);
  for (int u = 0; u < 3; ++u) {
    std::vector<Msg> chat = leaving[static_cast<size_t>(u)];
    chat.push_back({"assistant", first[static_cast<size_t>(u)].text});
    chat.push_back({"user", "User " + std::to_string(u) + " is back."});
    Turn back = ChatOn(port(), "tiny", chat, 8);
    EXPECT_GE(back.cached, first[static_cast<size_t>(u)].prompt_tokens) << "user " << u;
    EXPECT_EQ(ChatOn(port(), "tiny", chat, 8, /*cache=*/false).text, back.text);
  }
  const std::string log = Log();
  if (getenv("MX_SHOW_LOG")) std::cerr << log;
  EXPECT_EQ(log.find("failed, dropped"), std::string::npos) << log;
  EXPECT_EQ(log.find("not saved"), std::string::npos) << log;
}

// Shutdown with more chats in RAM than the write queue holds: every one is
// written before the process exits.
TEST_F(SaveUnderLoadTest, ShutdownWritesEveryChatOfAPoolLargerThanTheQueue) {
  Start({"--prompt-cache-slots", "8", "--persist-write-queue-mb", "1"});
  for (int u = 0; u < 8; ++u) ChatOn(port(), "tiny", Opening(u), 8);
  EXPECT_EQ(Persistence()["files"], 0);  // all eight still in RAM
  Stop();
  EXPECT_EQ(SavedFiles(cache_dir_), 8u) << Log();
  EXPECT_NE(Log().find("flushed 8 cached chats"), std::string::npos) << Log();
}

// The same for an unload: the model goes at once, its chats are written
// behind it, and none is lost.
TEST_F(SaveUnderLoadTest, UnloadWritesEveryChatOfAPoolLargerThanTheQueue) {
  Start({"--prompt-cache-slots", "8", "--persist-write-queue-mb", "1"});
  for (int u = 0; u < 8; ++u) ChatOn(port(), "tiny", Opening(u), 8);
  Reply r = Post(port(), "/api/models/tiny/unload", "{}");
  ASSERT_EQ(r.status, 200) << r.raw;
  for (int i = 0; i < 500 && Persistence()["files"].get<size_t>() < 8; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(Persistence()["files"], 8) << Log();
  EXPECT_EQ(Persistence()["queued"], 0);
}

// Two models: while one replies, a chat that left the other's pool is not
// written (sampled all through the reply), and it is written once the
// reply is over.
TEST_F(SaveUnderLoadTest, OneModelsSavesWaitForAnotherModelsReply) {
  ASSERT_TRUE(MakeModel(dir_ + "/models/other.gguf"));
  Start({"--prompt-cache-slots", "1", "--ctx-size", "4096"},
        {{"MATRICXON_PERSIST_WRITE_DEFER_MS", "600000"}});
  ChatOn(port(), "other", Opening(0), 2);  // both models loaded before the reply starts
  // The long reply streams over a raw socket: its first token says it runs.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  Json body = ChatBody("tiny", Opening(1), 3000);
  body["stream"] = true;
  const std::string payload = body.dump();
  const std::string request =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(payload.size()) + "\r\nConnection: close\r\n\r\n" + payload;
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string received;
  char buf[4096];
  while (received.find("data: ") == std::string::npos) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0) << received;
    received.append(buf, static_cast<size_t>(n));
  }
  std::atomic<bool> replying{true};
  std::thread reply([&] {
    while (recv(fd, buf, sizeof(buf), 0) > 0) {
    }
    replying = false;
  });
  ChatOn(port(), "other", Opening(2), 2);
  int samples = 0, queued_samples = 0;
  bool written_during_reply = false;
  while (replying) {
    Json p = Persistence();
    if (!replying) break;
    ++samples;
    queued_samples += p["queued"].get<int>() == 1;
    written_during_reply = written_during_reply || p["writes"].get<int>() > 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  reply.join();
  close(fd);
  ASSERT_GT(queued_samples, 0) << "the reply ended before the other model's chat was queued";
  EXPECT_FALSE(written_during_reply) << samples << " samples";
  for (int i = 0; i < 500 && Persistence()["writes"].get<int>() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(Persistence()["writes"], 1);
}

// A prompt whose state needs more memory than the process may still have
// fails with an error that says so; the server stays up and serves the
// next chat.
TEST_F(SaveUnderLoadTest, AStateBiggerThanTheMemoryLeftFailsItsRequestOnly) {
  // 32 KiB of KV per token: 48 MiB of headroom hold about 1500 tokens.
  const std::string big = dir_ + "/models/wide.gguf";
  const std::string cmd =
      BinaryPath() + " make-model --out " + big +
      " --layers 8 --dim 512 --heads 8 --kv-heads 8 --ffn 512 --context 16384 --quiet";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  // Under AddressSanitizer an allocation that fails aborts unless told to
  // return null like the real allocator (no effect on other builds).
  const char* asan = std::getenv("ASAN_OPTIONS");
  Start({"--ctx-size", "16384", "--prompt-cache-budget-mb", "8"},
        {{"ASAN_OPTIONS", std::string(asan != nullptr ? std::string(asan) + ":" : "") +
                              "allocator_may_return_null=1"}});
  ChatOn(port(), "wide", Opening(0), 2);  // loaded, threads started
  const uint64_t vm = VmSizeBytes(server_->pid());
  ASSERT_GT(vm, 0u);
  struct rlimit lim = {vm + (uint64_t{48} << 20), vm + (uint64_t{48} << 20)};
  ASSERT_EQ(prlimit(server_->pid(), RLIMIT_AS, &lim, nullptr), 0);
  std::string words;
  for (int i = 0; i < 2500; ++i) words += "w" + std::to_string(i % 97) + " ";
  Reply r = Post(port(), "/v1/chat/completions", ChatBody("wide", {{"user", words}}, 2).dump());
  EXPECT_EQ(r.status, 503) << r.raw;
  EXPECT_NE(r.raw.find("out of memory"), std::string::npos) << r.raw;
  EXPECT_EQ(Get(port(), "/health").status, 200);
  Turn small = ChatOn(port(), "wide", Opening(1), 4);
  EXPECT_GT(small.prompt_tokens, 0);
  // The pool holds what it reports, within its budget of 8 MiB.
  Json cache = Get(port(), "/api/cache").body;
  uint64_t used = 0;
  for (const Json& m : cache["models"]) used += m["used_bytes"].get<uint64_t>();
  EXPECT_GT(used, 0u) << cache.dump();
  EXPECT_LE(used, uint64_t{8} << 20) << cache.dump();
}

}  // namespace
}  // namespace mx::testing
