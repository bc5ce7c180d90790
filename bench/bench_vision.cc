// Vision encoder benchmark (Google Benchmark): Projector::Encode of a 448x448
// and a 1024x768 picture (random pixels) with 1 and 2 threads.
//   build/bench/bench_vision [--mmproj=PATH] [benchmark flags]
// The projector is --mmproj, else $MATRICXON_MMPROJ, else the tiny reference
// mmproj (../shared/ref/models/tiny-qwen35-mmproj.gguf), whose numbers only
// show overheads; a projector of Qwen 3.5's real vision shape (`matricxon
// make-model`) gives the figures to compare with llama.cpp's libmtmd.
// Counters: patches (ViT tokens), tokens (LM tokens out), GFLOP/s over the
// matmuls and attention (2 flops per multiply-add).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/thread_pool.h"
#include "vision/projector.h"

namespace mx::vision {
namespace {

std::string& MmprojPath() {
  static std::string path = MATRICXON_REF_DIR "/models/tiny-qwen35-mmproj.gguf";
  return path;
}

const Projector* Proj() {
  static std::unique_ptr<Projector> proj = [] {
    auto p = Projector::Open(Env::Default(), MmprojPath());
    if (!p.ok()) {
      std::fprintf(stderr, "bench_vision: %s\n", p.status().ToString().c_str());
      return std::unique_ptr<Projector>();
    }
    return std::move(p).value();
  }();
  return proj.get();
}

ThreadPool& Pool(int n_threads) {
  static std::unique_ptr<ThreadPool> pools[9];
  if (!pools[n_threads]) pools[n_threads] = std::make_unique<ThreadPool>(n_threads);
  return *pools[n_threads];
}

// Multiply-adds x 2 of one encode of n patches.
double Flops(const ProjectorConfig& c, int64_t n) {
  const double e = static_cast<double>(c.n_embd), nn = static_cast<double>(n);
  const double k = 3.0 * static_cast<double>(c.patch_size * c.patch_size);
  const double per_layer = nn * (4 * e * e + 2 * e * static_cast<double>(c.n_ff)) + 2 * nn * nn * e;
  const double merger = nn / 4 * (16 * e * e + 4 * e * static_cast<double>(c.n_embd_out));
  return 2 * (2 * nn * k * e + static_cast<double>(c.n_layer) * per_layer + merger);
}

void BM_Encode(benchmark::State& state) {
  const Projector* proj = Proj();
  if (proj == nullptr) {
    state.SkipWithError("cannot load the projector");
    return;
  }
  const int64_t width = state.range(0), height = state.range(1);
  const int n_threads = static_cast<int>(state.range(2));
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> pixels(static_cast<size_t>(3 * width * height));
  for (float& v : pixels) v = dist(rng);
  ThreadPool& pool = Pool(n_threads);
  int64_t n_tokens = 0;
  for (auto _ : state) {
    auto out = proj->Encode(pixels, width, height, &pool);
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return;
    }
    n_tokens = out->nx * out->ny;
    benchmark::DoNotOptimize(out->data.data());
  }
  const ProjectorConfig& c = proj->config();
  const int64_t n_patches = (width / c.patch_size) * (height / c.patch_size);
  state.counters["patches"] = static_cast<double>(n_patches);
  state.counters["tokens"] = static_cast<double>(n_tokens);
  state.counters["GFLOP/s"] =
      benchmark::Counter(Flops(c, n_patches) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Encode)
    ->ArgNames({"w", "h", "threads"})
    ->Args({448, 448, 1})
    ->Args({448, 448, 2})
    ->Args({1024, 768, 1})
    ->Args({1024, 768, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace mx::vision

int main(int argc, char** argv) {
  // --mmproj=PATH is ours; the rest goes to Google Benchmark.
  if (const char* env = std::getenv("MATRICXON_MMPROJ"); env != nullptr && *env != '\0') {
    mx::vision::MmprojPath() = env;
  }
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--mmproj=", 9) == 0) {
      mx::vision::MmprojPath() = argv[i] + 9;
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  std::printf("projector: %s\n", mx::vision::MmprojPath().c_str());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
