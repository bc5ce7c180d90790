#include "server/model_manager.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <filesystem>

#include "fifo_trap.h"
#include "models/synthetic_model.h"

namespace mx::server {
namespace {

namespace fs = std::filesystem;

// The default Env with a clock the test moves by hand.
class FakeClockEnv : public Env {
 public:
  Result<std::unique_ptr<MappedFile>> MapReadOnly(const std::string& p) override {
    if (!gated_suffix.empty() && p.ends_with(gated_suffix)) {
      ++gated_maps;
      std::unique_lock<std::mutex> lock(gate_mu);
      gate_cv.wait(lock, [&] { return gate_open; });
    }
    return base_->MapReadOnly(p);
  }
  // Maps of a file whose path ends with gated_suffix wait until OpenGate().
  void CloseGate(const std::string& suffix) {
    std::lock_guard<std::mutex> lock(gate_mu);
    gate_open = false;
    gated_maps = 0;
    gated_suffix = suffix;
  }
  void OpenGate() {
    {
      std::lock_guard<std::mutex> lock(gate_mu);
      gate_open = true;
    }
    gate_cv.notify_all();
  }
  Result<std::string> ReadFile(const std::string& p) override { return base_->ReadFile(p); }
  Status WriteFileAtomic(const std::string& p, std::string_view d, uint32_t m) override {
    return base_->WriteFileAtomic(p, d, m);
  }
  bool FileExists(const std::string& p) override { return base_->FileExists(p); }
  Result<uint64_t> FileSize(const std::string& p) override { return base_->FileSize(p); }
  Status CreateDirs(const std::string& p, uint32_t m) override { return base_->CreateDirs(p, m); }
  Result<std::vector<std::string>> ListDir(const std::string& p) override { return base_->ListDir(p); }
  Status RemoveFile(const std::string& p) override { return base_->RemoveFile(p); }
  Result<FileInfo> GetFileInfo(const std::string& p) override { return base_->GetFileInfo(p); }
  Result<FileInfo> GetLinkInfo(const std::string& p) override { return base_->GetLinkInfo(p); }
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& p,
                                                                OpenOptions o = {}) override {
    return base_->NewRandomAccessFile(p, o);
  }
  uint64_t NowMicros() override { return now_us.load(); }
  uint64_t WallMicros() override { return base_->WallMicros(); }
  void SleepMicros(uint64_t us) override { base_->SleepMicros(us); }
  Status RandomBytes(void* buf, size_t n) override { return base_->RandomBytes(buf, n); }

  std::atomic<uint64_t> now_us{1000000};
  std::string gated_suffix;  // set before the threads that map start
  std::atomic<int> gated_maps{0};
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  bool gate_open = true;

 private:
  Env* base_ = Env::Default();
};

class ModelManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::path(::testing::TempDir()) / ("mx_mm_" + std::to_string(getpid()))).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    models::SyntheticSpec spec;
    spec.n_layer = 1;
    spec.n_vocab = 512;
    ASSERT_TRUE(models::WriteSyntheticModel(Env::Default(), spec, dir_ + "/a.gguf").ok());
    ASSERT_TRUE(models::WriteSyntheticModel(Env::Default(), spec, dir_ + "/b.gguf").ok());
    std::FILE* f = std::fopen((dir_ + "/notes.txt").c_str(), "w");
    std::fclose(f);
  }
  void TearDown() override { fs::remove_all(dir_); }

  ModelManagerOptions Options(int max_loaded, int64_t keep_alive_s) {
    ModelManagerOptions o;
    o.models_dir = dir_;
    o.max_loaded = max_loaded;
    o.keep_alive_s = keep_alive_s;
    o.scheduler.n_ctx = 128;
    return o;
  }
  static bool Loaded(ModelManager& m, const std::string& name) {
    auto list = m.List();
    for (const auto& i : *list) {
      if (i.name == name) return i.loaded;
    }
    return false;
  }

  std::string dir_;
  FakeClockEnv env_;
};

TEST_F(ModelManagerTest, ListsGgufFilesByName) {
  ModelManager m(&env_, Options(2, 0));
  auto list = m.List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "a");
  EXPECT_EQ((*list)[1].name, "b");
  EXPECT_FALSE((*list)[0].loaded);
}

TEST_F(ModelManagerTest, AFifoNamedLikeAModelIsNeitherListedNorOpened) {
  testing_support::FifoTrap fifo(dir_ + "/foo.gguf");
  ASSERT_TRUE(fifo.ok());
  fs::create_directory(dir_ + "/folder.gguf");
  fs::create_symlink(dir_ + "/a.gguf", dir_ + "/linked.gguf");  // users do that: followed
  fs::create_symlink(dir_ + "/foo.gguf", dir_ + "/to_fifo.gguf");
  ModelManager m(&env_, Options(2, 0));
  auto list = m.List();
  ASSERT_TRUE(list.ok());
  std::vector<std::string> names;
  for (const auto& i : *list) names.push_back(i.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "linked"}));
  for (const std::string name : {"foo", "to_fifo", "folder"}) {
    auto acquired = m.Acquire(name);
    ASSERT_FALSE(acquired.ok()) << name;
    EXPECT_EQ(acquired.status().code(), Status::Code::kNotFound) << name;
    EXPECT_NE(acquired.status().message().find("not a model file"), std::string::npos)
        << acquired.status().ToString();
  }
  EXPECT_FALSE(fifo.hung()) << "loading opened the FIFO";
  // The load lock was not left held: other models still load.
  EXPECT_TRUE(m.Acquire("linked").ok());
  EXPECT_TRUE(m.Acquire("b").ok());
}

TEST_F(ModelManagerTest, UnknownModelIsNotFound) {
  ModelManager m(&env_, Options(2, 0));
  EXPECT_EQ(m.Acquire("zzz").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(m.Acquire("../a").status().code(), Status::Code::kNotFound);
  EXPECT_EQ(m.Unload("zzz").code(), Status::Code::kNotFound);
}

TEST_F(ModelManagerTest, LoadingBeyondTheLimitUnloadsTheLeastRecentlyUsed) {
  ModelManager m(&env_, Options(1, 0));
  ASSERT_TRUE(m.Acquire("a").ok());
  EXPECT_TRUE(Loaded(m, "a"));
  ASSERT_TRUE(m.Acquire("b").ok());
  EXPECT_FALSE(Loaded(m, "a"));
  EXPECT_TRUE(Loaded(m, "b"));
}

TEST_F(ModelManagerTest, BusyModelsAreNotUnloadedForAnother) {
  ModelManager m(&env_, Options(1, 0));
  auto a = m.Acquire("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(m.Acquire("b").status().code(), Status::Code::kResourceExhausted);
}

TEST_F(ModelManagerTest, IdleModelsUnloadAfterKeepAlive) {
  ModelManager m(&env_, Options(2, 10));
  ASSERT_TRUE(m.Acquire("a").ok());
  env_.now_us += 5000000;
  m.UnloadIdle();
  EXPECT_TRUE(Loaded(m, "a"));
  env_.now_us += 6000000;
  m.UnloadIdle();
  EXPECT_FALSE(Loaded(m, "a"));
}

TEST_F(ModelManagerTest, UnloadWaitsForTheLastUser) {
  ModelManager m(&env_, Options(2, 0));
  auto held = m.Acquire("a");
  ASSERT_TRUE(held.ok());
  std::atomic<bool> unloaded{false};
  std::thread t([&] {
    EXPECT_TRUE(m.Unload("a").ok());
    unloaded = true;
  });
  Env::Default()->SleepMicros(100000);
  EXPECT_FALSE(unloaded.load());
  held = Status::Internal("released");
  t.join();
  EXPECT_TRUE(unloaded.load());
  EXPECT_FALSE(Loaded(m, "a"));
}

// A model whose load is slow (its file is slow to map) delays neither
// another model's load nor anything else; a second request for it shares
// the load in progress.
TEST_F(ModelManagerTest, ALoadNeverWaitsForAnotherModelsLoad) {
  ModelManager m(&env_, Options(2, 0));
  ASSERT_TRUE(m.List().ok());  // remembers which files are projectors
  env_.CloseGate("/a.gguf");
  auto first = std::async(std::launch::async, [&] { return m.Acquire("a"); });
  while (env_.gated_maps.load() == 0) Env::Default()->SleepMicros(1000);
  auto second = std::async(std::launch::async, [&] { return m.Acquire("a"); });
  auto other = std::async(std::launch::async, [&] { return m.Acquire("b"); });
  const bool other_done = other.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  EXPECT_TRUE(other_done) << "loading b waited for a's load";
  EXPECT_TRUE(Loaded(m, "b"));
  EXPECT_FALSE(Loaded(m, "a"));
  EXPECT_EQ(first.wait_for(std::chrono::milliseconds(0)), std::future_status::timeout);
  env_.OpenGate();
  auto a1 = first.get();
  auto a2 = second.get();
  ASSERT_TRUE(a1.ok()) << a1.status().ToString();
  ASSERT_TRUE(a2.ok()) << a2.status().ToString();
  EXPECT_EQ(a1->get(), a2->get());       // one load, shared
  EXPECT_EQ(env_.gated_maps.load(), 1);  // a's file was mapped once
  if (other_done) {
    EXPECT_TRUE(other.get().ok());
  }
}

// Models loading count against max_loaded like models loaded.
TEST_F(ModelManagerTest, ModelsLoadingCountAgainstTheLimit) {
  ModelManager m(&env_, Options(1, 0));
  ASSERT_TRUE(m.List().ok());
  env_.CloseGate("/a.gguf");
  auto first = std::async(std::launch::async, [&] { return m.Acquire("a"); });
  while (env_.gated_maps.load() == 0) Env::Default()->SleepMicros(1000);
  auto b = m.Acquire("b");
  EXPECT_EQ(b.status().code(), Status::Code::kResourceExhausted) << b.status().ToString();
  env_.OpenGate();
  EXPECT_TRUE(first.get().ok());
}

// Stop() refuses new loads at once (the server is shutting down) and leaves
// loaded models to the requests that hold them.
TEST_F(ModelManagerTest, StopRefusesNewLoads) {
  ModelManager m(&env_, Options(2, 0));
  ASSERT_TRUE(m.Acquire("a").ok());
  m.Stop();
  auto b = m.Acquire("b");
  EXPECT_EQ(b.status().code(), Status::Code::kResourceExhausted);
  EXPECT_NE(b.status().message().find("stopping"), std::string::npos) << b.status().ToString();
  EXPECT_TRUE(m.Acquire("a").ok());
}

// A vision projector (by name or by header) is no model: NotFound, and
// nothing is loaded or unloaded for it.
TEST_F(ModelManagerTest, ProjectorsAreNotModels) {
  ModelManager m(&env_, Options(1, 0));
  ASSERT_TRUE(m.Acquire("a").ok());
  fs::copy_file(dir_ + "/b.gguf", dir_ + "/a.mmproj.gguf");
  fs::copy_file(dir_ + "/b.gguf", dir_ + "/mmproj-a.gguf");
  for (const std::string name : {"a.mmproj", "mmproj-a"}) {
    auto r = m.Acquire(name);
    EXPECT_EQ(r.status().code(), Status::Code::kNotFound) << name << ": " << r.status().ToString();
  }
  EXPECT_TRUE(Loaded(m, "a"));
}

}  // namespace
}  // namespace mx::server
