#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace mx::engine {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

SamplingParams Params(float temperature, int top_k, float top_p, float min_p, uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

std::vector<float> RandomLogits(size_t n, uint64_t seed, float scale = 3.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> out(n);
  for (float& x : out) x = dist(rng);
  return out;
}

// Logits whose softmax is exactly `probs` (up to rounding).
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(static_cast<float>(std::log(p)));
  return out;
}

// The distribution the chain should draw from, computed the plain way (full
// sort, as llama.cpp's samplers do it step by step); no repetition penalty.
std::map<int32_t, double> ExpectedDistribution(const std::vector<float>& logits,
                                               const SamplingParams& p) {
  std::vector<std::pair<float, int32_t>> c;  // (logit, id)
  for (size_t i = 0; i < logits.size(); ++i) c.emplace_back(logits[i], static_cast<int32_t>(i));
  std::sort(c.begin(), c.end(), [](auto& a, auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < c.size()) c.resize(p.top_k);
  if (p.top_p < 1.0f) {
    double z = 0;
    for (auto& [l, id] : c) z += std::exp(static_cast<double>(l) - c[0].first);
    double cum = 0;
    for (size_t i = 0; i < c.size(); ++i) {
      cum += std::exp(static_cast<double>(c[i].first) - c[0].first) / z;
      if (cum >= p.top_p) {
        c.resize(i + 1);
        break;
      }
    }
  }
  if (p.min_p > 0.0f) {
    const float cutoff = c[0].first + std::log(p.min_p);
    std::erase_if(c, [&](auto& e) { return e.first < cutoff; });
  }
  std::map<int32_t, double> dist;
  double z = 0;
  for (auto& [l, id] : c) z += std::exp((static_cast<double>(l) - c[0].first) / p.temperature);
  for (auto& [l, id] : c)
    dist[id] = std::exp((static_cast<double>(l) - c[0].first) / p.temperature) / z;
  return dist;
}

// Draws `n_draws` tokens (from `logits`, with `history` for the repetition
// penalty) and checks that every one is in the distribution the plain chain
// gives `reference` (the logits after the penalty; `logits` when none) and
// every count is within 5 sigma of its binomial expectation. Tokens expected
// fewer than 10 times are counted together (one such token drawn 4 times
// where 0.26 were expected is no evidence against the chain when thousands
// share the tail, but their total is).
void ExpectDrawsFollow(const std::vector<float>& logits, const SamplingParams& params, int n_draws,
                       std::span<const int32_t> history = {},
                       const std::vector<float>* reference = nullptr) {
  SamplingParams plain = params;
  plain.repeat_penalty = 1.0f;
  const std::map<int32_t, double> expected =
      ExpectedDistribution(reference != nullptr ? *reference : logits, plain);
  Sampler sampler(params);
  std::map<int32_t, int> counts;
  for (int i = 0; i < n_draws; ++i) ++counts[sampler.Sample(logits, history)];
  for (const auto& [id, count] : counts) {
    ASSERT_TRUE(expected.count(id))
        << "token " << id << " drawn " << count << " times but excluded by the chain";
  }
  auto expect_count = [n_draws](int count, double prob, const std::string& what) {
    const double mean = n_draws * prob;
    const double sigma = std::sqrt(n_draws * prob * (1 - prob));
    EXPECT_NEAR(count, mean, 5 * sigma + 1) << what << " p=" << prob;
  };
  double tail_prob = 0;
  int tail_count = 0, tail_tokens = 0;
  for (const auto& [id, prob] : expected) {
    const auto it = counts.find(id);
    const int count = it == counts.end() ? 0 : it->second;
    if (n_draws * prob < 10) {
      tail_prob += prob;
      tail_count += count;
      ++tail_tokens;
    } else {
      expect_count(count, prob, "token " + std::to_string(id));
    }
  }
  if (tail_tokens > 0) expect_count(tail_count, tail_prob, std::to_string(tail_tokens) + " rare tokens together");
}

// ---------------------------------------------------------------------------
// Validation.

TEST(ValidateSamplingParamsTest, DefaultsAndBoundsAreValid) {
  EXPECT_TRUE(ValidateSamplingParams(SamplingParams{}).ok());
  SamplingParams p;
  p.temperature = 0;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 0;
  p.repeat_last_n = -1;
  EXPECT_TRUE(ValidateSamplingParams(p).ok());
  p.temperature = 2;
  p.repeat_last_n = 0;
  p.repeat_penalty = 0.5f;
  EXPECT_TRUE(ValidateSamplingParams(p).ok());
}

TEST(ValidateSamplingParamsTest, EachBadFieldIsNamed) {
  struct Case {
    const char* field;
    void (*mutate)(SamplingParams&);
  };
  const Case cases[] = {
      {"temperature", [](SamplingParams& p) { p.temperature = 2.5f; }},
      {"temperature", [](SamplingParams& p) { p.temperature = -0.1f; }},
      {"temperature", [](SamplingParams& p) { p.temperature = std::nanf(""); }},
      {"top_k", [](SamplingParams& p) { p.top_k = -1; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 0.0f; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.01f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.0f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.01f; }},
      {"repeat_penalty", [](SamplingParams& p) { p.repeat_penalty = 0.0f; }},
      {"repeat_penalty", [](SamplingParams& p) { p.repeat_penalty = kInf; }},
      {"repeat_last_n", [](SamplingParams& p) { p.repeat_last_n = -2; }},
  };
  for (const Case& c : cases) {
    SamplingParams p;
    c.mutate(p);
    Status s = ValidateSamplingParams(p);
    ASSERT_FALSE(s.ok()) << c.field;
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_NE(s.message().find(c.field), std::string::npos) << s.message();
  }
  SamplingParams p;
  p.temperature = 2.5f;
  EXPECT_EQ(ValidateSamplingParams(p).message(),
            "sampling parameter temperature must be in [0, 2], got 2.5");
}

// ---------------------------------------------------------------------------
// Greedy.

TEST(SamplerTest, GreedyIsArgmax) {
  Sampler s(Params(0.0f, 40, 0.95f, 0.05f));
  EXPECT_EQ(s.Sample(std::vector<float>{0.1f, 3.0f, -1.0f, 2.9f}, {}), 1);
  const std::vector<float> big = RandomLogits(152064, 7);
  const auto best = std::max_element(big.begin(), big.end()) - big.begin();
  EXPECT_EQ(s.Sample(big, {}), best);
}

TEST(SamplerTest, GreedyTieGoesToLowestId) {
  Sampler s(Params(0.0f, 0, 1.0f, 0.0f));
  EXPECT_EQ(s.Sample(std::vector<float>{1.0f, 5.0f, 2.0f, 5.0f, 5.0f}, {}), 1);
  EXPECT_EQ(s.Sample(std::vector<float>{-kInf, -kInf, -kInf}, {}), 0);
}

TEST(SamplerTest, GreedyIgnoresNaN) {
  Sampler s(Params(0.0f, 0, 1.0f, 0.0f));
  EXPECT_EQ(s.Sample(std::vector<float>{std::nanf(""), 1.0f, std::nanf(""), 2.0f}, {}), 3);
  Sampler t(Params(1.0f, 0, 1.0f, 0.0f));
  for (int i = 0; i < 100; ++i) {
    const int32_t id = t.Sample(std::vector<float>{std::nanf(""), 1.0f, std::nanf(""), 1.0f}, {});
    EXPECT_TRUE(id == 1 || id == 3) << id;
  }
}

TEST(SamplerTest, TopK1EqualsGreedy) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::vector<float> logits = RandomLogits(4096, seed);
    logits[seed * 13] = logits[seed * 17] = 50.0f;  // a tie at the top
    const std::vector<int32_t> history = {int32_t(seed), int32_t(seed * 17)};
    SamplingParams greedy = Params(0.0f, 0, 1.0f, 0.0f);
    SamplingParams top1 = Params(1.0f, 1, 0.95f, 0.05f, seed);
    greedy.repeat_penalty = top1.repeat_penalty = 1.3f;
    EXPECT_EQ(Sampler(top1).Sample(logits, history), Sampler(greedy).Sample(logits, history));
  }
}

// ---------------------------------------------------------------------------
// Repetition penalty (llama.cpp rule).

TEST(SamplerTest, PenaltyDividesPositiveLogits) {
  SamplingParams p = Params(0.0f, 0, 1.0f, 0.0f);
  p.repeat_penalty = 1.1f;
  const std::vector<float> logits = {2.0f, 1.9f};  // 2.0 / 1.1 = 1.82 < 1.9
  EXPECT_EQ(Sampler(p).Sample(logits, std::vector<int32_t>{5, 0}), 1);
  EXPECT_EQ(Sampler(p).Sample(logits, {}), 0);
}

TEST(SamplerTest, PenaltyMultipliesNegativeLogits) {
  SamplingParams p = Params(0.0f, 0, 1.0f, 0.0f);
  p.repeat_penalty = 1.1f;
  const std::vector<float> logits = {-1.0f, -1.05f, -3.0f};  // -1.0 * 1.1 = -1.1 < -1.05
  EXPECT_EQ(Sampler(p).Sample(logits, std::vector<int32_t>{0}), 1);
}

TEST(SamplerTest, PenaltyAppliesOncePerDistinctToken) {
  SamplingParams p = Params(0.0f, 0, 1.0f, 0.0f);
  p.repeat_penalty = 1.1f;
  const std::vector<float> logits = {2.0f, 1.7f};  // once: 1.82 > 1.7; three times: 1.5
  EXPECT_EQ(Sampler(p).Sample(logits, std::vector<int32_t>{0, 0, 0}), 0);
}

TEST(SamplerTest, PenaltyWindowIsTheLastNTokens) {
  SamplingParams p = Params(0.0f, 0, 1.0f, 0.0f);
  p.repeat_penalty = 2.0f;
  const std::vector<float> logits = {2.0f, 1.5f, 0.0f};
  const std::vector<int32_t> history = {0, 2, 2};  // token 0 is 3 back
  p.repeat_last_n = 2;
  EXPECT_EQ(Sampler(p).Sample(logits, history), 0);
  p.repeat_last_n = 3;
  EXPECT_EQ(Sampler(p).Sample(logits, history), 1);
  p.repeat_last_n = -1;
  EXPECT_EQ(Sampler(p).Sample(logits, history), 1);
  p.repeat_last_n = 0;
  EXPECT_EQ(Sampler(p).Sample(logits, history), 0);
  // Out-of-range history ids are ignored, and the logits are not modified.
  p.repeat_last_n = 64;
  EXPECT_EQ(Sampler(p).Sample(logits, std::vector<int32_t>{-1, 3, 99}), 0);
  EXPECT_EQ(logits[0], 2.0f);
}

TEST(SamplerTest, PenaltyChangesSampledFrequencies) {
  SamplingParams p = Params(1.0f, 0, 1.0f, 0.0f, 99);
  p.repeat_penalty = 3.0f;
  const std::vector<float> logits = {3.0f, 1.0f, 0.5f};  // penalised: 1.0, 1.0, 0.5
  Sampler s(p);
  int zeros = 0;
  for (int i = 0; i < 10000; ++i) zeros += s.Sample(logits, std::vector<int32_t>{0}) == 0;
  const double expect = 10000 * std::exp(1.0) / (2 * std::exp(1.0) + std::exp(0.5));
  EXPECT_NEAR(zeros, expect, 5 * std::sqrt(expect));
}

// ---------------------------------------------------------------------------
// Seeds.

std::vector<int32_t> Draw(Sampler& s, const std::vector<float>& logits, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s.Sample(logits, out));
  return out;
}

TEST(SamplerTest, SameSeedSameSequence) {
  const std::vector<float> logits = RandomLogits(4096, 3, 1.0f);
  SamplingParams p = Params(1.0f, 40, 0.95f, 0.05f, 1234);
  p.repeat_penalty = 1.1f;
  Sampler a(p), b(p);
  EXPECT_EQ(Draw(a, logits, 200), Draw(b, logits, 200));
  EXPECT_EQ(a.seed(), 1234u);
}

TEST(SamplerTest, DifferentSeedsDiffer) {
  const std::vector<float> logits(1000, 0.0f);  // uniform
  Sampler a(Params(1.0f, 0, 1.0f, 0.0f, 1)), b(Params(1.0f, 0, 1.0f, 0.0f, 2));
  EXPECT_NE(Draw(a, logits, 50), Draw(b, logits, 50));
}

TEST(SamplerTest, SeedZeroDrawsARandomSeedThatReproduces) {
  const std::vector<float> logits(1000, 0.0f);
  Sampler a(Params(1.0f, 0, 1.0f, 0.0f, 0)), b(Params(1.0f, 0, 1.0f, 0.0f, 0));
  EXPECT_NE(a.seed(), b.seed());
  Sampler again(Params(1.0f, 0, 1.0f, 0.0f, a.seed()));
  EXPECT_EQ(Draw(a, logits, 50), Draw(again, logits, 50));
}

// ---------------------------------------------------------------------------
// Truncation and temperature: statistical checks against ExpectedDistribution.

const std::vector<double> kProbs = {0.4, 0.25, 0.15, 0.1, 0.05, 0.03, 0.02};

TEST(SamplerDistributionTest, TopPKeepsSmallestPrefixReachingP) {
  // cumulative 0.4, 0.65, 0.8 >= 0.75: tokens 0..2 at 0.5, 0.3125, 0.1875.
  const SamplingParams p = Params(1.0f, 0, 0.75f, 0.0f, 11);
  const auto expected = ExpectedDistribution(LogitsOf(kProbs), p);
  ASSERT_EQ(expected.size(), 3u);
  EXPECT_NEAR(expected.at(0), 0.5, 1e-6);
  ExpectDrawsFollow(LogitsOf(kProbs), p, 20000);
}

TEST(SamplerDistributionTest, MinPDropsTokensBelowFractionOfBest) {
  // min_p 0.2: keep p >= 0.08, i.e. tokens 0..3, renormalised over 0.9.
  const SamplingParams p = Params(1.0f, 0, 1.0f, 0.2f, 12);
  ASSERT_EQ(ExpectedDistribution(LogitsOf(kProbs), p).size(), 4u);
  ExpectDrawsFollow(LogitsOf(kProbs), p, 20000);
}

TEST(SamplerDistributionTest, TopKThenTemperature) {
  const SamplingParams p = Params(1.5f, 3, 1.0f, 0.0f, 13);
  ASSERT_EQ(ExpectedDistribution(LogitsOf(kProbs), p).size(), 3u);
  ExpectDrawsFollow(LogitsOf(kProbs), p, 20000);
}

TEST(SamplerDistributionTest, LowTemperatureSharpens) {
  const SamplingParams p = Params(0.5f, 0, 1.0f, 0.0f, 14);  // p ~ prob^2
  const auto expected = ExpectedDistribution(LogitsOf(kProbs), p);
  EXPECT_NEAR(expected.at(0), 0.16 / 0.2588, 1e-5);
  ExpectDrawsFollow(LogitsOf(kProbs), p, 20000);
}

TEST(SamplerDistributionTest, NoTruncationDrawsFromFullSoftmax) {
  ExpectDrawsFollow(LogitsOf(kProbs), Params(1.0f, 0, 1.0f, 0.0f, 15), 20000);
}

// The default chain on a larger vocabulary: top-k, top-p and min-p all cut.
TEST(SamplerDistributionTest, DefaultChainOnLargeVocab) {
  const std::vector<float> logits = RandomLogits(4096, 21, 2.0f);
  ExpectDrawsFollow(logits, Params(0.8f, 40, 0.95f, 0.05f, 16), 20000);
  ExpectDrawsFollow(logits, Params(1.0f, 200, 0.9f, 0.0f, 17), 20000);
}

// top_k off: top-p over the whole vocabulary goes through the logit buckets
// (and is shortened by min-p when that is set).
TEST(SamplerDistributionTest, TopPWithoutTopKOnLargeVocab) {
  const std::vector<float> logits = RandomLogits(4096, 22, 1.0f);
  const SamplingParams only_p = Params(1.0f, 0, 0.5f, 0.0f, 18);
  EXPECT_GT(ExpectedDistribution(logits, only_p).size(), 300u);
  ExpectDrawsFollow(logits, only_p, 20000);
  const SamplingParams p_and_min = Params(1.0f, 0, 0.9f, 0.1f, 19);
  ExpectDrawsFollow(logits, p_and_min, 20000);
}

// The top-p cut falls inside a run of equal logits: the lower ids are kept.
TEST(SamplerDistributionTest, TopPCutInsideTiesKeepsLowerIds) {
  std::vector<float> logits(1000, 0.0f);
  logits[999] = logits[998] = 0.001f;  // two slightly better tokens at the end
  const SamplingParams p = Params(1.0f, 0, 0.3051f, 0.0f, 23);
  const auto expected = ExpectedDistribution(logits, p);
  ASSERT_EQ(expected.size(), 306u);
  EXPECT_TRUE(expected.count(998) && expected.count(999) && expected.count(303));
  EXPECT_FALSE(expected.count(304));
  ExpectDrawsFollow(logits, p, 20000);
}

// Logits spread far wider than the bucket range still cut exactly.
TEST(SamplerDistributionTest, TopPWithVeryWideLogits) {
  std::vector<float> logits = RandomLogits(2000, 24, 40.0f);
  ExpectDrawsFollow(logits, Params(1.0f, 0, 0.999f, 0.0f, 25), 20000);
  ExpectDrawsFollow(logits, Params(3.0f / 2, 0, 0.9999f, 0.0f, 26), 20000);
}

TEST(SamplerDistributionTest, AllButOneNegInfinity) {
  std::vector<float> logits(100, -kInf);
  logits[42] = -1000.0f;
  Sampler s(Params(1.0f, 0, 0.95f, 0.05f, 20));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(s.Sample(logits, {}), 42);
}

// A Qwen-sized vocabulary (152k) with a repetition penalty on 64 recent
// tokens, among them the best ones, on the chain's three routes (top-k;
// top-p shortened by min-p; top-p alone through the logit buckets): the
// draws follow the plain chain over the penalised logits. How fast a draw is
// on this vocabulary is measured by bench/sampler_bench, not asserted here.
TEST(SamplerDistributionTest, QwenSizedVocabWithRepeatPenalty) {
  const std::vector<float> logits = RandomLogits(151936, 5);
  std::vector<int32_t> by_logit(logits.size());
  std::iota(by_logit.begin(), by_logit.end(), 0);
  std::partial_sort(by_logit.begin(), by_logit.begin() + 32, by_logit.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  // The 16 best tokens and 48 others.
  std::vector<int32_t> history(by_logit.begin(), by_logit.begin() + 16);
  for (int32_t id = 1000; history.size() < 64; ++id) history.push_back(id);
  constexpr float kPenalty = 1.3f;
  std::vector<float> penalised = logits;
  for (int32_t id : history) {
    float& l = penalised[static_cast<size_t>(id)];
    l = l > 0 ? l / kPenalty : l * kPenalty;
  }
  uint64_t seed = 40;
  for (const SamplingParams& base : {Params(0.8f, 40, 0.95f, 0.05f), Params(0.8f, 0, 0.95f, 0.05f),
                                     Params(0.8f, 0, 0.95f, 0.0f)}) {
    SCOPED_TRACE(::testing::Message() << "top_k " << base.top_k << " min_p " << base.min_p);
    SamplingParams p = base;
    p.seed = ++seed;
    p.repeat_penalty = kPenalty;
    p.repeat_last_n = 64;
    ExpectDrawsFollow(logits, p, 1000, history, &penalised);
  }
}

// ---------------------------------------------------------------------------
// Log-probabilities.

TEST(LogprobTest, TopLogprobsMatchDirectComputation) {
  const std::vector<float> logits = RandomLogits(1000, 31);
  double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(l - max);
  const double lse = max + std::log(sum);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const auto top = Sampler::TopLogprobs(logits, 5);
  ASSERT_EQ(top.size(), 5u);
  for (size_t i = 0; i < top.size(); ++i) {
    EXPECT_EQ(top[i].first, order[i]);
    EXPECT_NEAR(top[i].second, logits[order[i]] - lse, 1e-5);
    EXPECT_NEAR(Sampler::Logprob(logits, order[i]), logits[order[i]] - lse, 1e-5);
  }
  EXPECT_NEAR(Sampler::Logprob(logits, order.back()), logits[order.back()] - lse, 1e-5);
}

TEST(LogprobTest, TiesGoToLowerIdAndSizesAreClamped) {
  const std::vector<float> logits = {1.0f, 2.0f, 2.0f, 0.0f, 2.0f};
  const auto top = Sampler::TopLogprobs(logits, 3);
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].first, 1);
  EXPECT_EQ(top[1].first, 2);
  EXPECT_EQ(top[2].first, 4);
  EXPECT_EQ(top[0].second, top[2].second);
  EXPECT_EQ(Sampler::TopLogprobs(logits, 10).size(), 5u);
  EXPECT_TRUE(Sampler::TopLogprobs(logits, 0).empty());
  EXPECT_TRUE(Sampler::TopLogprobs(logits, -3).empty());
  double total = 0;
  for (const auto& [id, lp] : Sampler::TopLogprobs(logits, 5)) total += std::exp(lp);
  EXPECT_NEAR(total, 1.0, 1e-6);
}

TEST(LogprobTest, OutOfRangeAndNonFinite) {
  const std::vector<float> logits = {0.0f, std::nanf(""), 0.0f, -kInf};
  EXPECT_EQ(Sampler::Logprob(logits, -1), -kInf);
  EXPECT_EQ(Sampler::Logprob(logits, 4), -kInf);
  EXPECT_EQ(Sampler::Logprob(logits, 1), -kInf);
  EXPECT_EQ(Sampler::Logprob(logits, 3), -kInf);
  EXPECT_NEAR(Sampler::Logprob(logits, 0), std::log(0.5), 1e-6);
  const auto top = Sampler::TopLogprobs(logits, 4);
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[0].first, 0);
  EXPECT_EQ(top[1].first, 2);
}

}  // namespace
}  // namespace mx::engine
