// How approximate a context shift is (SPEC §4). A chat of a system prompt and
// 12 turns is read, the client "trims" the oldest k turns, and the shifted
// state (span removed, later keys re-rotated) reads the new tail. Compared
// with reading the trimmed chat from scratch: the mean absolute logit
// difference at the first new position, and how many of 16 greedy tokens
// differ (free-running, so one early flip changes the rest).
//   context_shift_accuracy MODEL.gguf
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "models/model.h"
#include "models/runner.h"

using namespace mx;
using namespace mx::models;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
    return 2;
  }
  auto model = Model::Load(Env::Default(), argv[1], {.progress = nullptr, .prefault = false});
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  auto runner = Runner::Create(**model, {.n_threads = 2, .kv_type = DType::kF16, .n_ctx = 4096});
  if (!runner.ok()) return 1;
  Runner& r = **runner;
  const int64_t vocab = r.n_vocab();
  std::mt19937 rng(5);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(std::max<int64_t>(1, vocab - 300)));
    return t;
  };
  constexpr int kTurns = 12, kTurnLen = 60, kSteps = 16;
  const std::vector<int32_t> system = random_tokens(40);
  std::vector<std::vector<int32_t>> turns;
  for (int i = 0; i < kTurns; ++i) turns.push_back(random_tokens(kTurnLen));

  auto read_and_generate = [&](SequenceState* s, const std::vector<int32_t>& prompt, size_t from,
                               std::vector<float>* first_logits) {
    std::vector<BatchEntry> batch;
    for (size_t i = from; i < prompt.size(); ++i) batch.push_back({s, prompt[i], i + 1 == prompt.size()});
    std::vector<float> logits;
    std::vector<int32_t> out;
    for (int k = 0; k < kSteps; ++k) {
      if (!r.Forward(batch, &logits).ok()) std::exit(1);
      if (k == 0) *first_logits = logits;
      int32_t t = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      out.push_back(t);
      batch = {{s, t, true}};
    }
    return out;
  };

  int differ_total = 0;
  double diff_sum = 0;
  int64_t diff_count = 0;
  std::printf("%-12s %-14s %-22s %s\n", "dropped", "chat tokens", "mean |dlogit| (first)", "greedy tokens differing");
  for (int drop = 1; drop <= 4; ++drop) {
    std::vector<int32_t> full = system;
    for (const auto& t : turns) full.insert(full.end(), t.begin(), t.end());
    auto shifted = r.NewSequence();
    std::vector<BatchEntry> batch;
    for (int32_t t : full) batch.push_back({shifted.get(), t, false});
    std::vector<float> ignored;
    if (!r.Forward(batch, &ignored).ok()) return 1;
    const int64_t p0 = static_cast<int64_t>(system.size()), p1 = p0 + static_cast<int64_t>(drop) * kTurnLen;
    if (!shifted->RemoveSpan(p0, p1).ok()) return 1;

    std::vector<int32_t> prompt = system;
    for (size_t i = static_cast<size_t>(drop); i < turns.size(); ++i) prompt.insert(prompt.end(), turns[i].begin(), turns[i].end());
    const size_t kept = prompt.size();
    auto tail = random_tokens(20);
    prompt.insert(prompt.end(), tail.begin(), tail.end());

    std::vector<float> a_first, b_first;
    auto a = read_and_generate(shifted.get(), prompt, kept, &a_first);
    auto fresh = r.NewSequence();
    auto b = read_and_generate(fresh.get(), prompt, 0, &b_first);
    double sum = 0;
    for (int64_t i = 0; i < vocab; ++i) sum += std::fabs(a_first[static_cast<size_t>(i)] - b_first[static_cast<size_t>(i)]);
    int differ = 0;
    for (int k = 0; k < kSteps; ++k) differ += a[static_cast<size_t>(k)] != b[static_cast<size_t>(k)];
    diff_sum += sum;
    diff_count += vocab;
    differ_total += differ;
    std::printf("%-12s %-14zu %-22.4f %d/%d\n", (std::to_string(p1 - p0) + " tokens").c_str(), full.size(),
                sum / static_cast<double>(vocab), differ, kSteps);
  }
  std::printf("overall: mean |dlogit| %.4f, greedy tokens differing %d of %d (%.1f%%)\n",
              diff_sum / static_cast<double>(diff_count), differ_total, 4 * kSteps, 100.0 * differ_total / (4 * kSteps));
  return 0;
}
