// The saved-cache index refresh never blocks a reply that does not need it
// (docs/cluster.md, "Finding other nodes' files"): two nodes share one
// folder; node B's listing of it is held in the Env until the test lets it
// go, so "while the refresh runs" is a span the test controls. Every check
// is on the order of stamped events (GenEvent::time_us and the Env's own
// stamps), never on durations; waits are bounded polls.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "engine/saved_cache.h"
#include "engine/scheduler.h"
#include "models/synthetic_model.h"

namespace mx::engine {
namespace {

namespace fs = std::filesystem;
constexpr auto kBound = std::chrono::seconds(60);  // the most any wait below takes

// Holds the first listing of `dir` after Hold() until Release() (or fails
// it with `fail`), stamping when it began and when it was let go, and
// counts the listings of `dir` from Hold() on.
class ListGateEnv : public EnvWrapper {
 public:
  explicit ListGateEnv(std::string dir) : EnvWrapper(Env::Default()), dir_(std::move(dir)) {}

  void Hold(Status fail = Status::Ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
    fail_ = std::move(fail);
    listings_ = 0;
  }
  // Lets the held listing go on; returns the stamp taken just before.
  uint64_t Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_us_ = NowMicros();
    released_ = true;
    cv_.notify_all();
    return released_us_;
  }
  // Waits (bounded) until the held listing has begun; its stamp, 0 if not.
  uint64_t WaitEntered() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kBound, [&] { return entered_us_ != 0; });
    return entered_us_;
  }
  bool released() const {
    std::lock_guard<std::mutex> lock(mu_);
    return released_;
  }
  int listings() const {
    std::lock_guard<std::mutex> lock(mu_);
    return listings_;
  }

  Result<std::vector<std::string>> ListDir(const std::string& path) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (armed_ && path == dir_) {
        ++listings_;
        if (entered_us_ == 0) {
          entered_us_ = NowMicros();
          cv_.notify_all();
          cv_.wait(lock, [&] { return released_; });  // the test always releases
          if (!fail_.ok()) return fail_;
        }
      }
    }
    return target()->ListDir(path);
  }

 private:
  const std::string dir_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  bool released_ = false;
  Status fail_;
  int listings_ = 0;
  uint64_t entered_us_ = 0;
  uint64_t released_us_ = 0;
};

// Reads one request's events on its own thread, as a client would. Going
// away lets a held listing go first, so that a failed check never leaves
// the compute loop stuck in it.
class Client {
 public:
  Client(std::shared_ptr<GenStream> stream, ListGateEnv* gate)
      : stream_(std::move(stream)), gate_(gate) {
    reader_ = std::thread([this] {
      GenEvent ev;
      while (stream_->Next(&ev)) {
        std::lock_guard<std::mutex> lock(mu_);
        if (ev.has_token) token_us_.push_back(ev.time_us);
        if (first_us_ == 0) first_us_ = ev.time_us;
        if (ev.final) {
          final_ = ev;
          done_ = true;
        }
        cv_.notify_all();
      }
    });
  }
  ~Client() {
    if (!gate_->released()) gate_->Release();
    stream_->Cancel();
    reader_.join();
  }
  // Waits (bounded) until `n` tokens were stamped after `after_us`.
  bool WaitTokensAfter(uint64_t after_us, size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kBound, [&] {
      return done_ || TokensIn(after_us, UINT64_MAX) >= n;
    }) && TokensIn(after_us, UINT64_MAX) >= n;
  }
  // Waits (bounded) for the final event.
  bool WaitDone() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kBound, [&] { return done_; });
  }
  size_t TokensBetween(uint64_t begin_us, uint64_t end_us) {
    std::lock_guard<std::mutex> lock(mu_);
    return TokensIn(begin_us, end_us);
  }
  GenEvent final_event() {
    std::lock_guard<std::mutex> lock(mu_);
    return final_;
  }
  uint64_t first_us() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_us_;
  }
  void Cancel() { stream_->Cancel(); }

 private:
  size_t TokensIn(uint64_t begin_us, uint64_t end_us) const {
    return static_cast<size_t>(std::count_if(token_us_.begin(), token_us_.end(), [&](uint64_t t) {
      return t > begin_us && t < end_us;
    }));
  }
  std::shared_ptr<GenStream> stream_;
  ListGateEnv* gate_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> token_us_;
  uint64_t first_us_ = 0;
  GenEvent final_;
  bool done_ = false;
  std::thread reader_;
};

const char kChat1[] =
    "Node A served this chat: the saved caches keep every chat's state on disk so that another "
    "node reads only the new tokens of the next turn.";
const char kChat2[] =
    "A second chat that node A also served, about something else entirely, long enough to be "
    "worth loading back from the shared folder.";

class SavedCacheRefreshTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    base_ = new std::string(std::string(::testing::TempDir()) + "/saved_cache_refresh_" +
                            std::to_string(getpid()));
    fs::create_directories(*base_);
    models::SyntheticSpec spec;
    spec.n_ctx = 4096;  // room for a reply that lasts until the test ends it
    const std::string path = *base_ + "/m.gguf";
    ASSERT_TRUE(models::WriteSyntheticModel(Env::Default(), spec, path).ok());
    auto lm = LoadedModel::Load(Env::Default(), path, {});
    ASSERT_TRUE(lm.ok()) << lm.status().ToString();
    model_ = std::move(lm).value().release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
    fs::remove_all(*base_);
    delete base_;
  }
  void SetUp() override {
    dir_ = *base_ + "/cache_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    gate_ = std::make_unique<ListGateEnv>(dir_);
  }
  void TearDown() override {
    if (!gate_->released()) gate_->Release();  // a failed test never leaves a thread held
  }

  // One node of the cluster: its own store on the shared folder.
  std::unique_ptr<SavedCacheStore> OpenNode(Env* env, uint64_t refresh_wait_ms = 600000) {
    SavedCacheOptions o;
    o.dir = dir_;
    o.passphrase = "cluster passphrase";
    o.cluster_node = true;
    o.check_in_background = false;
    o.min_gain_tokens = 4;
    o.refresh_wait_ms = refresh_wait_ms;
    auto s = SavedCacheStore::Open(env, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  std::unique_ptr<Scheduler> Make(SavedCacheStore* store, Env* env, int parallel) {
    SchedulerOptions o;
    o.n_threads = 1;
    o.n_ctx = 4096;
    o.n_parallel = parallel;
    o.model_name = "m";
    o.cache.saved = store;
    o.events = &events_;
    auto s = Scheduler::Create(*model_, o, env);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  static GenRequest Greedy(const std::string& text, int64_t max_tokens) {
    GenRequest r;
    r.prompt = model_->tokenizer->Encode(text, true, true);
    r.sampling.temperature = 0;
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    return r;
  }
  // A reply that keeps generating until cancelled and never looks at the
  // cache (so it never refreshes the index itself).
  static GenRequest LongReply() {
    GenRequest r = Greedy("a reply that is generating all along", 3800);
    r.cache_prompt = false;
    return r;
  }
  // Node A serves each chat, unloads (its RAM goes to the write queue) and
  // writes them; returns each chat's next-turn prompt.
  std::vector<GenRequest> NodeASaves(const std::vector<std::string>& chats) {
    std::vector<GenRequest> next;
    auto a = OpenNode(Env::Default());
    {
      auto s = Make(a.get(), Env::Default(), 1);
      for (const std::string& text : chats) {
        GenRequest r = Greedy(text, 6);
        auto stream = s->Submit(r);
        GenEvent ev;
        while (stream->Next(&ev)) {
          if (ev.has_token) r.prompt.push_back(ev.token);
        }
        // The state holds the prompt and the reply but its last token.
        saved_tokens_.push_back(static_cast<int64_t>(r.prompt.size()) - 1);
        auto more = model_->tokenizer->Encode(" And then?", false, false);
        r.prompt.insert(r.prompt.end(), more.begin(), more.end());
        next.push_back(r);
      }
    }
    EXPECT_EQ(a->DrainAll(30000), 0u);
    EXPECT_EQ(a->Usage().files, chats.size());
    return next;
  }
  // The cache event of the request with `prompt_tokens`.
  CacheEvent EventOf(int64_t prompt_tokens) {
    for (const CacheEvent& e : events_.Since(0, 100).events) {
      if (e.prompt_tokens == prompt_tokens) return e;
    }
    return {};
  }
  CacheSource SourceOf(int64_t prompt_tokens) { return EventOf(prompt_tokens).source; }

  static std::string* base_;
  static LoadedModel* model_;
  std::string dir_;
  std::unique_ptr<ListGateEnv> gate_;
  CacheEventLog events_;
  std::vector<int64_t> saved_tokens_;  // what node A saved of each chat
};
std::string* SavedCacheRefreshTest::base_ = nullptr;
LoadedModel* SavedCacheRefreshTest::model_ = nullptr;

// While a prompt's refresh lists the folder, a reply already generating on
// the same model keeps producing tokens; the prompt then continues the
// other node's chat from disk, and its wait is charged to its cache_ms.
TEST_F(SavedCacheRefreshTest, AReplyKeepsGeneratingWhileAnotherPromptWaitsForTheRefresh) {
  auto b = OpenNode(gate_.get());  // checked before node A writes: knows no file
  std::vector<GenRequest> next = NodeASaves({kChat1});
  ASSERT_EQ(b->Usage().files, 0u);
  auto s = Make(b.get(), gate_.get(), 2);
  gate_->Hold();
  Client reply(s->Submit(LongReply()), gate_.get());
  ASSERT_TRUE(reply.WaitTokensAfter(0, 1));
  Client waiting(s->Submit(next[0]), gate_.get());
  const uint64_t entered_us = gate_->WaitEntered();
  ASSERT_NE(entered_us, 0u) << "the prompt never asked for a refresh";
  // Tokens stamped after the listing began, while it is held.
  EXPECT_TRUE(reply.WaitTokensAfter(entered_us, 3))
      << "the reply stopped while the folder was listed";
  const uint64_t released_us = gate_->Release();
  EXPECT_GE(reply.TokensBetween(entered_us, released_us), 3u);

  ASSERT_TRUE(waiting.WaitDone());
  const GenEvent done = waiting.final_event();
  ASSERT_TRUE(done.status.ok()) << done.status.ToString();
  EXPECT_GT(waiting.first_us(), released_us);  // it started only once the refresh ended
  EXPECT_EQ(done.cached_tokens, saved_tokens_[0]);
  EXPECT_EQ(SourceOf(static_cast<int64_t>(next[0].prompt.size())), CacheSource::kDisk);
  // It began waiting before the listing began and went on after it ended.
  EXPECT_GE(done.timings.cache_ms * 1000.0 + 1.0, static_cast<double>(released_us - entered_us));
  EXPECT_EQ(gate_->listings(), 1);
  reply.Cancel();
  ASSERT_TRUE(reply.WaitDone());
  EXPECT_TRUE(reply.final_event().status.ok());
}

// A second prompt that needs a refresh while one runs waits for that same
// listing (no second one), and both continue their chats from disk.
TEST_F(SavedCacheRefreshTest, PromptsArrivingDuringARefreshWaitForTheSameListing) {
  auto b = OpenNode(gate_.get());
  std::vector<GenRequest> next = NodeASaves({kChat1, kChat2});
  auto s = Make(b.get(), gate_.get(), 3);
  gate_->Hold();
  Client reply(s->Submit(LongReply()), gate_.get());
  ASSERT_TRUE(reply.WaitTokensAfter(0, 1));
  Client first(s->Submit(next[0]), gate_.get());
  const uint64_t entered_us = gate_->WaitEntered();
  ASSERT_NE(entered_us, 0u);
  Client second(s->Submit(next[1]), gate_.get());
  const uint64_t submitted_us = Env::Default()->NowMicros();
  // Two reply tokens stamped after the submit: the loop has taken the
  // second prompt in and looked it up since (while the listing is held).
  ASSERT_TRUE(reply.WaitTokensAfter(submitted_us, 2));
  const uint64_t released_us = gate_->Release();
  ASSERT_TRUE(first.WaitDone());
  ASSERT_TRUE(second.WaitDone());
  EXPECT_GT(first.first_us(), released_us);
  EXPECT_GT(second.first_us(), released_us);
  EXPECT_EQ(SourceOf(static_cast<int64_t>(next[0].prompt.size())), CacheSource::kDisk);
  EXPECT_EQ(SourceOf(static_cast<int64_t>(next[1].prompt.size())), CacheSource::kDisk);
  EXPECT_EQ(first.final_event().cached_tokens, saved_tokens_[0]);
  EXPECT_EQ(second.final_event().cached_tokens, saved_tokens_[1]);
  EXPECT_EQ(gate_->listings(), 1);
}

// A refresh that has not ended by its deadline no longer holds the prompt:
// it goes on with what the index knows (here nothing: it re-reads) while
// the listing is still held; the refresh itself ends later and indexes
// the file for later prompts.
TEST_F(SavedCacheRefreshTest, ARefreshPastItsDeadlineLetsThePromptGoOnWithTheIndex) {
  auto b = OpenNode(gate_.get(), /*refresh_wait_ms=*/20);
  std::vector<GenRequest> next = NodeASaves({kChat1});
  auto s = Make(b.get(), gate_.get(), 2);
  gate_->Hold();
  Client waiting(s->Submit(next[0]), gate_.get());
  ASSERT_NE(gate_->WaitEntered(), 0u);
  ASSERT_TRUE(waiting.WaitDone());
  EXPECT_FALSE(gate_->released());  // it ended while the folder was still being listed
  const GenEvent done = waiting.final_event();
  ASSERT_TRUE(done.status.ok()) << done.status.ToString();
  EXPECT_EQ(done.cached_tokens, 0);
  const std::string line = EventOf(static_cast<int64_t>(next[0].prompt.size())).line;
  EXPECT_NE(line.find("the saved-cache index refresh had not ended"), std::string::npos) << line;
  gate_->Release();
  // The refresh goes on and indexes node A's file (bounded poll).
  for (int i = 0; i < 6000 && b->Usage().files == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(b->Usage().files, 1u);
}

// A listing that fails lets the prompt go on with what the index knows;
// the refresh reports why.
TEST_F(SavedCacheRefreshTest, AFailedListingLetsThePromptGoOnWithTheIndex) {
  auto b = OpenNode(gate_.get());
  std::vector<GenRequest> next = NodeASaves({kChat1});
  auto s = Make(b.get(), gate_.get(), 2);
  gate_->Hold(Status::IOError("the file server went away"));
  Client waiting(s->Submit(next[0]), gate_.get());
  ASSERT_NE(gate_->WaitEntered(), 0u);
  gate_->Release();
  ASSERT_TRUE(waiting.WaitDone());
  const GenEvent done = waiting.final_event();
  ASSERT_TRUE(done.status.ok()) << done.status.ToString();
  EXPECT_EQ(done.cached_tokens, 0);
  EXPECT_EQ(b->Usage().files, 0u);
  const std::string line = EventOf(static_cast<int64_t>(next[0].prompt.size())).line;
  EXPECT_NE(line.find("the saved-cache index refresh failed"), std::string::npos) << line;
}

// The store's side: a refresh asked for while one runs is that one; none
// is due with saving off; a failed listing ends it with its error.
TEST_F(SavedCacheRefreshTest, ARefreshAskedForWhileOneRunsIsThatOne) {
  auto b = OpenNode(gate_.get());
  NodeASaves({kChat1});
  gate_->Hold();
  std::shared_ptr<IndexRefresh> r = b->RefreshInBackground();
  ASSERT_NE(r, nullptr);
  ASSERT_NE(gate_->WaitEntered(), 0u);
  EXPECT_FALSE(r->done());
  EXPECT_EQ(b->RefreshInBackground(), r);  // joined, not a second listing
  std::mutex mu;
  std::condition_variable cv;
  bool woken = false;
  const uint64_t waker = r->AddWaker([&] {
    std::lock_guard<std::mutex> lock(mu);
    woken = true;
    cv.notify_all();
  });
  EXPECT_NE(waker, 0u);
  gate_->Release();
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kBound, [&] { return woken; }));
  }
  EXPECT_TRUE(r->done());
  EXPECT_TRUE(r->report().ran);
  EXPECT_TRUE(r->report().status.ok());
  EXPECT_EQ(r->report().added, 1u);
  EXPECT_EQ(r->AddWaker([] {}), 0u);  // ended: never called
  EXPECT_EQ(gate_->listings(), 1);

  ASSERT_TRUE(b->SetEnabled(false).ok());
  EXPECT_EQ(b->RefreshInBackground(), nullptr);
}

}  // namespace
}  // namespace mx::engine
