// The sampler's OpenAI additions: logit_bias, frequency and presence
// penalties, and drawing under a TokenConstraint.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "engine/sampler.h"

namespace mx::engine {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

SamplingParams Greedy() {
  SamplingParams p;
  p.temperature = 0.0f;
  return p;
}

SamplingParams Plain(uint64_t seed) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

TEST(SamplerBiasTest, LogitBiasMovesTheArgmax) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f};
  SamplingParams p = Greedy();
  EXPECT_EQ(Sampler(p).Sample(logits, {}), 1);
  p.logit_bias = {{2, 1.5f}};
  EXPECT_EQ(Sampler(p).Sample(logits, {}), 2);
  p.logit_bias = {{1, -kInf}, {2, -kInf}};
  EXPECT_EQ(Sampler(p).Sample(logits, {}), 0);
  p.logit_bias = {{7, 100.0f}, {-1, 100.0f}};  // outside the vocabulary: ignored
  EXPECT_EQ(Sampler(p).Sample(logits, {}), 1);
}

TEST(SamplerBiasTest, BannedTokenIsNeverDrawn) {
  const std::vector<float> logits(50, 0.0f);
  SamplingParams p = Plain(5);
  p.logit_bias = {{3, -100.0f}, {4, -kInf}};
  Sampler s(p);
  for (int i = 0; i < 5000; ++i) {
    const int32_t id = s.Sample(logits, {});
    ASSERT_NE(id, 3);
    ASSERT_NE(id, 4);
  }
}

TEST(SamplerBiasTest, FrequencyPenaltyCountsRepeats) {
  // Token 0 seen three times, token 1 once: 5 - 3*1 = 2 < 4 - 1*1 = 3.
  const std::vector<float> logits = {5.0f, 4.0f, 2.5f};
  SamplingParams p = Greedy();
  p.frequency_penalty = 1.0f;
  const std::vector<int32_t> history = {0, 1, 0, 0};
  EXPECT_EQ(Sampler(p).Sample(logits, history), 1);
  p.frequency_penalty = 0.4f;  // 5 - 1.2 = 3.8 > 3.6
  EXPECT_EQ(Sampler(p).Sample(logits, history), 0);
}

TEST(SamplerBiasTest, PresencePenaltyIsOncePerToken) {
  const std::vector<float> logits = {5.0f, 4.5f};
  SamplingParams p = Greedy();
  p.presence_penalty = 0.75f;  // 5 - 0.75 = 4.25 < 4.5, however often 0 was seen
  EXPECT_EQ(Sampler(p).Sample(logits, std::vector<int32_t>{0, 0, 0, 0, 0}), 1);
  p.presence_penalty = 0.25f;
  EXPECT_EQ(Sampler(p).Sample(logits, std::vector<int32_t>{0, 0, 0, 0, 0}), 0);
  p.presence_penalty = -2.0f;  // negative values encourage repeats
  EXPECT_EQ(Sampler(p).Sample(std::vector<float>{4.0f, 5.0f}, std::vector<int32_t>{0}), 0);
}

TEST(SamplerBiasTest, PenaltiesKeepToTheWindow) {
  const std::vector<float> logits = {5.0f, 4.0f};
  SamplingParams p = Greedy();
  p.frequency_penalty = 2.0f;
  p.repeat_last_n = 2;
  EXPECT_EQ(Sampler(p).Sample(logits, std::vector<int32_t>{0, 1, 1}), 0);  // 0 is out of the window
  EXPECT_EQ(Sampler(p).Sample(logits, std::vector<int32_t>{1, 0, 0}), 1);
  p.repeat_last_n = 0;  // off
  EXPECT_EQ(Sampler(p).Sample(logits, std::vector<int32_t>{0, 0, 0}), 0);
}

TEST(SamplerBiasTest, RepeatedCallsStartFromCleanCounts) {
  // The counts scratch must be back to zero after each call.
  const std::vector<float> logits = {5.0f, 4.0f};
  SamplingParams p = Greedy();
  p.frequency_penalty = 0.6f;  // twice seen: 5 - 1.2 = 3.8 < 4
  Sampler s(p);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(s.Sample(logits, std::vector<int32_t>{0, 0}), 1) << "call " << i;
    EXPECT_EQ(s.Sample(logits, std::vector<int32_t>{0}), 0) << "call " << i;
  }
}

TEST(SamplerBiasTest, ValidationNamesTheNewFields) {
  SamplingParams p;
  p.frequency_penalty = 2.5f;
  EXPECT_NE(ValidateSamplingParams(p).message().find("frequency_penalty"), std::string::npos);
  p = SamplingParams();
  p.presence_penalty = std::nanf("");
  EXPECT_NE(ValidateSamplingParams(p).message().find("presence_penalty"), std::string::npos);
  p = SamplingParams();
  p.logit_bias = {{1, kInf}};
  EXPECT_NE(ValidateSamplingParams(p).message().find("logit_bias"), std::string::npos);
  p.logit_bias = {{1, -kInf}, {2, 100.0f}};
  EXPECT_TRUE(ValidateSamplingParams(p).ok());
}

// A constraint that allows a fixed set of tokens and counts its calls.
class SetConstraint : public TokenConstraint {
 public:
  explicit SetConstraint(std::set<int32_t> allowed) : allowed_(std::move(allowed)) {}
  std::unique_ptr<TokenConstraint> Clone() const override {
    return std::make_unique<SetConstraint>(allowed_);
  }
  bool Allows(int32_t token) override {
    ++allows_calls;
    return allowed_.count(token) > 0;
  }
  void Mask(std::span<float> logits) override {
    ++mask_calls;
    for (size_t i = 0; i < logits.size(); ++i) {
      if (!allowed_.count(static_cast<int32_t>(i))) logits[i] = -kInf;
    }
  }
  void Accept(int32_t) override {}
  bool MustEnd() const override { return false; }
  int allows_calls = 0;
  int mask_calls = 0;

 private:
  std::set<int32_t> allowed_;
};

TEST(SamplerConstraintTest, AllowedDrawCostsOneCheckAndNoMask) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f};
  SetConstraint c({1, 2});
  EXPECT_EQ(Sampler(Greedy()).Sample(logits, {}, &c), 1);
  EXPECT_EQ(c.allows_calls, 1);
  EXPECT_EQ(c.mask_calls, 0);
}

TEST(SamplerConstraintTest, GreedyUnderAConstraintIsTheMaskedArgmax) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int round = 0; round < 50; ++round) {
    std::vector<float> logits(300);
    for (float& x : logits) x = dist(rng);
    std::set<int32_t> allowed;
    for (int k = 0; k < 20; ++k) allowed.insert(static_cast<int32_t>(rng() % 300));
    int32_t best = -1;
    for (int32_t id : allowed) {
      if (best < 0 || logits[id] > logits[best]) best = id;
    }
    SetConstraint c(allowed);
    EXPECT_EQ(Sampler(Greedy()).Sample(logits, {}, &c), best) << "round " << round;
  }
}

TEST(SamplerConstraintTest, SampledDrawsFollowTheMaskedDistribution) {
  // Logits favour the refused tokens; the draws must follow the softmax over
  // the allowed ones only (rejection then mask is exact).
  const std::vector<float> logits = {3.0f, 2.5f, 0.0f, 0.5f, 1.0f};
  const std::set<int32_t> allowed = {2, 3, 4};
  SetConstraint c(allowed);
  Sampler s(Plain(77));
  std::vector<int> counts(5, 0);
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const int32_t id = s.Sample(logits, {}, &c);
    ASSERT_TRUE(allowed.count(id)) << id;
    ++counts[id];
  }
  const double z = std::exp(0.0) + std::exp(0.5) + std::exp(1.0);
  for (int32_t id : allowed) {
    const double p = std::exp(logits[id]) / z;
    EXPECT_NEAR(counts[id], n * p, 5 * std::sqrt(n * p * (1 - p)) + 1) << "token " << id;
  }
  EXPECT_GT(c.mask_calls, 0);
}

TEST(SamplerConstraintTest, NothingAllowedReturnsMinusOne) {
  SetConstraint c({});
  EXPECT_EQ(Sampler(Greedy()).Sample(std::vector<float>{1.0f, 2.0f}, {}, &c), -1);
  SetConstraint banned({1});  // allowed only a token the bias bans
  SamplingParams p = Plain(3);
  p.logit_bias = {{1, -kInf}};
  EXPECT_EQ(Sampler(p).Sample(std::vector<float>{1.0f, 2.0f}, {}, &banned), -1);
}

TEST(SamplerConstraintTest, SameSeedSameConstrainedSequence) {
  std::vector<float> logits(200);
  std::mt19937_64 rng(4);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (float& x : logits) x = dist(rng);
  std::set<int32_t> allowed;
  for (int32_t i = 0; i < 200; i += 7) allowed.insert(i);
  auto run = [&] {
    SetConstraint c(allowed);
    Sampler s(Plain(123));
    std::vector<int32_t> out;
    for (int i = 0; i < 100; ++i) out.push_back(s.Sample(logits, out, &c));
    return out;
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace mx::engine
