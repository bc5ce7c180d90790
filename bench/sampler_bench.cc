// One sampled token on a Qwen-sized vocabulary (151,936 logits) with a
// repetition penalty on 64 recent tokens, for the chain's three routes
// (top-k; top-p shortened by min-p; top-p alone through the logit buckets).
// An accidental full sort of the vocabulary shows here as tens of ms instead
// of ~0.2-1.5 ms (Release); sampler_test checks only what is drawn.
#include <benchmark/benchmark.h>

#include <numeric>
#include <random>
#include <vector>

#include "engine/sampler.h"

namespace {

void BM_SampleQwenVocab(benchmark::State& state) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> logits(151936);
  for (float& x : logits) x = dist(rng);
  std::vector<int32_t> history(64);
  std::iota(history.begin(), history.end(), 1000);
  mx::engine::SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = static_cast<int>(state.range(0));
  p.top_p = 0.95f;
  p.min_p = static_cast<float>(state.range(1)) / 100.0f;
  p.repeat_penalty = 1.1f;
  p.seed = 1;
  mx::engine::Sampler sampler(p);
  for (auto _ : state) benchmark::DoNotOptimize(sampler.Sample(logits, history));
}
// Args: top_k, min_p in hundredths.
BENCHMARK(BM_SampleQwenVocab)->Args({40, 5})->Args({0, 5})->Args({0, 0})->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
