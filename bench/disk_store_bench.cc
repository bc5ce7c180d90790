// Saved-cache throughput (Google Benchmark): AES-256-GCM per core, and the
// disk store's seal+write (Save, with fsync) and read+open (Load) of the
// ~94 MB state of a 4k-token chat on a SmolLM2-135M-shaped model (SPEC §10:
// restoring should run within 1.5x of AES-GCM on all cores).
//   build/bench/disk_store_bench [--benchmark_filter=Load]
// Files go to $TMPDIR (default /tmp); use a real disk there for real figures.
// Counters: bytes_per_second = payload bytes per second.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cache/crypto/aead.h"
#include "cache/disk_store/disk_store.h"
#include "core/thread_pool.h"

namespace mx::cache {
namespace {

constexpr size_t kStateBytes = 98304024;  // 4096 tokens of SmolLM2-135M (docs/disk_cache_format.md)
constexpr size_t kTokens = 4096;

std::string BenchDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/mx_disk_bench";
  return dir;
}

const std::string& StatePayload() {
  static const std::string payload = [] {
    std::string p(kStateBytes, '\0');
    uint32_t x = 12345;
    for (size_t i = 0; i < p.size(); ++i) {
      x = x * 1664525u + 1013904223u;
      p[i] = static_cast<char>(x >> 24);
    }
    return p;
  }();
  return payload;
}

ThreadPool& Pool(int n_threads) {
  static std::unique_ptr<ThreadPool> pools[65];
  if (!pools[n_threads]) pools[n_threads] = std::make_unique<ThreadPool>(n_threads);
  return *pools[n_threads];
}

SecretKey BenchKey() {
  std::array<uint8_t, kKeyBytes> b;
  b.fill(0x42);
  return SecretKey(b);
}

// One core: seal / open one 4 MiB chunk.
void BM_AesGcmSeal(benchmark::State& state) {
  const size_t n = kDefaultChunkBytes;
  std::vector<uint8_t> plain(n, 7), out(n + kTagBytes);
  SecretKey key = BenchKey();
  Nonce nonce{};
  uint8_t aad[kChunkAadBytes] = {};
  for (auto _ : state) {
    if (!Seal(key, nonce, aad, plain, out.data()).ok()) state.SkipWithError("seal failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}
BENCHMARK(BM_AesGcmSeal)->Unit(benchmark::kMillisecond);

void BM_AesGcmOpen(benchmark::State& state) {
  const size_t n = kDefaultChunkBytes;
  std::vector<uint8_t> plain(n, 7), sealed(n + kTagBytes), out(n);
  SecretKey key = BenchKey();
  Nonce nonce{};
  uint8_t aad[kChunkAadBytes] = {};
  if (!Seal(key, nonce, aad, plain, sealed.data()).ok()) state.SkipWithError("seal failed");
  for (auto _ : state) {
    if (!Open(key, nonce, aad, sealed, out.data()).ok()) state.SkipWithError("open failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n));
}
BENCHMARK(BM_AesGcmOpen)->Unit(benchmark::kMillisecond);

std::unique_ptr<DiskStore> OpenBenchStore() {
  std::filesystem::remove_all(BenchDir());
  KeyStore key = KeyStore::FromKey(BenchKey(), KeySource::kGenerated);
  DiskStoreOptions options;
  options.limits.budget_bytes = uint64_t{1} << 40;
  auto store = DiskStore::Open(Env::Default(), BenchDir(), key, options);
  return store.ok() ? std::move(store).value() : nullptr;
}

const ModelBinding kModel{"sha256-64:0123456789abcdef", 1};

// Seal + write + fsync + rename of the 94 MB state. Arg: threads.
void BM_DiskSave(benchmark::State& state) {
  auto store = OpenBenchStore();
  const std::string& payload = StatePayload();
  std::vector<int32_t> tokens(kTokens, 5);
  ThreadPool& pool = Pool(static_cast<int>(state.range(0)));
  SaveMeta meta{kModel};
  for (auto _ : state) {
    auto r = store->Save(meta, tokens, payload, &pool);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      break;
    }
    state.PauseTiming();
    store->Remove(r->id);
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * payload.size()));
  std::filesystem::remove_all(BenchDir());
}
BENCHMARK(BM_DiskSave)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

// Read (mmap) + open every chunk of the 94 MB state. Arg: threads.
void BM_DiskLoad(benchmark::State& state) {
  auto store = OpenBenchStore();
  std::vector<int32_t> tokens(kTokens, 5);
  SaveMeta meta{kModel};
  auto saved = store->Save(meta, tokens, StatePayload(), &Pool(4));
  if (!saved.ok()) {
    state.SkipWithError(saved.status().ToString().c_str());
    return;
  }
  ThreadPool& pool = Pool(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    auto r = store->Load(saved->id, kModel, &pool);
    if (!r.ok()) {
      state.SkipWithError(r.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(r->payload().data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * StatePayload().size()));
  std::filesystem::remove_all(BenchDir());
}
BENCHMARK(BM_DiskLoad)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Arg(16)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace mx::cache

BENCHMARK_MAIN();
