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
#include <mutex>
#include <optional>
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

// A streamed reply over a raw socket that runs until Close(): Open()
// returns once its first event came (the model is replying from then on).
class LongReply {
 public:
  ~LongReply() { Close(); }
  bool Open(int port, const Json& body, std::string* error) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      *error = "cannot connect";
      return false;
    }
    Json streamed = body;
    streamed["stream"] = true;
    const std::string payload = streamed.dump();
    const std::string request =
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Content-Length: " +
        std::to_string(payload.size()) + "\r\nConnection: close\r\n\r\n" + payload;
    if (send(fd_, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size())) {
      *error = "cannot send";
      return false;
    }
    std::string received;
    char buf[4096];
    while (received.find("data: ") == std::string::npos) {
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        *error = "the reply ended before its first event: " + received;
        return false;
      }
      received.append(buf, static_cast<size_t>(n));
    }
    replying_ = true;
    reader_ = std::thread([this] {
      char b[4096];
      while (recv(fd_, b, sizeof(b), 0) > 0) {
      }
      replying_ = false;
    });
    return true;
  }
  bool replying() const { return replying_; }
  // Ends the reply from the client's side (the server cancels it) and waits
  // until its connection is gone.
  void Close() {
    if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
    if (reader_.joinable()) reader_.join();
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  // Waits until the server ended the reply by itself.
  void WaitForTheEnd() {
    if (reader_.joinable()) reader_.join();
  }

 private:
  int fd_ = -1;
  std::atomic<bool> replying_{false};
  std::thread reader_;
};

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
  // The flush counts from the start of the shutdown, also the chats written
  // while the model was still unloading.
  EXPECT_NE(Log().find("flushed 8 cached chats"), std::string::npos) << Log();
  EXPECT_EQ(Log().find("were not saved"), std::string::npos) << Log();
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
  LongReply reply;
  std::string error;
  ASSERT_TRUE(reply.Open(port(), ChatBody("tiny", Opening(1), 3000), &error)) << error;
  ChatOn(port(), "other", Opening(2), 2);
  int samples = 0, queued_samples = 0;
  bool written_during_reply = false;
  while (reply.replying()) {
    Json p = Persistence();
    if (!reply.replying()) break;
    ++samples;
    queued_samples += p["queued"].get<int>() == 1;
    written_during_reply = written_during_reply || p["writes"].get<int>() > 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  reply.WaitForTheEnd();
  ASSERT_GT(queued_samples, 0) << "the reply ended before the other model's chat was queued";
  EXPECT_FALSE(written_during_reply) << samples << " samples";
  for (int i = 0; i < 500 && Persistence()["writes"].get<int>() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(Persistence()["writes"], 1);
}

// A model slow enough that a few thousand tokens of its reply outlast a
// test's steps (one thread: 8 layers of 512, about 60 MB of weights a token).
bool MakeSlowModel(const std::string& path) {
  const std::string cmd = BinaryPath() + " make-model --out " + path +
                          " --layers 8 --dim 512 --heads 8 --kv-heads 8 --ffn 1536 --context 8192 --quiet";
  return std::system(cmd.c_str()) == 0;
}

// A chat that its model's unload queued (another model's reply keeps the
// writer from writing it) goes on from the write queue after the model is
// loaded again, and on an identical copy of the file: the request succeeds,
// reuses the chat and equals a full re-read. (The reloaded model's runner
// used to refuse the queued state, "sequence state belongs to another model
// or runner", with the chat already taken out of the queue: lost.)
TEST_F(SaveUnderLoadTest, AChatQueuedByAnUnloadGoesOnAfterTheReload) {
  ASSERT_TRUE(MakeSlowModel(dir_ + "/models/slow.gguf"));
  fs::copy_file(dir_ + "/models/tiny.gguf", dir_ + "/models/twin.gguf");
  Start({"--ctx-size", "8192", "--max-loaded-models", "3"},
        {{"MATRICXON_PERSIST_WRITE_DEFER_MS", "600000"}});
  LongReply reply;
  std::string error;
  ASSERT_TRUE(reply.Open(port(), ChatBody("slow", Opening(0), 6000), &error)) << error;

  for (const std::string& next_on : {std::string("tiny"), std::string("twin")}) {
    SCOPED_TRACE("continued on " + next_on);
    std::vector<Msg> chat = Opening(next_on == "tiny" ? 1 : 2);
    const Turn t1 = ChatOn(port(), "tiny", chat);
    ASSERT_EQ(Post(port(), "/api/models/tiny/unload", "{}").status, 200);
    const int queued = Persistence()["queued"].get<int>();
    ASSERT_GE(queued, 1) << "the chat must wait in the queue for this test";
    ASSERT_TRUE(reply.replying());
    chat.push_back({"assistant", t1.text});
    chat.push_back({"user", "And the second question?"});
    Reply r = Post(port(), "/v1/chat/completions", ChatBody(next_on, chat, 8).dump());
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_GE(r.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>(), t1.prompt_tokens);
    EXPECT_EQ(Persistence()["queued"], queued - 1);  // taken back into the pool, not lost
    const Turn cold = ChatOn(port(), next_on, chat, 8, /*cache=*/false);
    EXPECT_EQ(r.body["choices"][0]["message"]["content"].get<std::string>(), cold.text);
  }
  EXPECT_NE(Log().find("taken back from the write queue"), std::string::npos) << Log();
  EXPECT_EQ(Log().find("belongs to another model"), std::string::npos) << Log();
  ASSERT_TRUE(reply.replying()) << "the slow reply must outlast the test's steps";
}

// Load / unload churn (ordinary use): users chat turn after turn on two
// names of one file while the models are unloaded again and again, with and
// without a long reply on a third model holding the writer back. No request
// fails and every turn reuses the chat's previous turn, from RAM, the write
// queue or disk.
// MATRICXON_CHURN_SECONDS sets how long it runs (default 20).
TEST_F(SaveUnderLoadTest, LoadUnloadChurnLosesNoChat) {
  const char* seconds_env = std::getenv("MATRICXON_CHURN_SECONDS");
  const int seconds = seconds_env != nullptr ? std::atoi(seconds_env) : 20;
  ASSERT_TRUE(MakeSlowModel(dir_ + "/models/slow.gguf"));
  fs::copy_file(dir_ + "/models/tiny.gguf", dir_ + "/models/twin.gguf");
  Start({"--ctx-size", "8192", "--max-loaded-models", "3", "--parallel", "4", "--prompt-cache-slots", "8"},
        {{"MATRICXON_PERSIST_WRITE_DEFER_MS", "600000"}});
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  std::atomic<int> requests{0}, failed{0}, rereads{0}, reloads{0};
  std::mutex mu;
  std::vector<std::string> failures;
  auto fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    if (failures.size() < 8) failures.push_back(what);
  };
  std::vector<std::thread> users;
  for (int u = 0; u < 4; ++u) {
    users.emplace_back([&, u] {
      for (int chat_no = 0; std::chrono::steady_clock::now() < until; ++chat_no) {
        std::vector<Msg> chat = Opening(u);
        chat[0].content = "Chat " + std::to_string(chat_no) + ". " + chat[0].content;
        int64_t held = 0;
        for (int turn = 0; turn < 4 && std::chrono::steady_clock::now() < until; ++turn) {
          // A chat stays on one name: the other name's RAM pool is another
          // model's (only the write queue and disk are shared by the file).
          const std::string model = (chat_no + u) % 2 == 0 ? "tiny" : "twin";
          Reply r = Post(port(), "/v1/chat/completions", ChatBody(model, chat, 6).dump());
          ++requests;
          if (r.status != 200) {
            ++failed;
            fail(std::to_string(r.status) + " " + r.raw);
            break;
          }
          const int64_t cached = r.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
          // (Two tokens of slack: the reply's first characters may merge
          // with the prompt's last ones when the chat is rendered again.)
          if (cached < held - 2) {
            ++rereads;
            fail("turn " + std::to_string(turn) + " of a chat reused " + std::to_string(cached) + " of the " +
                 std::to_string(held) + " tokens its last turn read");
          }
          held = r.body["usage"]["prompt_tokens"].get<int64_t>();
          chat.push_back({"assistant", r.body["choices"][0]["message"]["content"].get<std::string>()});
          chat.push_back({"user", "Question " + std::to_string(turn + 2) + "?"});
        }
      }
    });
  }
  std::thread churn([&] {
    for (int i = 0; std::chrono::steady_clock::now() < until; ++i) {
      std::optional<LongReply> reply;
      std::string error;
      if (i % 3 == 0) {
        reply.emplace();
        if (!reply->Open(port(), ChatBody("slow", Opening(15), 4000), &error)) fail("slow reply: " + error);
      }
      for (const char* m : {"tiny", "twin"}) {
        Reply r = Post(port(), std::string("/api/models/") + m + "/unload", "{}");
        if (r.status != 200) fail(std::string("unload ") + m + ": " + std::to_string(r.status) + " " + r.raw);
        ++reloads;
        std::this_thread::sleep_for(std::chrono::milliseconds(40 + 30 * (i % 4)));
      }
    }
  });
  for (auto& t : users) t.join();
  churn.join();
  std::string why;
  for (const std::string& f : failures) why += f + "\n";
  EXPECT_EQ(failed.load(), 0) << why;
  EXPECT_EQ(rereads.load(), 0) << why;
  EXPECT_GT(requests.load(), 40);
  EXPECT_GT(reloads.load(), 20);
  EXPECT_EQ(Log().find("belongs to another model"), std::string::npos);
  EXPECT_NE(Log().find("taken back from the write queue"), std::string::npos);
  std::cerr << requests.load() << " requests, " << reloads.load() << " unloads in " << seconds << " s\n";
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
