// Saved caches through the engine (SPEC §5): states leaving the RAM pool are
// written only while the model's loop is idle, an unload flushes the pool,
// a fresh store (a restart) loads them back and the reply is unchanged,
// another model's files are never used, turning saving off deletes files.
#include "engine/saved_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include <random>

#include "cache/policy/cache_policy.h"
#include "core/fault_env.h"
#include "engine/prompt_cache.h"
#include "engine/scheduler.h"
#include "models/synthetic_model.h"

namespace mx::engine {
namespace {

namespace fs = std::filesystem;

// Records, at every append to a saved-cache file (sealed data written),
// whether the model had an active request (it never may). The fsync and
// rename that publish a file wait on the disk, not the CPU, and may overlap
// the first steps of a reply that starts meanwhile; they are not counted.
class RecordingEnv : public EnvWrapper {
 public:
  RecordingEnv() : EnvWrapper(Env::Default()) {}
  std::atomic<const ComputeGate*> gate{nullptr};
  std::atomic<int> writes{0};
  std::atomic<int> writes_during_step{0};

  void Record() {
    const ComputeGate* g = gate.load();
    if (g != nullptr && g->steps_running() > 0) ++writes_during_step;
    {
      std::lock_guard<std::mutex> lock(mu);
      write_times_us.push_back(NowMicros());
      ++writes;
    }
    written.notify_all();
  }
  std::vector<uint64_t> WriteTimes() {
    std::lock_guard<std::mutex> lock(mu);
    return write_times_us;
  }
  // Blocks until a write after the first `seen` ones is recorded, or 100 ms
  // pass (then the caller looks at the store again); returns the count.
  int WaitForWriteAfter(int seen) {
    std::unique_lock<std::mutex> lock(mu);
    written.wait_for(lock, std::chrono::milliseconds(100), [&] { return writes.load() > seen; });
    return writes.load();
  }

  std::mutex mu;
  std::condition_variable written;
  std::vector<uint64_t> write_times_us;  // every append to a saved cache

  class File : public WritableFile {
   public:
    File(RecordingEnv* env, std::unique_ptr<WritableFile> base) : env_(env), base_(std::move(base)) {}
    Status Append(std::string_view data) override {
      env_->Record();
      return base_->Append(data);
    }
    Status Sync() override { return base_->Sync(); }
    Status Close() override { return base_->Close(); }
    const std::string& path() const override { return base_->path(); }

   private:
    RecordingEnv* env_;
    std::unique_ptr<WritableFile> base_;
  };

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path, uint32_t mode,
                                                        bool exclusive) override {
    MX_ASSIGN_OR_RETURN(auto f, target()->NewWritableFile(path, mode, exclusive));
    if (path.find(".mxpc") == std::string::npos) return f;
    return std::unique_ptr<WritableFile>(new File(this, std::move(f)));
  }
};

// A clock that stands still except when a saved cache is published (its
// rename), which takes exactly kWriteUs: time limits are then counted in
// files, whatever the machine's speed.
class SteppingClockEnv : public EnvWrapper {
 public:
  static constexpr uint64_t kWriteUs = 10'000;
  SteppingClockEnv() : EnvWrapper(Env::Default()) {}
  uint64_t NowMicros() override { return now_us_.load(); }
  Status RenameFile(const std::string& from, const std::string& to) override {
    if (to.find(".mxpc") != std::string::npos) now_us_ += kWriteUs;
    return target()->RenameFile(from, to);
  }

 private:
  std::atomic<uint64_t> now_us_{1'000'000};
};

class SavedCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string base = std::string(::testing::TempDir()) + "/saved_cache_test_" + std::to_string(getpid());
    fs::create_directories(base);
    paths_ = new std::string[2]{base + "/a.gguf", base + "/b.gguf"};
    for (int i = 0; i < 2; ++i) {
      models::SyntheticSpec spec;
      spec.seed = 1 + i;
      ASSERT_TRUE(models::WriteSyntheticModel(Env::Default(), spec, paths_[i]).ok());
      auto lm = LoadedModel::Load(Env::Default(), paths_[i], {});
      ASSERT_TRUE(lm.ok()) << lm.status().ToString();
      models_[i] = std::move(lm).value().release();
    }
  }
  static void TearDownTestSuite() {
    for (auto* m : models_) delete m;
    fs::remove_all(fs::path(paths_[0]).parent_path());
    delete[] paths_;
  }
  void SetUp() override {
    dir_ = std::string(::testing::TempDir()) + "/saved_cache_dir_" + std::to_string(getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // writer: the background writer thread; without it only WriteOne /
  // Drain / DrainAll write.
  std::unique_ptr<SavedCacheStore> OpenStore(Env* env, std::string passphrase = "test passphrase",
                                             bool writer = true) {
    SavedCacheOptions o;
    o.dir = dir_;
    o.background_writer = writer;
    o.passphrase = std::move(passphrase);
    o.check_in_background = false;
    o.min_gain_tokens = 4;
    auto s = SavedCacheStore::Open(env, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  static std::unique_ptr<Scheduler> Make(int which, SavedCacheStore* store, int slots = 4, int parallel = 2,
                                         Env* env = Env::Default()) {
    SchedulerOptions o;
    o.n_threads = 1;
    o.n_ctx = 512;
    o.n_parallel = parallel;
    o.model_name = "test";
    o.cache.slots = slots;
    o.cache.saved = store;
    auto s = Scheduler::Create(*models_[which], o, env);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  static GenRequest Greedy(int which, const std::string& text, int64_t max_tokens, bool cache = true) {
    GenRequest r;
    r.prompt = models_[which]->tokenizer->Encode(text, true, true);
    r.sampling.temperature = 0;
    r.max_tokens = max_tokens;
    r.cache_prompt = cache;
    r.ignore_eos = true;
    return r;
  }
  struct Reply {
    std::vector<int32_t> tokens;
    GenEvent last;
    uint64_t first_us = 0;  // when the loop queued the first event (compute side)
  };
  static Reply Run(Scheduler& s, GenRequest r) {
    auto stream = s.Submit(std::move(r));
    Reply out;
    GenEvent ev;
    while (stream->Next(&ev)) {
      if (out.first_us == 0) out.first_us = ev.time_us;
      if (ev.has_token) out.tokens.push_back(ev.token);
      if (ev.final) out.last = ev;
    }
    EXPECT_TRUE(out.last.status.ok()) << out.last.status.ToString();
    return out;
  }
  size_t SavedFiles() const {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) n += e.path().extension() == ".mxpc";
    return n;
  }

  static std::string* paths_;
  static LoadedModel* models_[2];
  std::string dir_;
};
std::string* SavedCacheTest::paths_ = nullptr;
LoadedModel* SavedCacheTest::models_[2] = {nullptr, nullptr};

const char kChat[] =
    "The prompt cache keeps the state of every chat so that the next turn reads only the new tokens; "
    "saved caches keep it across restarts.";

TEST_F(SavedCacheTest, UnloadFlushesAndARestartLoadsItBack) {
  GenRequest first = Greedy(0, kChat, 6);
  std::vector<int32_t> next;
  {
    auto store = OpenStore(Env::Default());
    auto s = Make(0, store.get());
    Reply r = Run(*s, first);
    next = first.prompt;
    next.insert(next.end(), r.tokens.begin(), r.tokens.end());
    s.reset();  // unload: the pool goes to the write queue
    EXPECT_EQ(store->DrainAll(30000), 0u);
    EXPECT_EQ(store->Usage().files, 1u);
  }
  EXPECT_EQ(SavedFiles(), 1u);
  auto more = models_[0]->tokenizer->Encode(" And then?", false, false);
  next.insert(next.end(), more.begin(), more.end());

  auto store = OpenStore(Env::Default());  // a fresh process: checks and indexes the file
  auto s = Make(0, store.get());
  GenRequest again = first;
  again.prompt = next;
  Reply cached = Run(*s, again);
  EXPECT_GE(cached.last.cached_tokens, static_cast<int64_t>(first.prompt.size()));
  again.cache_prompt = false;
  Reply fresh = Run(*s, again);
  EXPECT_EQ(cached.tokens, fresh.tokens);
}

TEST_F(SavedCacheTest, AnotherModelNeverLoadsTheFile) {
  GenRequest first = Greedy(0, kChat, 4);
  auto store = OpenStore(Env::Default());
  {
    auto s = Make(0, store.get());
    Run(*s, first);
  }
  ASSERT_EQ(store->DrainAll(30000), 0u);
  ASSERT_EQ(store->Usage().files, 1u);
  auto s = Make(1, store.get());  // another file, the same shape
  GenRequest other = Greedy(1, std::string(kChat) + " More.", 4);
  Reply r = Run(*s, other);
  EXPECT_EQ(r.last.cached_tokens, 0);
  const cache::ModelBinding b = ComputeModelBinding(*models_[1]->model, *models::Runner::Create(
      *models_[1]->model, {.n_threads = 1, .kv_type = DType::kF16, .n_ctx = 512}).value()->layout());
  EXPECT_EQ(store->Find(b, other.prompt).why_none, "the saved cache was made by another model");
  GenRequest off = other;
  off.cache_prompt = false;
  EXPECT_EQ(Run(*s, off).tokens, r.tokens);
}

TEST_F(SavedCacheTest, BindingIsTheFileContentAndTheLayout) {
  auto layout = [](int64_t n_ctx, DType kv = DType::kF16) {
    return models::StateLayout::ForModel(models_[0]->model->config(), kv, n_ctx);
  };
  ThreadPool pool(3);
  const cache::ModelBinding a = ComputeModelBinding(*models_[0]->model, layout(512));
  EXPECT_EQ(a, ComputeModelBinding(*models_[0]->model, layout(512), &pool));
  EXPECT_EQ(a.model_fingerprint.rfind("sha256x64m:", 0), 0u);
  EXPECT_EQ(a.model_fingerprint.size(), 11u + 64u);
  // Another file of the same shape, or another state layout: another binding.
  EXPECT_NE(a.model_fingerprint, ComputeModelBinding(*models_[1]->model, layout(512)).model_fingerprint);
  EXPECT_NE(a, ComputeModelBinding(*models_[0]->model, layout(512, DType::kF32)));
}

TEST_F(SavedCacheTest, WritesNeverOverlapAReply) {
  RecordingEnv env;
  auto store = OpenStore(&env);
  auto s = Make(0, store.get(), /*slots=*/1, /*parallel=*/2, &env);
  env.gate = &store->gate();
  // Two users at once with one RAM slot: every commit evicts the other
  // chat while a reply is running; its write must wait for idle time.
  std::vector<Reply> replies;
  for (int round = 0; round < 4; ++round) {
    Reply second;
    std::thread other([&] { second = Run(*s, Greedy(0, "second user, round " + std::to_string(round), 12)); });
    replies.push_back(Run(*s, Greedy(0, std::string(kChat) + " round " + std::to_string(round), 12)));
    other.join();
    replies.push_back(second);
  }
  // The idle loop writes the evicted chats one by one; wait for the queue to
  // empty, woken by each write (the deadline only keeps a broken build from
  // hanging; it bounds nothing).
  const uint64_t give_up_us = Env::Default()->NowMicros() + 120'000'000;
  for (int seen = env.writes.load(); store->Usage().queued > 0 && Env::Default()->NowMicros() < give_up_us;) {
    seen = env.WaitForWriteAfter(seen);
  }
  EXPECT_EQ(store->Usage().queued, 0u);
  EXPECT_GT(env.writes.load(), 0);
  // Sampled at every write: no forward pass was running. (A request may
  // already be admitted then: a slice begun while the server was idle ends
  // before the request's first step, which waits for it.)
  EXPECT_EQ(env.writes_during_step.load(), 0);
  // And by the clock: no write falls between a reply's first and final
  // events as the compute loop queued them.
  for (uint64_t w : env.WriteTimes()) {
    for (const Reply& r : replies) {
      ASSERT_GT(r.first_us, 0u);
      EXPECT_FALSE(w > r.first_us && w < r.last.time_us)
          << "a write at " << w << " us inside a reply [" << r.first_us << ", " << r.last.time_us << "]";
    }
  }
  env.gate = nullptr;
}

// The limit is checked before each file: a file once begun is finished, the
// rest of the queue is dropped. On a clock where each write takes 10 ms, a
// 0 ms limit writes one file of three and a 15 ms limit two.
TEST_F(SavedCacheTest, DrainStopsAtItsTimeLimit) {
  const cache::ModelBinding model{"sha256:test", 7};
  auto enqueue = [&](SavedCacheStore& store, int n, int tag) {
    for (int i = 0; i < n; ++i) {
      auto state = std::make_unique<models::SequenceState>(std::make_shared<models::StateLayout>(
          models::StateLayout::ForModel(models_[0]->model->config(), DType::kF16, 64)));
      store.Enqueue({model, {1, 2, tag, i}, std::move(state)});
    }
  };
  for (const auto& [timeout_ms, expect_written] : {std::pair<uint64_t, size_t>{0, 1}, {15, 2}, {1000, 3}}) {
    SCOPED_TRACE(::testing::Message() << "limit " << timeout_ms << " ms");
    fs::remove_all(dir_);
    SteppingClockEnv clock;
    auto store = OpenStore(&clock, "test passphrase", /*writer=*/false);
    enqueue(*store, 3, static_cast<int>(timeout_ms));
    ASSERT_TRUE(store->HasPending(model));
    EXPECT_EQ(store->Drain(model, timeout_ms, nullptr), expect_written);
    EXPECT_EQ(store->Usage().files, expect_written);
    EXPECT_EQ(SavedFiles(), expect_written);
    EXPECT_FALSE(store->HasPending(model));
    EXPECT_EQ(store->Usage().queued, 0u);
  }
}

TEST_F(SavedCacheTest, DiskFullDropsTheWriteAndChatsGoOn) {
  FaultEnv env(Env::Default());
  auto store = OpenStore(&env);
  auto s = Make(0, store.get(), 4, 2, &env);
  Run(*s, Greedy(0, kChat, 4));
  env.FailNth(FaultEnv::kAppend, 1, ENOSPC);
  s.reset();  // the flush meets a full disk
  EXPECT_EQ(store->DrainAll(30000), 0u);
  EXPECT_EQ(store->Usage().files, 0u);
  EXPECT_EQ(store->Drain({"sha256:none", 1}, 1000, nullptr), 0u);
  EXPECT_EQ(store->Usage().queued, 0u);
  EXPECT_EQ(SavedFiles(), 0u);
  for (const auto& e : fs::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();  // no temporary left
  }
  env.ClearFaults();
  s = Make(0, store.get(), 4, 2, &env);  // and the next chats are saved again
  Reply r = Run(*s, Greedy(0, kChat, 4));
  EXPECT_EQ(r.last.cached_tokens, 0);
  s.reset();
  EXPECT_EQ(store->DrainAll(30000), 0u);
  EXPECT_EQ(store->Usage().files, 1u);
}

TEST_F(SavedCacheTest, TurningOffDeletesEverySavedFile) {
  auto store = OpenStore(Env::Default());
  {
    auto s = Make(0, store.get());
    Run(*s, Greedy(0, kChat, 4));
    Run(*s, Greedy(0, "another chat entirely", 4));
  }
  ASSERT_EQ(store->DrainAll(30000), 0u);
  ASSERT_EQ(SavedFiles(), 2u);
  auto removed = store->SetEnabled(false);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->files, 2u);
  EXPECT_EQ(SavedFiles(), 0u);
  EXPECT_FALSE(store->enabled());
  EXPECT_EQ(store->Find({"x", 1}, std::vector<int32_t>{1, 2, 3}).why_none, "the disk cache is off");
  ASSERT_TRUE(store->SetEnabled(true).ok());
  EXPECT_TRUE(store->enabled());
}

TEST_F(SavedCacheTest, ShrinkingTheBudgetEvictsAtOnce) {
  auto store = OpenStore(Env::Default());
  {
    auto s = Make(0, store.get());
    Run(*s, Greedy(0, kChat, 4));
    Run(*s, Greedy(0, "another chat entirely", 4));
  }
  ASSERT_EQ(store->DrainAll(30000), 0u);
  ASSERT_EQ(store->Usage().files, 2u);
  auto removed = store->SetLimits(1, 0);  // 1 byte: nothing fits
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->files, 2u);
  EXPECT_EQ(store->Usage().files, 0u);
}

TEST_F(SavedCacheTest, ClusterNodeWithoutPassphraseSavesNothing) {
  SavedCacheOptions o;
  o.dir = dir_;
  o.cluster_node = true;
  auto store = SavedCacheStore::Open(Env::Default(), o);
  ASSERT_TRUE(store.ok());
  EXPECT_FALSE((*store)->enabled());
  EXPECT_NE((*store)->disabled_reason().find("cluster node"), std::string::npos);
  EXPECT_FALSE(fs::exists(fs::path(dir_) / "prompt_cache.key"));
  EXPECT_FALSE((*store)->SetEnabled(true).ok());
}

// The reference models (dense, BF16, hybrid with recurrent snapshots): with
// one RAM slot every other turn comes back from disk, and every greedy reply
// equals the reply read from scratch.
class SavedCacheRefTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto model = models::Model::Load(Env::Default(), std::string(MATRICXON_REF_DIR) + "/models/" + GetParam() + ".gguf",
                                     {.progress = nullptr, .prefault = false});
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::move(model).value();
    auto runner = models::Runner::Create(*model_, {.n_threads = 2, .kv_type = DType::kF16, .n_ctx = 1024});
    ASSERT_TRUE(runner.ok());
    runner_ = std::move(runner).value();
    dir_ = std::string(::testing::TempDir()) + "/saved_cache_ref_" + std::to_string(getpid());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Reads prompt[from:] and generates n tokens greedily (the last one is
  // returned, not read).
  std::vector<int32_t> Generate(models::SequenceState& state, const std::vector<int32_t>& prompt, int64_t from,
                                int n) {
    PlanStateSnapshots(state, {.prompt_len = static_cast<int64_t>(prompt.size()), .n_reused = from},
                       SnapshotLimitsFor({}, *runner_->layout()));
    std::vector<models::BatchEntry> batch;
    for (size_t i = static_cast<size_t>(from); i < prompt.size(); ++i) {
      batch.push_back({&state, prompt[i], i + 1 == prompt.size()});
    }
    std::vector<int32_t> out;
    std::vector<float> logits;
    for (int step = 0; step < n; ++step) {
      EXPECT_TRUE(runner_->Forward(batch, &logits).ok());
      int32_t tok = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      out.push_back(tok);
      batch = {{&state, tok, true}};
    }
    return out;
  }

  std::unique_ptr<models::Model> model_;
  std::unique_ptr<models::Runner> runner_;
  std::string dir_;
};

TEST_P(SavedCacheRefTest, RepliesFromDiskEqualFreshReads) {
  SavedCacheOptions so;
  so.dir = dir_;
  so.passphrase = "ref";
  so.check_in_background = false;
  so.background_writer = false;  // WriteOnePending below writes every turn
  so.min_gain_tokens = 4;
  auto store = SavedCacheStore::Open(Env::Default(), so);
  ASSERT_TRUE(store.ok());
  PromptCacheOptions po;
  po.slots = 1;
  DiskLevel disk{store->get(), ComputeModelBinding(*model_, *runner_->layout()), nullptr};
  PromptCache cache(*runner_, po, Env::Default(), {}, disk);

  std::mt19937 rng(99);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % 4000);
    return t;
  };
  std::vector<std::vector<int32_t>> chats(3);
  int from_disk = 0;
  for (int turn = 0; turn < 9; ++turn) {
    std::vector<int32_t>& chat = chats[static_cast<size_t>(turn % 3)];
    auto more = random_tokens(10 + turn);
    chat.insert(chat.end(), more.begin(), more.end());
    auto ticket = cache.Start(chat, true, false);
    ASSERT_TRUE(ticket.ok()) << ticket.status().ToString();
    from_disk += ticket->log_line().find("from disk") != std::string::npos;
    auto reply = Generate(ticket->state(), chat, ticket->n_reused(), 4);
    auto fresh_state = runner_->NewSequence();
    ASSERT_EQ(reply, Generate(*fresh_state, chat, 0, 4)) << "turn " << turn << ": " << ticket->log_line();
    std::vector<int32_t> held = chat;
    held.insert(held.end(), reply.begin(), reply.end() - 1);
    cache.Finish(std::move(ticket).value(), held, static_cast<int64_t>(chat.size()));
    chat.insert(chat.end(), reply.begin(), reply.end());
    while (cache.WriteOnePending()) {
    }
  }
  EXPECT_GE(from_disk, 5);  // every chat's later turns
}

// A chat waiting in the write queue is taken back only where its state can
// be cut: a hybrid state without a snapshot within the shared start stays
// queued (and is written) instead of being taken back and lost; a dense one
// is cut anywhere and continues from RAM.
TEST_P(SavedCacheRefTest, QueuedChatIsTakenBackOnlyWhereItCanBeCut) {
  SavedCacheOptions so;
  so.dir = dir_;
  so.passphrase = "ref";
  so.check_in_background = false;
  so.background_writer = false;
  so.min_gain_tokens = 4;
  auto store = SavedCacheStore::Open(Env::Default(), so);
  ASSERT_TRUE(store.ok());
  PromptCacheOptions po;
  po.slots = 1;
  DiskLevel disk{store->get(), ComputeModelBinding(*model_, *runner_->layout()), nullptr};
  PromptCache cache(*runner_, po, Env::Default(), {}, disk);
  // Reads the prompt (no snapshots) and hands back prompt + 3 reply tokens.
  auto serve = [&](const std::vector<int32_t>& prompt) {
    auto ticket = cache.Start(prompt, true, false);
    EXPECT_TRUE(ticket.ok()) << ticket.status().ToString();
    if (!ticket.ok()) return std::string();
    std::vector<models::BatchEntry> batch;
    for (size_t i = static_cast<size_t>(ticket->n_reused()); i < prompt.size(); ++i) {
      batch.push_back({&ticket->state(), prompt[i], i + 1 == prompt.size()});
    }
    std::vector<float> logits;
    std::vector<int32_t> held = prompt;
    for (int32_t t : {7, 8, 9}) {
      EXPECT_TRUE(runner_->Forward(batch, &logits).ok());
      held.push_back(t);
      batch = {{&ticket->state(), t, true}};
    }
    EXPECT_TRUE(runner_->Forward(batch, &logits).ok());
    std::string log = ticket->log_line();
    cache.Finish(std::move(ticket).value(), held, static_cast<int64_t>(prompt.size()));
    return log;
  };
  std::vector<int32_t> a(40), b(30);
  for (int i = 0; i < 40; ++i) a[static_cast<size_t>(i)] = 100 + i;
  for (int i = 0; i < 30; ++i) b[static_cast<size_t>(i)] = 2000 + i;
  serve(a);
  serve(b);  // a leaves the only slot for the write queue
  ASSERT_EQ((*store)->Usage().queued, 1u);
  // a's prompt again with another reply: the whole prompt is shared.
  std::vector<int32_t> again = a;
  again.insert(again.end(), {3, 4});
  const std::string log = serve(again);
  if (runner_->layout()->n_recurrent > 0) {
    EXPECT_EQ(log.find("write queue"), std::string::npos) << log;
    EXPECT_EQ((*store)->Usage().queued, 2u) << log;  // a, and b that left for `again`
    EXPECT_EQ((*store)->Usage().files, 0u);
    EXPECT_TRUE(cache.WriteOnePending());
    EXPECT_EQ((*store)->Usage().files, 1u);
  } else {
    EXPECT_NE(log.find("reused 40 of 42 tokens from RAM (taken back from the write queue"),
              std::string::npos)
        << log;
    EXPECT_EQ((*store)->Usage().queued, 1u) << log;  // b only
  }
}

INSTANTIATE_TEST_SUITE_P(Models, SavedCacheRefTest,
                         ::testing::Values("tiny-llama", "tiny-qwen2-bf16", "tiny-hybrid-nemotron_h"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

}  // namespace
}  // namespace mx::engine
