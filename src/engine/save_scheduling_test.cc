// When saved caches are written (docs/saved_caches.md, "When states are
// written"): never during a forward pass of any model; not at all while any
// model has a reply, until a state has waited its deferral; never dropped
// for lack of queue room; and a queued state still serves its chat.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
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

// Records every append to a saved-cache file: when, and whether a forward
// pass of any model ran at that moment (read from the gate itself).
class WriteLog : public EnvWrapper {
 public:
  WriteLog() : EnvWrapper(Env::Default()) {}
  std::atomic<ComputeGate*> gate{nullptr};
  std::atomic<int> appends{0};
  std::atomic<int> appends_during_steps{0};

  std::vector<uint64_t> Times() {
    std::lock_guard<std::mutex> lock(mu_);
    return times_;
  }

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path, uint32_t mode,
                                                        bool exclusive) override {
    MX_ASSIGN_OR_RETURN(auto f, target()->NewWritableFile(path, mode, exclusive));
    if (path.find(".mxpc") == std::string::npos) return f;
    return std::unique_ptr<WritableFile>(new File(this, std::move(f)));
  }

 private:
  void Record() {
    ++appends;
    ComputeGate* g = gate.load();
    if (g != nullptr && g->steps_running() > 0) ++appends_during_steps;
    std::lock_guard<std::mutex> lock(mu_);
    times_.push_back(NowMicros());
  }
  class File : public WritableFile {
   public:
    File(WriteLog* log, std::unique_ptr<WritableFile> base) : log_(log), base_(std::move(base)) {}
    Status Append(std::string_view data) override {
      log_->Record();
      return base_->Append(data);
    }
    Status Sync() override { return base_->Sync(); }
    Status Close() override { return base_->Close(); }
    const std::string& path() const override { return base_->path(); }

   private:
    WriteLog* log_;
    std::unique_ptr<WritableFile> base_;
  };
  std::mutex mu_;
  std::vector<uint64_t> times_;
};

class SaveSchedulingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    base_ = new std::string(std::string(::testing::TempDir()) + "/save_scheduling_" +
                            std::to_string(getpid()));
    fs::create_directories(*base_);
    for (int i = 0; i < 2; ++i) {
      models::SyntheticSpec spec;
      spec.seed = 10 + i;
      spec.n_ctx = 8192;  // room for a reply that lasts until the test ends it
      const std::string path = *base_ + "/m" + std::to_string(i) + ".gguf";
      ASSERT_TRUE(models::WriteSyntheticModel(Env::Default(), spec, path).ok());
      auto lm = LoadedModel::Load(Env::Default(), path, {});
      ASSERT_TRUE(lm.ok()) << lm.status().ToString();
      models_[i] = std::move(lm).value().release();
    }
  }
  static void TearDownTestSuite() {
    for (auto*& m : models_) {
      delete m;
      m = nullptr;
    }
    fs::remove_all(*base_);
    delete base_;
  }
  void SetUp() override {
    dir_ = *base_ + "/cache_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
  }

  std::unique_ptr<SavedCacheStore> OpenStore(Env* env,
                                             const std::function<void(SavedCacheOptions&)>& set) {
    SavedCacheOptions o;
    set(o);
    o.dir = dir_;
    o.passphrase = "scheduling";
    o.check_in_background = false;
    o.min_gain_tokens = 4;
    auto s = SavedCacheStore::Open(env, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  static std::unique_ptr<Scheduler> Make(int which, SavedCacheStore* store, int slots, Env* env,
                                         int64_t n_ctx = 512) {
    return MakeFor(*models_[which], "m" + std::to_string(which), store, slots, env, n_ctx);
  }
  static std::unique_ptr<Scheduler> MakeFor(const LoadedModel& model, const std::string& name,
                                            SavedCacheStore* store, int slots, Env* env,
                                            int64_t n_ctx = 512) {
    SchedulerOptions o;
    o.n_threads = 1;
    o.n_ctx = n_ctx;
    o.n_parallel = 2;
    o.model_name = name;
    o.cache.slots = slots;
    o.cache.saved = store;
    auto s = Scheduler::Create(model, o, env);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  static GenRequest Greedy(int which, const std::string& text, int64_t max_tokens) {
    GenRequest r;
    r.prompt = models_[which]->tokenizer->Encode(text, true, true);
    r.sampling.temperature = 0;
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    return r;
  }
  struct Reply {
    std::vector<int32_t> tokens;
    GenEvent last;
    uint64_t first_us = 0;
  };
  static Reply Collect(GenStream& stream) {
    Reply out;
    GenEvent ev;
    while (stream.Next(&ev)) {
      if (out.first_us == 0) out.first_us = ev.time_us;
      if (ev.has_token) out.tokens.push_back(ev.token);
      if (ev.final) out.last = ev;
    }
    EXPECT_TRUE(out.last.status.ok()) << out.last.status.ToString();
    return out;
  }
  static Reply Run(Scheduler& s, GenRequest r) { return Collect(*s.Submit(std::move(r))); }
  // The prompt of the chat's next turn: this turn's prompt, reply, a question.
  static GenRequest NextTurn(int which, const GenRequest& r, const Reply& reply,
                             const std::string& more) {
    GenRequest next = r;
    next.prompt.insert(next.prompt.end(), reply.tokens.begin(), reply.tokens.end());
    auto extra = models_[which]->tokenizer->Encode(more, false, false);
    next.prompt.insert(next.prompt.end(), extra.begin(), extra.end());
    return next;
  }

  static std::string* base_;
  static LoadedModel* models_[2];
  std::string dir_;
};
std::string* SaveSchedulingTest::base_ = nullptr;
LoadedModel* SaveSchedulingTest::models_[2] = {nullptr, nullptr};

// A chat that left RAM but is not written yet continues from its state in
// the queue (taken back), and the reply equals a full re-read.
TEST_F(SaveSchedulingTest, QueuedChatContinuesFromRam) {
  auto store = OpenStore(Env::Default(), [](SavedCacheOptions& o) { o.background_writer = false; });
  auto s = Make(0, store.get(), /*slots=*/1, Env::Default());
  GenRequest a = Greedy(0, "the first chat, which will leave the pool", 6);
  Reply ra = Run(*s, a);
  Run(*s, Greedy(0, "another chat takes the only slot", 6));  // a goes to the queue
  ASSERT_EQ(store->Usage().queued, 1u);
  GenRequest a2 = NextTurn(0, a, ra, " and a follow-up");
  Reply r2 = Run(*s, a2);
  const int64_t held =
      static_cast<int64_t>(a.prompt.size() + ra.tokens.size()) - 1;  // the last token is not read
  EXPECT_GE(r2.last.cached_tokens, held);
  // Taken back: the queue no longer holds a (only the chat that left now).
  EXPECT_EQ(store->Usage().queued, 1u);
  a2.cache_prompt = false;
  EXPECT_EQ(Run(*s, a2).tokens, r2.tokens);
}

// A prompt sharing only the start of a queued chat gets a copy of that
// start; the queued chat itself is still written whole.
TEST_F(SaveSchedulingTest, SharedStartOfAQueuedChatIsCopiedAndTheChatStillSaved) {
  auto store = OpenStore(Env::Default(), [](SavedCacheOptions& o) { o.background_writer = false; });
  auto s = Make(0, store.get(), /*slots=*/1, Env::Default());
  const std::string notes =
      "shared notes that several chats start with, long enough to be worth reusing; ";
  GenRequest a = Greedy(0, notes + "first question", 4);
  Reply ra = Run(*s, a);
  Run(*s, Greedy(0, "an unrelated chat", 4));  // a is queued
  GenRequest b = Greedy(0, notes + "a different question", 4);
  Reply rb = Run(*s, b);
  EXPECT_GT(rb.last.cached_tokens, 10);
  b.cache_prompt = false;
  EXPECT_EQ(Run(*s, b).tokens, rb.tokens);
  s.reset();
  EXPECT_EQ(store->DrainAll(30000), 0u);
  bool found_whole = false;
  const size_t a_tokens = a.prompt.size() + ra.tokens.size() - 1;
  auto key = cache::KeyStore::Open(Env::Default(), dir_, {"scheduling", false});
  ASSERT_TRUE(key.ok());
  auto disk = cache::DiskStore::Open(Env::Default(), dir_, *key, {});
  ASSERT_TRUE(disk.ok());
  (*disk)->StartupCheck();
  for (const cache::SavedEntryInfo& e : (*disk)->List())
    found_whole = found_whole || e.n_tokens == a_tokens;
  EXPECT_TRUE(found_whole);
}

// A chat queued when its model was unloaded goes on, from the queue, once
// the model is loaded again from its file: first a prompt sharing its start
// (a copy), then its next turn (the state taken back). The states were made
// by the first load's runner and become the new one's; replies equal full
// re-reads, and the chat is neither re-read nor lost.
TEST_F(SaveSchedulingTest, QueuedChatContinuesAfterItsModelIsLoadedAgain) {
  auto store = OpenStore(Env::Default(), [](SavedCacheOptions& o) { o.background_writer = false; });
  const std::string path = *base_ + "/m0.gguf";
  const std::string notes =
      "shared notes that several chats start with, long enough to be worth reusing; ";
  GenRequest a = Greedy(0, notes + "the chat before the unload", 6);
  Reply ra;
  {
    auto first = LoadedModel::Load(Env::Default(), path, {});
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    auto s = MakeFor(**first, "m0", store.get(), 4, Env::Default());
    ra = Run(*s, a);
  }  // unloaded: the scheduler queued its chat, the model's mapping is gone
  ASSERT_EQ(store->Usage().queued, 1u);
  auto again = LoadedModel::Load(Env::Default(), path, {});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto s = MakeFor(**again, "m0", store.get(), 4, Env::Default());

  GenRequest b = Greedy(0, notes + "a different question", 4);
  Reply rb = Run(*s, b);
  EXPECT_GT(rb.last.cached_tokens, 10);
  EXPECT_EQ(store->Usage().queued, 1u);  // a copy: the chat itself is still queued
  GenRequest a2 = NextTurn(0, a, ra, " and after the reload");
  Reply r2 = Run(*s, a2);
  EXPECT_GE(r2.last.cached_tokens, static_cast<int64_t>(a.prompt.size() + ra.tokens.size()) - 1);
  EXPECT_EQ(store->Usage().queued, 0u);  // taken back
  b.cache_prompt = false;
  a2.cache_prompt = false;
  EXPECT_EQ(Run(*s, b).tokens, rb.tokens);
  EXPECT_EQ(Run(*s, a2).tokens, r2.tokens);
}

// Two model names for one file (an identical copy): a chat that left one's
// pool continues on the other from the write queue, both loaded at once.
TEST_F(SaveSchedulingTest, AnIdenticalFileContinuesAQueuedChat) {
  auto store = OpenStore(Env::Default(), [](SavedCacheOptions& o) { o.background_writer = false; });
  const std::string twin_path = dir_ + "_twin.gguf";
  fs::copy_file(*base_ + "/m0.gguf", twin_path, fs::copy_options::overwrite_existing);
  auto twin = LoadedModel::Load(Env::Default(), twin_path, {});
  ASSERT_TRUE(twin.ok()) << twin.status().ToString();
  auto s0 = Make(0, store.get(), /*slots=*/1, Env::Default());
  auto st = MakeFor(**twin, "twin", store.get(), 1, Env::Default());
  GenRequest a = Greedy(0, "a chat on the first name of the file", 6);
  Reply ra = Run(*s0, a);
  Run(*s0, Greedy(0, "another chat takes the only slot", 3));  // a is queued
  ASSERT_EQ(store->Usage().queued, 1u);
  GenRequest a2 = NextTurn(0, a, ra, " continued on the twin");
  Reply r2 = Run(*st, a2);
  EXPECT_GE(r2.last.cached_tokens, static_cast<int64_t>(a.prompt.size() + ra.tokens.size()) - 1);
  a2.cache_prompt = false;
  EXPECT_EQ(Run(*s0, a2).tokens, r2.tokens);
  st.reset();
  twin->reset();
  fs::remove(twin_path);
}

// A saved chat whose next prompt keeps all of its prompt but not its reply
// (a regenerated reply; or a template that renders the reply differently)
// is superseded by the new turn: its file goes, so the disk never holds the
// same chat twice.
TEST_F(SaveSchedulingTest, ASavedChatCutInsideItsReplyIsSuperseded) {
  auto store = OpenStore(Env::Default(), [](SavedCacheOptions& o) { o.background_writer = false; });
  auto s = Make(0, store.get(), /*slots=*/1, Env::Default());
  GenRequest a = Greedy(0, "a chat that is saved, then its reply is regenerated", 6);
  Run(*s, a);
  Run(*s, Greedy(0, "another chat takes the only slot", 2));
  ASSERT_TRUE(store->WriteOne(
      ComputeModelBinding(
          *models_[0]->model,
          *models::Runner::Create(*models_[0]->model,
                                  {.n_threads = 1, .kv_type = DType::kF16, .n_ctx = 512})
               .value()
               ->layout()),
      nullptr));
  ASSERT_EQ(store->Usage().files, 1u);
  GenRequest again = a;  // the same prompt, another reply so far
  auto other = models_[0]->tokenizer->Encode(" zz qq", false, false);
  again.prompt.insert(again.prompt.end(), other.begin(), other.end());
  Reply r = Run(*s, again);
  EXPECT_GE(r.last.cached_tokens, static_cast<int64_t>(a.prompt.size()));
  EXPECT_EQ(store->Usage().files, 0u);  // the new turn supersedes the file
  s.reset();
  EXPECT_EQ(store->DrainAll(30000), 0u);
  EXPECT_EQ(store->Usage().files, 2u);  // the new turn and the other chat, once each
}

// However far over its byte budget the queue is, no chat is dropped.
TEST_F(SaveSchedulingTest, NothingIsDroppedOverTheQueueBudget) {
  auto store = OpenStore(Env::Default(), [](SavedCacheOptions& o) {
    o.queue_budget_bytes = 1;
    o.background_writer = true;
  });
  auto s = Make(0, store.get(), /*slots=*/1, Env::Default());
  for (int i = 0; i < 12; ++i)
    Run(*s, Greedy(0, "chat number " + std::to_string(i) + " of twelve", 3));
  s.reset();
  EXPECT_EQ(store->DrainAll(30000), 0u);
  EXPECT_EQ(store->Usage().files, 12u);
  EXPECT_EQ(store->Usage().writes, 12u);
}

// While model 0 replies, a chat that left model 1's pool waits (its
// deferral is long): not one byte of it is written during the reply, and it
// is written once the server is idle.
TEST_F(SaveSchedulingTest, SavesWaitWhileAnyModelReplies) {
  WriteLog log;
  auto store = OpenStore(&log, [](SavedCacheOptions& o) { o.defer_ms = 600000; });
  log.gate = &store->gate();
  auto m0 = Make(0, store.get(), 4, &log, /*n_ctx=*/8192);
  auto m1 = Make(1, store.get(), /*slots=*/1, &log);
  // Model 0 replies until the test cancels it (8000 tokens at most).
  auto stream = m0->Submit(Greedy(0, "a long reply on model zero", 8000));
  GenEvent first;
  ASSERT_TRUE(stream->Next(&first));  // model 0 is replying
  Run(*m1, Greedy(1, "model one, first chat", 3));
  Reply evicting = Run(*m1, Greedy(1, "model one, second chat", 3));  // the first one is queued
  // The queued chat waits all through the reply (it cannot have been
  // written: the queue still holds it), then the reply ends.
  EXPECT_EQ(store->Usage().queued, 1u);
  EXPECT_EQ(store->Usage().writes, 0u);
  stream->Cancel();
  Reply r0 = Collect(*stream);
  ASSERT_EQ(r0.last.finish_reason, "cancelled") << "model 0's reply must outlast model 1's chats";
  ASSERT_LT(evicting.last.time_us, r0.last.time_us);
  ASSERT_EQ(store->WaitForWrites(1, 30000), 1u);
  for (uint64_t t : log.Times()) {
    EXPECT_FALSE(t > first.time_us && t < r0.last.time_us)
        << "a write at " << t << " us inside model 0's reply [" << first.time_us << ", "
        << r0.last.time_us << "]";
  }
  EXPECT_EQ(log.appends_during_steps.load(), 0);
  log.gate = nullptr;
}

// Under continuous load (no deferral), chats are written while replies run,
// in slices between forward passes: never during one.
TEST_F(SaveSchedulingTest, UnderLoadSavesRunBetweenForwardPasses) {
  WriteLog log;
  auto store = OpenStore(&log, [](SavedCacheOptions& o) { o.defer_ms = 0; });
  log.gate = &store->gate();
  auto m0 = Make(0, store.get(), 4, &log, /*n_ctx=*/8192);
  auto m1 = Make(1, store.get(), /*slots=*/1, &log);
  // Model 0 replies until the test cancels it (8000 tokens at most).
  auto stream = m0->Submit(Greedy(0, "model zero keeps replying", 8000));
  GenEvent first;
  ASSERT_TRUE(stream->Next(&first));
  for (int i = 0; i < 4; ++i) Run(*m1, Greedy(1, "model one chat " + std::to_string(i), 3));
  // The three chats that left model 1's pool are written while model 0
  // still replies.
  const uint64_t writes_during_reply = store->WaitForWrites(3, 60000);
  const bool still_replying = m0->active() > 0;
  stream->Cancel();
  Reply r0 = Collect(*stream);
  ASSERT_TRUE(still_replying) << "model 0's reply ended before the writes could be observed";
  EXPECT_EQ(r0.last.finish_reason, "cancelled");
  EXPECT_EQ(writes_during_reply, 3u) << "queued " << store->Usage().queued;
  EXPECT_GT(store->Usage().gate.busy_slices, 0u);
  EXPECT_GT(log.appends.load(), 0);
  EXPECT_EQ(log.appends_during_steps.load(), 0);
  log.gate = nullptr;
}

// The pool counts the memory a state holds, not its content: a cut gives
// pages back, growth while in use counts.
TEST_F(SaveSchedulingTest, StateMemoryFollowsItsBackedRows) {
  auto runner = models::Runner::Create(*models_[0]->model,
                                       {.n_threads = 1, .kv_type = DType::kF16, .n_ctx = 2048});
  ASSERT_TRUE(runner.ok());
  auto state = (*runner)->NewSequence();
  const size_t per_token = (*runner)->layout()->kv_bytes_per_token();
  std::vector<models::BatchEntry> batch;
  for (int i = 0; i < 1500; ++i) batch.push_back({state.get(), 5 + i % 50, i == 1499});
  std::vector<float> logits;
  ASSERT_TRUE((*runner)->Forward(batch, &logits).ok());
  const size_t grown = state->MemoryBytes();
  EXPECT_GE(grown, 1500 * per_token);
  EXPECT_LT(grown, 1500 * per_token + (size_t{64} << 10) + state->SizeBytes() - 1500 * per_token);
  ASSERT_TRUE(state->Truncate(100).ok());
  const size_t cut = state->MemoryBytes();
  EXPECT_LT(cut, grown / 4);
  EXPECT_GE(cut, 100 * per_token);
}

}  // namespace
}  // namespace mx::engine

namespace mx::engine {
namespace {

// The hybrid reference model: a queued recurrent state is taken back (cut at
// a snapshot when its last reply differs) and its reply equals a re-read.
TEST(SaveSchedulingHybridTest, QueuedRecurrentChatContinuesFromRam) {
  const std::string dir =
      std::string(::testing::TempDir()) + "/save_scheduling_hybrid_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  auto lm = LoadedModel::Load(
      Env::Default(), std::string(MATRICXON_REF_DIR) + "/models/tiny-hybrid-nemotron_h.gguf", {});
  ASSERT_TRUE(lm.ok()) << lm.status().ToString();
  SavedCacheOptions so;
  so.dir = dir;
  so.passphrase = "hybrid";
  so.check_in_background = false;
  so.background_writer = false;
  auto store = SavedCacheStore::Open(Env::Default(), so);
  ASSERT_TRUE(store.ok());
  SchedulerOptions o;
  o.n_threads = 1;
  o.n_ctx = 512;
  o.model_name = "hybrid";
  o.cache.slots = 1;
  o.cache.saved = store->get();
  auto s = Scheduler::Create(**lm, o, Env::Default());
  ASSERT_TRUE(s.ok());
  auto run = [&](GenRequest r) {
    auto stream = (*s)->Submit(std::move(r));
    std::vector<int32_t> out;
    GenEvent ev;
    GenEvent last;
    while (stream->Next(&ev)) {
      if (ev.has_token) out.push_back(ev.token);
      if (ev.final) last = ev;
    }
    EXPECT_TRUE(last.status.ok()) << last.status.ToString();
    return std::make_pair(out, last.cached_tokens);
  };
  GenRequest a;
  a.prompt =
      (*lm)->tokenizer->Encode("a hybrid chat that leaves the pool and comes back", true, true);
  a.sampling.temperature = 0;
  a.max_tokens = 5;
  a.ignore_eos = true;
  auto [reply_a, cached_a] = run(a);
  GenRequest b = a;
  b.prompt = (*lm)->tokenizer->Encode("another chat takes the only slot", true, true);
  run(b);
  ASSERT_EQ((*store)->Usage().queued, 1u);
  GenRequest a2 = a;
  a2.prompt.insert(a2.prompt.end(), reply_a.begin(), reply_a.end());
  auto more = (*lm)->tokenizer->Encode(" and then?", false, false);
  a2.prompt.insert(a2.prompt.end(), more.begin(), more.end());
  auto [reply2, cached2] = run(a2);
  EXPECT_GE(cached2, static_cast<int64_t>(a.prompt.size()));
  a2.cache_prompt = false;
  EXPECT_EQ(run(a2).first, reply2);
  s->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mx::engine
