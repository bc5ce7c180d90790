// Kernel benchmarks (Google Benchmark). Runs on the active path (best for the
// CPU, or MATRICXON_KERNELS=scalar|avx2|avx512); MatMul with 1 and 2 threads.
//   build/bench/kernels_bench --benchmark_filter=MatMul
// On a shared machine compare the CPU column for 1-thread runs: real time
// includes other processes' turns.
// Counters: GFLOP/s = 2 * rows * cols * tokens per second; GB/s = weight
// bytes streamed per second (meaningful for decode, 1 token).
#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "kernels/kernels.h"

namespace mx::kernels {
namespace {

std::vector<float> RandomVec(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = dist(rng);
  return v;
}

ThreadPool& Pool(int n_threads) {
  static std::unique_ptr<ThreadPool> pools[9];
  if (!pools[n_threads]) pools[n_threads] = std::make_unique<ThreadPool>(n_threads);
  return *pools[n_threads];
}

// Args: type id, n_cols (input), n_rows (output), n_tokens, threads.
void BM_MatMul(benchmark::State& state) {
  const DType type = static_cast<DType>(state.range(0));
  const int64_t n_cols = state.range(1), n_rows = state.range(2), n_tokens = state.range(3);
  const int threads = static_cast<int>(state.range(4));
  const size_t row_bytes = RowBytes(type, n_cols);
  if (row_bytes == 0) {
    state.SkipWithError("n_cols is not a multiple of the block size");
    return;
  }
  std::vector<uint8_t> w(row_bytes * static_cast<size_t>(n_rows));
  const std::vector<float> src = RandomVec(n_cols * n_rows, 1);
  for (int64_t r = 0; r < n_rows; ++r) {
    QuantizeRow(type, &src[static_cast<size_t>(r * n_cols)], w.data() + r * row_bytes, n_cols);
  }
  const Matrix m{type, w.data(), n_cols, n_rows, row_bytes};
  const std::vector<float> x = RandomVec(n_cols * n_tokens, 2);
  std::vector<float> y(static_cast<size_t>(n_rows * n_tokens));
  ThreadPool* pool = &Pool(threads);
  for (auto _ : state) {
    MatMul(m, x.data(), n_cols, n_tokens, y.data(), n_rows, pool);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(DTypeName(type) + " " + IsaName(ActiveIsa()));
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n_cols * n_rows * n_tokens * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w.size()) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}

void MatMulArgs(benchmark::internal::Benchmark* b) {
  const DType types[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                         DType::kQ4_0, DType::kQ4_K, DType::kQ6_K};
  const int64_t shapes[][2] = {{576, 1536}, {1536, 576}, {1024, 3072}};
  for (DType t : types) {
    for (const auto& s : shapes) {
      if (RowBytes(t, s[0]) == 0) continue;
      for (int64_t tokens : {1, 512}) {
        for (int64_t threads : {1, 2})
          b->Args({static_cast<int64_t>(t), s[0], s[1], tokens, threads});
      }
    }
  }
  b->ArgNames({"type", "cols", "rows", "tokens", "threads"});
  b->Unit(benchmark::kMicrosecond);
  b->UseRealTime();
}
BENCHMARK(BM_MatMul)->Apply(MatMulArgs);

// One query token over n_pos cached positions, all heads (SmolLM2: 9 heads,
// 3 kv heads, head_dim 64), F16 KV; single-threaded as the engine calls it.
void BM_AttentionRow(benchmark::State& state) {
  const int64_t n_pos = state.range(0);
  const int n_head = 9, n_kv = 3, hd = 64;
  const int64_t kv_dim = n_kv * hd;
  std::vector<uint8_t> k(static_cast<size_t>(kv_dim * n_pos) * 2), v(k.size());
  const std::vector<float> rows = RandomVec(kv_dim, 3);
  for (int64_t p = 0; p < n_pos; ++p) {
    StoreKvRow(DType::kF16, rows.data(), kv_dim, &k[static_cast<size_t>(p * kv_dim) * 2]);
    StoreKvRow(DType::kF16, rows.data(), kv_dim, &v[static_cast<size_t>(p * kv_dim) * 2]);
  }
  const KvView kv{DType::kF16, k.data(), v.data(), static_cast<size_t>(kv_dim) * 2, n_kv, hd};
  const std::vector<float> q = RandomVec(n_head * hd, 4);
  std::vector<float> out(q.size()), scratch(static_cast<size_t>(n_pos));
  for (auto _ : state) {
    AttentionRow(q.data(), n_head, kv, n_pos, 0.125f, out.data(), scratch.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(IsaName(ActiveIsa()));
  // q.k and p.v: 4 flops per position per head dim.
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * n_head * hd * n_pos * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionRow)->Arg(512)->Arg(4096)->Unit(benchmark::kMicrosecond);

// Prompt reading: 64 consecutive query tokens ending at n_pos, one head (as
// the engine's tasks call it), F16 KV with 3 kv heads of 64 dims per row.
void BM_AttentionRows(benchmark::State& state) {
  const int64_t n_pos = state.range(0), n_q = 64;
  const int n_kv = 3, hd = 64;
  const int64_t kv_dim = n_kv * hd;
  std::vector<uint8_t> k(static_cast<size_t>(kv_dim * n_pos) * 2), v(k.size());
  const std::vector<float> rows = RandomVec(kv_dim, 3);
  for (int64_t p = 0; p < n_pos; ++p) {
    StoreKvRow(DType::kF16, rows.data(), kv_dim, &k[static_cast<size_t>(p * kv_dim) * 2]);
    StoreKvRow(DType::kF16, rows.data(), kv_dim, &v[static_cast<size_t>(p * kv_dim) * 2]);
  }
  const KvView kv{DType::kF16, k.data(), v.data(), static_cast<size_t>(kv_dim) * 2, 1, hd};
  const std::vector<float> q = RandomVec(n_q * hd, 4);
  std::vector<int64_t> np(static_cast<size_t>(n_q));
  for (int64_t i = 0; i < n_q; ++i) np[static_cast<size_t>(i)] = n_pos - n_q + 1 + i;
  std::vector<float> out(q.size()), scratch(static_cast<size_t>(kAttentionQueryTile * n_pos));
  for (auto _ : state) {
    AttentionRows(q.data(), hd, n_q, 1, kv, np.data(), 0.125f, out.data(), hd, scratch.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(IsaName(ActiveIsa()));
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * n_q * hd * static_cast<double>(n_pos) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionRows)->Arg(512)->Arg(4096)->Unit(benchmark::kMicrosecond);

void BM_SwiGlu(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> g = RandomVec(n, 5), u = RandomVec(n, 6);
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : state) {
    SwiGlu(g.data(), u.data(), n, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(IsaName(ActiveIsa()));
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_SwiGlu)->Arg(1536 * 64);

void BM_RmsNorm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> x = RandomVec(n, 7), w = RandomVec(n, 8);
  std::vector<float> out(static_cast<size_t>(n));
  for (auto _ : state) {
    RmsNorm(x.data(), w.data(), n, 1e-5f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_RmsNorm)->Arg(576)->Arg(1024);

void BM_Rope(benchmark::State& state) {
  RopeParams p;
  p.n_rot = 64;
  p.mode = RopeMode::kNeox;
  std::vector<float> x = RandomVec(16 * 64, 9);
  int64_t pos = 0;
  for (auto _ : state) {
    Rope(x.data(), 16, 64, p, pos++ & 4095);
    benchmark::DoNotOptimize(x.data());
  }
}
BENCHMARK(BM_Rope);

}  // namespace
}  // namespace mx::kernels

BENCHMARK_MAIN();
