// Kernel benchmarks (Google Benchmark). Runs on the active path (best for the
// CPU, or MATRICXON_KERNELS=scalar|avx2|avx512); MatMul with 1 and 2 threads.
//   build/bench/kernels_bench --benchmark_filter=MatMul
// On a shared machine compare the CPU column for 1-thread runs: real time
// includes other processes' turns.
// Counters: GFLOP/s = 2 * rows * cols * tokens per second; GB/s = weight
// bytes streamed per second (meaningful for decode, 1 token).
// The machine's ceilings, measured here too so the figures can be read as a
// fraction of them: BM_PeakFma (f32 FMA GFLOP/s of one core, AVX-512 or
// AVX2) and BM_StreamRead / BM_StreamCopy (memory GB/s over 256 MiB, far
// beyond the caches), with 1 and 2 threads.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <immintrin.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
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

// Weight bytes on a 64-byte boundary, as the model loader gives the kernels
// that want it (kernels.h FastRowAlignment).
class WeightBytes {
 public:
  explicit WeightBytes(size_t n) : raw_(n + 64) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(raw_.data());
    data_ = raw_.data() + ((64 - p % 64) % 64);
    size_ = n;
  }
  uint8_t* data() { return data_; }
  size_t size() const { return size_; }

 private:
  std::vector<uint8_t> raw_;
  uint8_t* data_;
  size_t size_;
};

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
  WeightBytes w(row_bytes * static_cast<size_t>(n_rows));
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
  const DType types[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0, DType::kQ4_0,
                         DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ4_K, DType::kQ5_K,
                         DType::kQ6_K, DType::kQ2_K, DType::kQ3_K, DType::kIQ4_NL, DType::kIQ4_XS,
                         DType::kTQ2_0, DType::kQ1_0, DType::kMXFP4};
  const int64_t shapes[][2] = {{576, 1536}, {1536, 576}, {1024, 3072}};
  for (DType t : types) {
    for (const auto& s : shapes) {
      if (RowBytes(t, s[0]) == 0) continue;
      for (int64_t tokens : {1, 512}) {
        for (int64_t threads : {1, 2})
          b->Args({static_cast<int64_t>(t), s[0], s[1], tokens, threads});
      }
    }
    // Decode from memory rather than cache: a 24576 x 1024 matrix (tens of
    // MB, larger than L2) as the output head streams it.
    if (RowBytes(t, 1024) != 0) {
      for (int64_t threads : {1, 2})
        b->Args({static_cast<int64_t>(t), 1024, 24576, 1, threads});
    }
  }
  b->ArgNames({"type", "cols", "rows", "tokens", "threads"});
  b->Unit(benchmark::kMicrosecond);
  b->UseRealTime();
}
BENCHMARK(BM_MatMul)->Apply(MatMulArgs);

// Decode as a whole model streams its weights: one token through matrices of
// cols x rows, a different one each call, 256 MiB of them in all (far beyond
// the caches, as a forward pass sees its next layer). Args: type id, n_cols,
// n_rows, threads. GB/s is what to hold against BM_StreamReadWide.
void BM_DecodeStream(benchmark::State& state) {
  const DType type = static_cast<DType>(state.range(0));
  const int64_t n_cols = state.range(1), n_rows = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  const size_t row_bytes = RowBytes(type, n_cols), bytes = row_bytes * static_cast<size_t>(n_rows);
  if (row_bytes == 0) {
    state.SkipWithError("n_cols is not a multiple of the block size");
    return;
  }
  const size_t n_mats = std::max<size_t>(2, (size_t{256} << 20) / bytes);
  WeightBytes w(bytes * n_mats);
  const std::vector<float> src = RandomVec(n_cols, 1);
  for (size_t r = 0; r < n_mats * static_cast<size_t>(n_rows); ++r)
    QuantizeRow(type, src.data(), w.data() + r * row_bytes, n_cols);
  const std::vector<float> x = RandomVec(n_cols, 2);
  std::vector<float> y(static_cast<size_t>(n_rows));
  ThreadPool* pool = &Pool(threads);
  size_t i = 0;
  for (auto _ : state) {
    const Matrix m{type, w.data() + i * bytes, n_cols, n_rows, row_bytes};
    MatMul(m, x.data(), n_cols, 1, y.data(), n_rows, pool);
    benchmark::DoNotOptimize(y.data());
    i = i + 1 == n_mats ? 0 : i + 1;
  }
  state.SetLabel(DTypeName(type) + " " + IsaName(ActiveIsa()));
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(bytes) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_DecodeStream)
    ->ArgsProduct({{static_cast<int64_t>(DType::kF16), static_cast<int64_t>(DType::kBF16),
                    static_cast<int64_t>(DType::kQ8_0), static_cast<int64_t>(DType::kQ4_K),
                    static_cast<int64_t>(DType::kQ6_K)},
                   {576, 1024},
                   {1536},
                   {1, 2}})
    ->ArgNames({"type", "cols", "rows", "threads"})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// One query token over n_pos cached positions, all heads (SmolLM2: 9 heads,
// 3 kv heads, head_dim 64), KV rows of the type range(1) names (0 F16,
// 1 Q8_0, 2 Q4_0); single-threaded as the engine calls it.
DType BenchKvType(int64_t i) { return i == 1 ? DType::kQ8_0 : i == 2 ? DType::kQ4_0 : DType::kF16; }

// n_pos K and V rows of kv_dim values of `type` (every row the same values).
void FillKvRows(DType type, int64_t kv_dim, int64_t n_pos, std::vector<uint8_t>* k,
                std::vector<uint8_t>* v) {
  const size_t rb = RowBytes(type, kv_dim);
  k->resize(rb * static_cast<size_t>(n_pos));
  v->resize(k->size());
  const std::vector<float> rows = RandomVec(kv_dim, 3);
  for (int64_t p = 0; p < n_pos; ++p) {
    StoreKvRow(type, rows.data(), kv_dim, k->data() + static_cast<size_t>(p) * rb);
    StoreKvRow(type, rows.data(), kv_dim, v->data() + static_cast<size_t>(p) * rb);
  }
}

void BM_AttentionRow(benchmark::State& state) {
  const int64_t n_pos = state.range(0);
  const DType type = BenchKvType(state.range(1));
  const int n_head = 9, n_kv = 3, hd = 64;
  const int64_t kv_dim = n_kv * hd;
  std::vector<uint8_t> k, v;
  FillKvRows(type, kv_dim, n_pos, &k, &v);
  const size_t rb = RowBytes(type, kv_dim);
  const KvView kv{type, type, k.data(), v.data(), rb, rb, n_kv, hd};
  const std::vector<float> q = RandomVec(n_head * hd, 4);
  std::vector<float> out(q.size()), scratch(static_cast<size_t>(AttentionScratchFloats(n_pos, hd)));
  for (auto _ : state) {
    AttentionRow(q.data(), n_head, kv, n_pos, 0.125f, out.data(), scratch.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(std::string(IsaName(ActiveIsa())) + " " + DTypeLowerName(type));
  // q.k and p.v: 4 flops per position per head dim.
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * n_head * hd * n_pos * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionRow)->ArgsProduct({{512, 4096}, {0, 1, 2}})->Unit(benchmark::kMicrosecond);

// Prompt reading: 64 consecutive query tokens ending at n_pos, the 3 heads
// of one kv head (as the engine's tasks call it), KV rows of range(1)'s type
// (as BM_AttentionRow) with 3 kv heads of 64 dims per row.
void BM_AttentionRows(benchmark::State& state) {
  const int64_t n_pos = state.range(0), n_q = 64;
  const DType type = BenchKvType(state.range(1));
  const int n_kv = 3, group = 3, hd = 64;
  const int64_t kv_dim = n_kv * hd;
  std::vector<uint8_t> k, v;
  FillKvRows(type, kv_dim, n_pos, &k, &v);
  const size_t rb = RowBytes(type, kv_dim);
  const KvView kv{type, type, k.data(), v.data(), rb, rb, 1, hd};
  const std::vector<float> q = RandomVec(n_q * group * hd, 4);
  std::vector<int64_t> np(static_cast<size_t>(n_q));
  for (int64_t i = 0; i < n_q; ++i) np[static_cast<size_t>(i)] = n_pos - n_q + 1 + i;
  std::vector<float> out(q.size()), scratch(static_cast<size_t>(AttentionScratchFloats(n_pos, hd)));
  for (auto _ : state) {
    AttentionRows(q.data(), group * hd, n_q, group, kv, np.data(), 0.125f, out.data(),
                  group * hd, scratch.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(std::string(IsaName(ActiveIsa())) + " " + DTypeLowerName(type));
  state.counters["GFLOP/s"] =
      benchmark::Counter(4.0 * n_q * group * hd * static_cast<double>(n_pos) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionRows)->ArgsProduct({{512, 4096}, {0, 1, 2}})->Unit(benchmark::kMicrosecond);

// Generation at long context, the Qwen3-0.6B shape: one query token (16
// heads, 8 kv heads of 128 dims) over n_pos cached positions of one layer,
// KV rows of range(1)'s type (as BM_AttentionRow), split across `threads`
// by kv head as the engine splits it. One layer's rows at 16k positions are
// 67 MB in F16, far beyond the caches, so GB/s (K and V bytes read) is the
// figure to hold against BM_StreamReadWide.
void BM_AttentionLong(benchmark::State& state) {
  const int64_t n_pos = state.range(0);
  const DType type = BenchKvType(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  const int n_head = 16, n_kv = 8, hd = 128, group = n_head / n_kv;
  const int64_t kv_dim = n_kv * hd;
  std::vector<uint8_t> k, v;
  FillKvRows(type, kv_dim, n_pos, &k, &v);
  const size_t rb = RowBytes(type, kv_dim), head_bytes = KvHeadBytes(type, hd);
  const std::vector<float> q = RandomVec(n_head * hd, 4);
  std::vector<float> out(q.size());
  std::vector<std::vector<float>> scratch(
      static_cast<size_t>(threads),
      std::vector<float>(static_cast<size_t>(AttentionScratchFloats(n_pos, hd))));
  ThreadPool* pool = &Pool(threads);
  const int64_t np = n_pos;
  for (auto _ : state) {
    pool->ParallelFor(n_kv, [&](int64_t h, int t) {
      KvView kv{type, type, k.data(), v.data(), rb, rb, 1, hd};
      kv.k += static_cast<size_t>(h) * head_bytes;
      kv.v += static_cast<size_t>(h) * head_bytes;
      const size_t q0 = static_cast<size_t>(h * group * hd);
      AttentionRows(q.data() + q0, group * hd, 1, group, kv, &np, 0.088f, out.data() + q0,
                    group * hd, scratch[static_cast<size_t>(t)].data());
    });
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(std::string(IsaName(ActiveIsa())) + " " + DTypeLowerName(type));
  state.counters["GB/s"] = benchmark::Counter(2.0 * static_cast<double>(rb) * n_pos * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] =
      benchmark::Counter(4.0 * n_head * hd * static_cast<double>(n_pos) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionLong)
    ->ArgsProduct({{2048, 16384, 32768}, {0, 1, 2}, {1, 2}})
    ->ArgNames({"pos", "kv", "threads"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Long-context generation as the runner splits it (AttentionScores over
// 512-position chunks of every kv head, then AttentionFromScores): phase two
// one kv head per task (`runs:0`) or one run of adjacent kv heads per thread
// (`runs:1`). Same shape as BM_AttentionLong, F16 or F32 keys.
void BM_AttentionSplit(benchmark::State& state) {
  const int64_t n_pos = state.range(0);
  const DType type = BenchKvType(state.range(1));
  const int threads = static_cast<int>(state.range(2));
  const bool runs = state.range(3) != 0;
  const int n_head = 16, n_kv = 8, hd = 128;
  const int64_t kv_dim = n_kv * hd, chunk = 512, lds = (n_pos + 15) / 16 * 16;
  std::vector<uint8_t> k, v;
  FillKvRows(type, kv_dim, n_pos, &k, &v);
  const size_t rb = RowBytes(type, kv_dim);
  const KvView kv{type, type, k.data(), v.data(), rb, rb, n_kv, hd};
  if (!AttentionSplitAvailable(1, n_head, kv)) {
    state.SkipWithError("the active path has no split phases for this KV type");
    return;
  }
  const std::vector<float> q = RandomVec(n_head * hd, 4);
  std::vector<float> out(q.size()), s(static_cast<size_t>(n_head * lds));
  ThreadPool* pool = &Pool(threads);
  const int64_t np = n_pos, n_chunks = (n_pos + chunk - 1) / chunk;
  const int parts = runs ? std::min(n_kv, threads) : n_kv;
  for (auto _ : state) {
    pool->ParallelFor(n_chunks, [&](int64_t c, int) {
      AttentionScores(q.data(), n_head * hd, 1, n_head, kv, &np, c * chunk, (c + 1) * chunk,
                      0.088f, s.data(), lds);
    });
    pool->ParallelFor(parts, [&](int64_t part, int) {
      AttentionFromScores(1, n_head, kv, &np, static_cast<int>(n_kv * part / parts),
                          static_cast<int>(n_kv * (part + 1) / parts), s.data(), lds, out.data(),
                          n_head * hd);
    });
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(std::string(IsaName(ActiveIsa())) + " " + DTypeLowerName(type));
  state.counters["GB/s"] = benchmark::Counter(2.0 * static_cast<double>(rb) * n_pos * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AttentionSplit)
    ->ArgsProduct({{16384, 32768}, {0, 1}, {1, 2}, {0, 1}})
    ->ArgNames({"pos", "kv", "threads", "runs"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The softmax normaliser behind logprobs over a Qwen-sized vocabulary, on each
// path (0 scalar: exponentials in double, 1 AVX2, 2 AVX-512).
void BM_LogSumExp(benchmark::State& state) {
  const Isa isa = static_cast<Isa>(state.range(0));
  const std::vector<Isa> have = AvailableIsas();
  if (std::find(have.begin(), have.end(), isa) == have.end()) {
    state.SkipWithError("this CPU lacks the path");
    return;
  }
  const Isa before = ActiveIsa();
  SetActiveIsa(isa);
  std::vector<float> logits = RandomVec(151936, 12);
  for (float& v : logits) v *= 12.0f;
  for (auto _ : state) benchmark::DoNotOptimize(LogSumExp(logits.data(), 151936));
  state.SetLabel(IsaName(isa));
  SetActiveIsa(before);
}
BENCHMARK(BM_LogSumExp)->DenseRange(0, 2)->Unit(benchmark::kMicrosecond);

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

// ------------------------------------------------------------ ceilings

// 12 independent FMA chains (enough to cover FMA latency x ports), 16 lanes.
__attribute__((target("avx512f"))) float FmaLoop512(int64_t iters) {
  __m512 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(1e-4f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  // By hand: GCC 12's _mm512_reduce_add_ps trips -Wuninitialized in its header.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  float sum = 0.0f;
  for (float l : lanes) sum += l;
  return sum;
}
__attribute__((target("avx2,fma"))) float FmaLoop256(int64_t iters) {
  __m256 acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(1e-4f);
  for (int64_t it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}

// Peak f32 FMA throughput of one core on the widest vectors this CPU has.
void BM_PeakFma(benchmark::State& state) {
  const bool wide = __builtin_cpu_supports("avx512f");
  if (!wide && !__builtin_cpu_supports("avx2")) {
    state.SkipWithError("no AVX2");
    return;
  }
  const int64_t iters = 1 << 20;
  for (auto _ : state) {
    benchmark::DoNotOptimize(wide ? FmaLoop512(iters) : FmaLoop256(iters));
  }
  const double flops_per_iter = 12.0 * (wide ? 16 : 8) * 2;
  state.SetLabel(wide ? "avx512, 1 core" : "avx2, 1 core");
  state.counters["GFLOP/s"] = benchmark::Counter(flops_per_iter * iters * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PeakFma)->Unit(benchmark::kMillisecond);

// Peak int8 multiply-add throughput of one core: 12 vpdpbusd chains (64
// u8 x s8 products per instruction), as the K-quant kernels use; an "op" is
// a multiply or an add, so one product counts 2 as in GFLOP/s.
__attribute__((target("avx512f,avx512vnni"))) int32_t DpbusdLoop(int64_t iters) {
  __m512i acc[12];
#pragma GCC unroll 12
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(i);
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t it = 0; it < iters; ++it) {
    // Opaque operands, so the compiler cannot fold the chains (no instruction).
    asm volatile("" : "+v"(a), "+v"(b));
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  alignas(64) int32_t lanes[16];
  __m512i s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_epi32(s, acc[i]);
  _mm512_store_si512(lanes, s);
  int32_t sum = 0;
  for (int32_t l : lanes) sum += l;
  return sum;
}
void BM_PeakInt8(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512vnni")) {
    state.SkipWithError("no AVX-512 VNNI");
    return;
  }
  const int64_t iters = 1 << 20;
  for (auto _ : state) benchmark::DoNotOptimize(DpbusdLoop(iters));
  state.SetLabel("avx512 vpdpbusd, 1 core");
  state.counters["GOP/s"] = benchmark::Counter(12.0 * 64 * 2 * iters * 1e-9,
                                               benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PeakInt8)->Unit(benchmark::kMillisecond);

// The tile unit's BF16 peak (the amx path's ceiling for BF16 prompts): four
// independent 16 x 16 f32 tiles, each TDPBF16PS 16 x 16 x 32 products. In
// assembly (GCC 12's tile intrinsics misdescribe their memory operands).
struct alignas(64) AmxConfig {
  uint8_t palette_id, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
void AmxBf16Loop(int64_t iters) {
  AmxConfig c;
  std::memset(&c, 0, sizeof c);
  c.palette_id = 1;
  for (int t = 0; t < 8; ++t) c.rows[t] = 16, c.colsb[t] = 64;
  alignas(64) static uint16_t ones[16 * 32];
  for (uint16_t& v : ones) v = 0x3f80;  // 1.0 in bf16
  asm volatile("ldtilecfg %0" ::"m"(c));
  asm volatile(
      "tileloadd (%0,%1,1), %%tmm4\n\ttileloadd (%0,%1,1), %%tmm5\n\t"
      "tileloadd (%0,%1,1), %%tmm6\n\ttileloadd (%0,%1,1), %%tmm7\n\t"
      "tilezero %%tmm0\n\ttilezero %%tmm1\n\ttilezero %%tmm2\n\ttilezero %%tmm3" ::"r"(ones),
      "r"(int64_t{64})
      : "memory");
  for (int64_t i = 0; i < iters; ++i) {
    asm volatile(
        "tdpbf16ps %tmm6, %tmm4, %tmm0\n\ttdpbf16ps %tmm7, %tmm4, %tmm1\n\t"
        "tdpbf16ps %tmm6, %tmm5, %tmm2\n\ttdpbf16ps %tmm7, %tmm5, %tmm3");
  }
  asm volatile("tilerelease");
}

void BM_PeakAmxBf16(benchmark::State& state) {
  const std::vector<Isa> paths = AvailableIsas();  // asks the OS for the tile state
  if (std::find(paths.begin(), paths.end(), Isa::kAmx) == paths.end()) {
    state.SkipWithError("no AMX-BF16 (CPU or OS)");
    return;
  }
  const int64_t iters = 1 << 16;
  for (auto _ : state) AmxBf16Loop(iters);
  state.SetLabel("amx tdpbf16ps, 1 core");
  state.counters["GFLOP/s"] = benchmark::Counter(4.0 * 16 * 16 * 32 * 2 * iters * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PeakAmxBf16)->Unit(benchmark::kMillisecond);

// Memory bandwidth: each of `threads` workers reads (or copies) its share of
// a 256 MiB buffer; GB/s counts bytes read (+ written for the copy).
void BM_Stream(benchmark::State& state, bool copy) {
  const int threads = static_cast<int>(state.range(0));
  const size_t n = size_t{256} << 20;
  static std::vector<uint64_t> src(n / 8, 1), dst(n / 8, 2);
  ThreadPool* pool = &Pool(threads);
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  for (auto _ : state) {
    pool->ParallelFor(threads, [&](int64_t t, int) {
      const size_t words = src.size() / static_cast<size_t>(threads);
      const uint64_t* s = src.data() + static_cast<size_t>(t) * words;
      if (copy) {
        std::memcpy(dst.data() + static_cast<size_t>(t) * words, s, words * 8);
      } else {
        uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (size_t i = 0; i + 4 <= words; i += 4) {
          a0 += s[i];
          a1 += s[i + 1];
          a2 += s[i + 2];
          a3 += s[i + 3];
        }
        sums[static_cast<size_t>(t)] = a0 + a1 + a2 + a3;
      }
    });
    benchmark::DoNotOptimize(sums.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(n) * (copy ? 2 : 1) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
void BM_StreamRead(benchmark::State& state) { BM_Stream(state, false); }
void BM_StreamCopy(benchmark::State& state) { BM_Stream(state, true); }
BENCHMARK(BM_StreamRead)->Arg(1)->Arg(2)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_StreamCopy)->Arg(1)->Arg(2)->ArgName("threads")->Unit(benchmark::kMillisecond)->UseRealTime();

// The read ceiling as the decode kernels see it: 64-byte loads (8 chains of
// vpaddq over 512 bytes a step), so the figure is bounded by memory and not by
// the scalar adds of BM_StreamRead. The buffer is either anonymous memory
// (mapped:0) or a file mapped read-only as the weights are (mapped:1; 4 KiB
// page-cache pages, read once first so none is faulted in while timed).
__attribute__((target("avx512f"))) uint64_t ReadWide(const uint8_t* p, size_t bytes) {
  __m512i acc[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) acc[i] = _mm512_setzero_si512();
  for (size_t off = 0; off + 512 <= bytes; off += 512) {
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i)
      acc[i] = _mm512_add_epi64(acc[i], _mm512_loadu_si512(p + off + 64 * static_cast<size_t>(i)));
  }
  for (int i = 1; i < 8; ++i) acc[0] = _mm512_add_epi64(acc[0], acc[i]);
  alignas(64) uint64_t lanes[8];
  _mm512_store_si512(lanes, acc[0]);
  uint64_t sum = 0;
  for (uint64_t l : lanes) sum += l;
  return sum;
}
void BM_StreamReadWide(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx512f")) {
    state.SkipWithError("no AVX-512");
    return;
  }
  const int threads = static_cast<int>(state.range(0));
  const bool mapped = state.range(1) != 0;
  const size_t n = size_t{256} << 20;
  static std::vector<uint64_t> anon(n / 8, 1);
  static const uint8_t* file = nullptr;
  if (mapped && file == nullptr) {
    char path[] = "/tmp/kernels_bench_XXXXXX";
    const int fd = mkstemp(path);
    // Written, not a hole: the mapping must be real page-cache pages.
    const std::vector<uint8_t> chunk(size_t{1} << 20, 1);
    bool written = fd >= 0;
    for (size_t off = 0; written && off < n; off += chunk.size())
      written = write(fd, chunk.data(), chunk.size()) == static_cast<ssize_t>(chunk.size());
    if (!written) {
      if (fd >= 0) close(fd);
      unlink(path);
      state.SkipWithError("cannot write a temporary file");
      return;
    }
    void* m = mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    unlink(path);
    if (m == MAP_FAILED) {
      state.SkipWithError("mmap failed");
      return;
    }
    file = static_cast<const uint8_t*>(m);
    benchmark::DoNotOptimize(ReadWide(file, n));  // fault every page in
  }
  const uint8_t* src = mapped ? file : reinterpret_cast<const uint8_t*>(anon.data());
  ThreadPool* pool = &Pool(threads);
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  for (auto _ : state) {
    pool->ParallelFor(threads, [&](int64_t t, int) {
      const size_t share = n / static_cast<size_t>(threads);
      sums[static_cast<size_t>(t)] = ReadWide(src + static_cast<size_t>(t) * share, share);
    });
    benchmark::DoNotOptimize(sums.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(n) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_StreamReadWide)
    ->ArgsProduct({{1, 2}, {0, 1}})
    ->ArgNames({"threads", "mapped"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace mx::kernels

BENCHMARK_MAIN();
