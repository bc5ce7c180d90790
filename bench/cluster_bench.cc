// Cluster costs (Google Benchmark, docs/cluster.md): one folder holding
// 10,000 small sealed files written by "node A", read by "node B" (a second
// DiskStore on the same folder, same key):
//
//   RefreshNothingNew     B's refresh when it already knows all 10,000
//                         files: one listing and a set difference
//   RefreshNew/N          B's refresh when A wrote N new files since (and
//                         removed N old ones, so the folder stays at 10,000):
//                         the listing + header and metadata check of N files
//   RestoreFromOtherNode  A saves a 32 MiB chat; B refreshes and loads it
//                         (every chunk read and opened on all threads)
//
// The 10,000 files are written once into $TMPDIR (default /tmp) with fsync
// turned off for the setup only (an Env whose syncs are no-ops).
//   build/bench/cluster_bench
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cache/disk_store/disk_store.h"
#include "core/logging.h"
#include "core/thread_pool.h"

namespace {

using namespace mx;
using namespace mx::cache;

constexpr int kFiles = 10000;
const ModelBinding kModel{"sha256x64m:bench", 0x42};

// Syncs are no-ops: only to write the 10,000 files of the setup quickly.
class NoSyncEnv : public EnvWrapper {
 public:
  NoSyncEnv() : EnvWrapper(Env::Default()) {}
  class File : public WritableFile {
   public:
    explicit File(std::unique_ptr<WritableFile> f) : f_(std::move(f)) {}
    Status Append(std::string_view data) override { return f_->Append(data); }
    Status Sync() override { return Status::Ok(); }
    Status Close() override { return f_->Close(); }
    const std::string& path() const override { return f_->path(); }

   private:
    std::unique_ptr<WritableFile> f_;
  };
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path, uint32_t mode,
                                                        bool exclusive) override {
    MX_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> f,
                        target()->NewWritableFile(path, mode, exclusive));
    return std::unique_ptr<WritableFile>(new File(std::move(f)));
  }
  Status SyncDir(const std::string&) override { return Status::Ok(); }
};

struct Folder {
  std::string dir;
  KeyStore key =
      KeyStore::FromKey(SecretKey(std::array<uint8_t, kKeyBytes>{7}), KeySource::kPassphrase);
  NoSyncEnv no_sync;
  std::unique_ptr<DiskStore> a, b;
  std::vector<std::string> ids;  // oldest first
  int next_chat = 0;

  Folder() {
    const char* tmp = std::getenv("TMPDIR");
    dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/mx_cluster_bench_" +
          std::to_string(getpid());
    DiskStoreOptions options;
    options.shared_folder = true;
    options.refresh_max_new_files = kFiles;
    options.limits.budget_bytes = uint64_t{1} << 40;
    options.limits.ttl_us = 0;
    a = DiskStore::Open(&no_sync, dir, key, options).value();
    b = DiskStore::Open(Env::Default(), dir, key, options).value();
    a->StartupCheck();
    b->StartupCheck();
    for (int i = 0; i < kFiles; ++i) ids.push_back(SaveChat(a.get(), 2048));
    b->Refresh(true);
  }
  ~Folder() { std::filesystem::remove_all(dir); }

  // A chat of 512 tokens and `payload_bytes` of state.
  std::string SaveChat(DiskStore* store, size_t payload_bytes, ThreadPool* pool = nullptr) {
    std::vector<int32_t> tokens(512);
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = next_chat * 1000 + static_cast<int32_t>(i);
    ++next_chat;
    std::string payload(payload_bytes, 'p');
    SaveMeta meta{kModel};
    return store->Save(meta, tokens, payload, pool).value().id;
  }
};

Folder& TheFolder() {
  static Folder* folder = new Folder();
  return *folder;
}

void RefreshNothingNew(benchmark::State& state) {
  Folder& f = TheFolder();
  for (auto _ : state) {
    RefreshReport r = f.b->Refresh(true);
    if (r.added != 0 || r.listed < kFiles) state.SkipWithError("unexpected refresh");
  }
  state.counters["files"] = static_cast<double>(f.b->file_count());
}

void RefreshNew(benchmark::State& state) {
  Folder& f = TheFolder();
  const int n = static_cast<int>(state.range(0));
  for (auto _ : state) {
    state.PauseTiming();
    for (int i = 0; i < n; ++i) {
      f.a->Remove(f.ids.front());
      f.ids.erase(f.ids.begin());
      f.ids.push_back(f.SaveChat(f.a.get(), 2048));
    }
    state.ResumeTiming();
    RefreshReport r = f.b->Refresh(true);
    if (static_cast<int>(r.added) != n) state.SkipWithError("refresh missed new files");
  }
  state.counters["files"] = static_cast<double>(f.b->file_count());
}

void RestoreFromOtherNode(benchmark::State& state) {
  Folder& f = TheFolder();
  ThreadPool pool(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  for (auto _ : state) {
    state.PauseTiming();
    const std::string id = f.SaveChat(f.a.get(), size_t{32} << 20, &pool);
    state.ResumeTiming();
    f.b->Refresh(true);
    auto loaded = f.b->Load(id, kModel, &pool);
    if (!loaded.ok()) state.SkipWithError(loaded.status().ToString().c_str());
    benchmark::DoNotOptimize(loaded);
    state.PauseTiming();
    f.a->Remove(id);
    f.b->Refresh(true);
    state.ResumeTiming();
  }
  state.SetBytesProcessed(state.iterations() * (int64_t{32} << 20));
}

BENCHMARK(RefreshNothingNew)->Unit(benchmark::kMillisecond);
BENCHMARK(RefreshNew)->Arg(1)->Arg(16)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK(RestoreFromOtherNode)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
