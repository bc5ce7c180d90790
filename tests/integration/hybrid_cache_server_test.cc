// Hybrid chats through the real server, on the reference Nemotron-H model
// (Mamba2 + attention): a recurrent state can only be cut at its end or at a
// snapshot, and snapshots change while a chat reads on. Concurrent chats that
// share a start, several turns each, long messages that push snapshots out,
// regenerated replies, edited last messages, evictions to the write queue and
// to disk: every request succeeds (a request never fails because of what
// another did to the cache) and every greedy reply equals, token for token
// and to the bit of each log-probability, the same prompt read from scratch
// (cache_prompt: false) on the same server.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

#include <mutex>
#include <random>
#include <thread>

#include "http_helpers.h"
#include "server_process.h"

namespace mx::testing {
namespace {

// The notes every chat here starts with (its system message, ~440 tokens).
std::string Notes() {
  std::string s = "Notes of the team:";
  for (int i = 0; i < 40; ++i)
    s += " item" + std::to_string(i) + " is fact number " + std::to_string(i) + ".";
  return s;
}

// A long user message (~6 tokens per word group): enough new snapshots to
// push every older one out under the old oldest-first rule.
std::string LongMessage(const std::string& tag, int groups) {
  std::string s = "Please read this " + tag + ":";
  for (int i = 0; i < groups; ++i) s += " " + tag + std::to_string(i) + " words here";
  return s;
}


// A streamed request that holds its chat's entry in use: the reply runs
// (ignore_eos) until Close() disconnects, and Open() returns once the first
// event arrived, that is once the whole prompt was read and its snapshots
// taken.
class HeldReply {
 public:
  ~HeldReply() { Close(); }
  bool Open(int port, const std::vector<Msg>& msgs) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd_ < 0 || connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return false;
    Json body = ChatRequestBody(msgs, 1500);
    body["stream"] = true;
    body["ignore_eos"] = true;
    const std::string b = body.dump();
    const std::string req =
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
        "application/json\r\n"
        "Content-Length: " +
        std::to_string(b.size()) + "\r\n\r\n" + b;
    for (size_t off = 0; off < req.size();) {
      const ssize_t n = send(fd_, req.data() + off, req.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    char buf[4096];
    while (head_.find("data: ") == std::string::npos) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 60000) <= 0) return false;  // a minute without a byte: broken
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return false;
      head_.append(buf, static_cast<size_t>(n));
    }
    return head_.rfind("HTTP/1.1 200", 0) == 0;
  }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  const std::string& head() const { return head_; }

 private:
  int fd_ = -1;
  std::string head_;
};

class HybridCacheServerTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> args) {
    signal(SIGPIPE, SIG_IGN);
    dir_ = TempDir("hybrid_chats");
    fs::copy_file(std::string(MATRICXON_REF_DIR) + "/models/tiny-hybrid-nemotron_h.gguf",
                  dir_ + "/models/tiny.gguf");
    args.insert(args.end(),
                {"--threads", "1", "--ctx-size", "4096", "--prompt-cache-snapshot-every", "64"});
    std::string error;
    ASSERT_TRUE(server_.Start(args, {{"MATRICXON_MODELS_DIR", dir_ + "/models"}},
                              dir_ + "/server.log", &error))
        << error;
  }
  void TearDown() override {
    server_.Kill();
    fs::remove_all(dir_);
  }
  int port() const { return server_.port(); }

  // Asks with the cache, then the same prompt from scratch: both succeed and
  // agree. Returns the cached answer. Thread-safe (gtest's EXPECT are).
  Answer Checked(const std::vector<Msg>& msgs, const std::string& what, int max_tokens = 8) {
    Answer cached = Ask(port(), msgs, /*cache=*/true, max_tokens);
    EXPECT_EQ(cached.status, 200) << what << ": " << cached.raw;
    Answer fresh = Ask(port(), msgs, /*cache=*/false, max_tokens);
    EXPECT_EQ(fresh.status, 200) << what << ": " << fresh.raw;
    EXPECT_TRUE(fresh.tokens.is_array() && !fresh.tokens.empty()) << what << ": " << fresh.raw;
    EXPECT_EQ(cached.tokens, fresh.tokens) << what << ": reused " << cached.cached << " of "
                                           << cached.prompt_tokens << " prompt tokens";
    EXPECT_EQ(cached.text, fresh.text) << what;
    std::lock_guard<std::mutex> lock(mu_);
    ++checked_;
    reused_ += cached.cached;
    return cached;
  }
  // No request failed, and the pool never refused a cut or a copy.
  void ExpectNoFailure() {
    const std::string log = server_.Log();
    for (const char* bad :
         {"-> 400", "-> 500", "cannot be copied", "could not be cut", "prompt cache:"}) {
      EXPECT_EQ(log.find(bad), std::string::npos) << bad << "\n" << log;
    }
  }

  std::string dir_;
  ServerProcess server_;
  std::mutex mu_;
  int checked_ = 0;     // guarded by mu_
  int64_t reused_ = 0;  // guarded by mu_
};

// The reported case: chat X continues in place with a long message while
// chat Y, which shares only X's notes, starts. X's new snapshots used to push
// out the one Y's plan copied (the request failed with "recurrent state
// describes N tokens and has no snapshot at M"), then the pool re-planned and
// Y re-read everything. Now the boundary at the end of the notes outlives
// X's periodic snapshots: Y copies the notes, and its replies (first, regen-
// erated, edited) equal a fresh read while X still holds its entry.
TEST_F(HybridCacheServerTest, AChatReadingOnInPlaceNeverBreaksACopyOfItsStart) {
  Start({"--parallel", "4", "--persist-prompt-cache", "false"});
  std::vector<Msg> x = {{"system", Notes()}, {"user", "What is item 3?"}};
  const Answer x1 = Checked(x, "X, first turn");
  x.push_back({"assistant", x1.text});
  x.push_back({"user", LongMessage("x", 300)});
  HeldReply held;
  ASSERT_TRUE(held.Open(port(), x)) << held.head() << "\n" << server_.Log();

  std::vector<Msg> y = {{"system", Notes()}, {"user", "And what is item 7?"}};
  const Answer y1 = Checked(y, "Y while X reads on");
  EXPECT_GT(y1.cached, 300) << "Y copies X's notes\n" << server_.Log();
  EXPECT_LT(y1.cached, y1.prompt_tokens - 8);
  EXPECT_NE(server_.Log().find("tokens from a copy of a cached chat's snapshot"), std::string::npos)
      << server_.Log();
  Checked(y, "Y regenerated while X reads on");
  y.back().content = "And what is item 9, then?";
  Checked(y, "Y edited while X reads on");
  y.push_back({"assistant", "I do not know."});
  y.push_back({"user", LongMessage("y", 200)});
  Checked(y, "Y's long next turn while X reads on");
  held.Close();

  // X goes on: its reply regenerated (its entry holds what it streamed),
  // then another long turn.
  const Answer x2 = Checked(x, "X regenerated");
  x.push_back({"assistant", x2.text});
  x.push_back({"user", LongMessage("z", 150)});
  Checked(x, "X, third turn");
  ExpectNoFailure();
}

// Four users at once, six turns each, all starting with the same notes:
// next turns, long messages, regenerated replies, edited last messages and
// new chats in a seeded random order, with two RAM slots (chats leave for the write queue
// and the disk, and come back from both) and three chats decoded at once.
TEST_F(HybridCacheServerTest, ConcurrentChatsSharingAStartNeverFailOrChangeAReply) {
  Start({"--parallel", "3", "--prompt-cache-slots", "2", "--persist-write-defer-ms", "0"});
  constexpr int kUsers = 4, kTurns = 6;
  std::vector<std::thread> users;
  for (int u = 0; u < kUsers; ++u) {
    users.emplace_back([this, u] {
      std::mt19937 rng(100 + u);
      const std::string me = "user" + std::to_string(u);
      std::vector<Msg> chat = {
          {"system", Notes()},
          {"user", "I am " + me + ". What is item " + std::to_string(u) + "?"}};
      Answer last = Checked(chat, me + " turn 0");
      for (int turn = 1; turn < kTurns; ++turn) {
        const std::string what = me + " turn " + std::to_string(turn);
        switch (rng() % 5) {
          case 0:  // the next turn, a short question
            chat.push_back({"assistant", last.text});
            chat.push_back({"user", "Next question " + std::to_string(turn) + " from " + me + "?"});
            break;
          case 1:  // the next turn, a long message
            chat.push_back({"assistant", last.text});
            chat.push_back({"user", LongMessage(me + "t" + std::to_string(turn),
                                                100 + static_cast<int>(rng() % 150))});
            break;
          case 2:  // the same prompt again: the reply regenerated
            break;
          case 3:  // the last message edited
            chat.back().content += " (edited " + std::to_string(turn) + ")";
            break;
          case 4:  // a new chat with the same notes (copies them from another chat)
            chat = {{"system", Notes()},
                    {"user", me + " starts over at turn " + std::to_string(turn)}};
            break;
        }
        last = Checked(chat, what + " (kind " + std::to_string(turn) + ")");
      }
    });
  }
  for (auto& t : users) t.join();
  EXPECT_EQ(checked_, kUsers * kTurns);
  EXPECT_GT(reused_, 0);
  ExpectNoFailure();
}

// One RAM slot: every other chat's turn leaves for the disk (waited for, so
// it is written, not taken back from the queue), and comes back from there
// cut at its snapshots: the next turn, a regenerated reply and an edited last
// message each restart from disk and equal a fresh read.
TEST_F(HybridCacheServerTest, EvictedChatsComeBackFromDiskAtTheirSnapshots) {
  Start({"--parallel", "2", "--prompt-cache-slots", "1", "--persist-write-defer-ms", "0"});
  // Waits until `n` chats were written since the start and none waits.
  auto wait_for_writes = [&](int64_t n) {
    for (int i = 0; i < 600; ++i) {
      Reply p = Get(port(), "/api/cache/persistence");
      if (p.status == 200 && p.body["writes"].get<int64_t>() >= n &&
          p.body["queued"].get<int64_t>() == 0)
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "the evicted chat was not written\n" << server_.Log();
  };
  std::vector<Msg> a = {{"system", Notes()}, {"user", "What is item 11?"}};
  std::vector<Msg> b = {{"system", Notes()}, {"user", LongMessage("b", 120)}};
  Answer a1 = Checked(a, "a, first turn");  // the oracle's state never enters the pool
  Checked(b, "b, first turn");              // a leaves for the disk
  wait_for_writes(1);
  a.push_back({"assistant", a1.text});
  a.push_back({"user", LongMessage("a", 120)});
  const Answer a2 = Checked(a, "a from disk, next turn");
  EXPECT_GE(a2.cached, a1.prompt_tokens) << server_.Log();
  wait_for_writes(2);  // b left for the disk
  Checked(b, "b from disk, regenerated");
  wait_for_writes(3);  // and a
  a.back().content = "What is item 12, instead?";
  const Answer edited = Checked(a, "a from disk, edited");
  EXPECT_GE(edited.cached, a1.prompt_tokens) << server_.Log();  // the edited message's start
  EXPECT_NE(server_.Log().find("tokens from disk"), std::string::npos) << server_.Log();
  ExpectNoFailure();
}

}  // namespace
}  // namespace mx::testing
