// Matching a prompt against the RAM pool: PlanLookup over 64 entries of 32k
// tokens (SPEC §10: well under a millisecond). Worst case: every entry shares
// a long start with the prompt, so every comparison runs far.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "cache/policy/cache_policy.h"

namespace {

void BM_PlanLookup(benchmark::State& state) {
  const int n_entries = static_cast<int>(state.range(0));
  const int n_tokens = static_cast<int>(state.range(1));
  const int shared = static_cast<int>(state.range(2));  // tokens every entry shares with the prompt
  std::mt19937 rng(1);
  std::vector<int32_t> prompt(static_cast<size_t>(n_tokens));
  for (auto& t : prompt) t = static_cast<int32_t>(rng() % 50000);
  std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(n_entries), prompt);
  for (int e = 0; e < n_entries; ++e) {
    // Diverge somewhere after the shared start.
    const int at = shared + static_cast<int>(rng() % static_cast<uint32_t>(n_tokens - shared));
    tokens[static_cast<size_t>(e)][static_cast<size_t>(at)] = -1;
  }
  std::vector<mx::cache::EntryInfo> infos;
  for (int e = 0; e < n_entries; ++e) {
    infos.push_back({static_cast<uint64_t>(e + 1), tokens[static_cast<size_t>(e)], n_tokens, 1, static_cast<uint64_t>(e), false});
  }
  for (auto _ : state) {
    mx::cache::LookupPlan plan = mx::cache::PlanLookup(infos, prompt, {});
    benchmark::DoNotOptimize(plan);
  }
  state.SetItemsProcessed(state.iterations() * n_entries);  // entries matched per second
}
BENCHMARK(BM_PlanLookup)->Args({64, 32768, 30000})->Args({64, 32768, 0})->Args({4, 4096, 4000})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
