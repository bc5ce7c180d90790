// The low-bit weight types end to end: the 17 tiny-llama256 models that
// llama.cpp's llama-quantize made (../shared/ref/quant/models, one per file
// type) against llama.cpp's native logits, with the criteria of
// ref/README-quants.md "Tolerances": max abs < 0.35 and mean < 0.05, and,
// since the engine rounds activations exactly as ggml does, >= 90 % of the
// positions within 1e-3. Plus greedy steps and a 3-turn conversation
// (teacher-forced with llama.cpp's tokens; the argmax compared where
// llama.cpp's top-1 margin is wider than twice the tolerance), and chunked /
// token-by-token reads giving the one-batch logits bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "models/model.h"
#include "models/runner.h"
#include "models/runner_test_util.h"
#include "ref_data.h"

namespace mx::models {
namespace {

using mx::testing::LoadRefModel;
using mx::testing::RefModel;
using mx::testing::RefPrompt;
using mx::testing::RefTurn;

constexpr float kMaxTol = 0.35f;         // any logit, any position
constexpr double kMeanTol = 0.05;        // mean over the compared logits
constexpr float kCloseTol = 1e-3f;       // a position "close" to llama.cpp's
constexpr double kMinCloseShare = 0.90;  // share of close positions

class QuantRefTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ref_ = LoadRefModel(GetParam());
    auto model =
        Model::Load(Env::Default(), ref_.model_path, {.progress = nullptr, .prefault = false});
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::move(model).value();
    auto runner = Runner::Create(*model_, {.n_threads = 2, .kv_type = DType::kF32, .n_ctx = 2048});
    ASSERT_TRUE(runner.ok()) << runner.status().ToString();
    runner_ = std::move(runner).value();
  }

  // Logits of every position of `tokens` read in one call: [n][n_vocab].
  std::vector<float> Read(SequenceState* seq, const std::vector<int32_t>& tokens) {
    return ReadAllPositions(*runner_, seq, tokens);
  }

  RefModel ref_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Runner> runner_;
};

TEST_P(QuantRefTest, LogitsMatchLlamaCppNative) {
  const int64_t n_vocab = runner_->n_vocab();
  ASSERT_EQ(n_vocab, 4096);
  ASSERT_FALSE(ref_.prompts.empty());
  float worst = 0;
  double sum = 0;
  int64_t n_sum = 0, positions = 0, close = 0, argmax_checked = 0;
  for (const RefPrompt& p : ref_.prompts) {
    SCOPED_TRACE(p.name);
    auto seq = runner_->NewSequence();
    const std::vector<float> logits = Read(seq.get(), p.tokens);
    ASSERT_EQ(logits.size(), p.tokens.size() * static_cast<size_t>(n_vocab));
    ASSERT_EQ(p.top5_per_position.size(), p.tokens.size());
    for (size_t pos = 0; pos < p.tokens.size(); ++pos) {
      const float* row = &logits[pos * static_cast<size_t>(n_vocab)];
      float pos_worst = 0;
      for (const auto& [id, value] : p.top5_per_position[pos]) {
        const float d = std::fabs(row[id] - value);
        pos_worst = std::max(pos_worst, d);
        sum += d;
        ++n_sum;
      }
      worst = std::max(worst, pos_worst);
      close += pos_worst < kCloseTol;
      ++positions;
      const auto& top5 = p.top5_per_position[pos];
      if (top5[0].second - top5[1].second > 2 * kMaxTol) {
        const int32_t ours = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
        EXPECT_EQ(ours, top5[0].first) << "argmax at position " << pos;
        ++argmax_checked;
      }
    }
    const float* last = &logits[(p.tokens.size() - 1) * static_cast<size_t>(n_vocab)];
    for (int64_t i = 0; i < n_vocab; ++i) {
      const float d = std::fabs(last[i] - p.last_logits[static_cast<size_t>(i)]);
      worst = std::max(worst, d);
      sum += d;
      ++n_sum;
    }
  }
  const double mean = sum / static_cast<double>(n_sum);
  const double share = static_cast<double>(close) / static_cast<double>(positions);
  std::printf(
      "%s: max |logit diff| %.3g, mean %.3g, %.1f %% of %lld positions "
      "within %g, "
      "%lld argmax checked\n",
      GetParam(), worst, mean, 100 * share, static_cast<long long>(positions), kCloseTol,
      static_cast<long long>(argmax_checked));
  EXPECT_LT(worst, kMaxTol);
  EXPECT_LT(mean, kMeanTol);
  EXPECT_GE(share, kMinCloseShare);
}

// Each prompt's greedy continuation, fed llama.cpp's tokens: our argmax is
// llama.cpp's wherever its top-1 margin is wider than 2 * kMaxTol, and at
// >= 90 % of all steps.
TEST_P(QuantRefTest, GreedyStepsPickLlamaCppsTokens) {
  const int64_t n_vocab = runner_->n_vocab();
  int steps = 0, agree = 0;
  for (const RefPrompt& p : ref_.prompts) {
    SCOPED_TRACE(p.name);
    auto seq = runner_->NewSequence();
    const std::vector<float> logits = Read(seq.get(), p.tokens);
    std::vector<float> row(logits.end() - n_vocab, logits.end());
    for (size_t step = 0; step < p.greedy.tokens.size(); ++step) {
      const int32_t ours =
          static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
      if (p.greedy.margin_top1_top2[step] > 2 * kMaxTol) {
        EXPECT_EQ(ours, p.greedy.tokens[step]) << "step " << step;
      }
      agree += ours == p.greedy.tokens[step];
      ++steps;
      BatchEntry e{seq.get(), p.greedy.tokens[step], true};
      ASSERT_TRUE(runner_->Forward({&e, 1}, &row).ok());
    }
  }
  std::printf("%s: greedy argmax agrees at %d of %d steps\n", GetParam(), agree, steps);
  EXPECT_GE(agree, steps * 9 / 10);
}

// A prompt read in two chunks (llama.cpp's split) or one token per call
// gives the one-batch logits bit for bit (the kernels are batch-invariant;
// llama.cpp's own token-by-token run differs by up to 0.18 here).
TEST_P(QuantRefTest, ChunkedReadsGiveTheOneBatchLogits) {
  const int64_t n_vocab = runner_->n_vocab();
  for (const RefPrompt& p : ref_.prompts) {
    if (p.chunk_split <= 0 || p.chunk_split >= static_cast<int64_t>(p.tokens.size())) continue;
    SCOPED_TRACE(p.name);
    auto one = runner_->NewSequence();
    const std::vector<float> batch = Read(one.get(), p.tokens);
    auto two = runner_->NewSequence();
    const size_t split = static_cast<size_t>(p.chunk_split);
    std::vector<float> chunked =
        Read(two.get(), std::vector<int32_t>(p.tokens.begin(), p.tokens.begin() + split));
    const std::vector<float> rest =
        Read(two.get(), std::vector<int32_t>(p.tokens.begin() + split, p.tokens.end()));
    chunked.insert(chunked.end(), rest.begin(), rest.end());
    ASSERT_EQ(chunked.size(), batch.size());
    EXPECT_EQ(0, std::memcmp(chunked.data(), batch.data(), batch.size() * 4)) << "two chunks";
    auto single = runner_->NewSequence();
    std::vector<float> row;
    for (size_t i = 0; i < p.tokens.size(); ++i) {
      BatchEntry e{single.get(), p.tokens[i], true};
      ASSERT_TRUE(runner_->Forward({&e, 1}, &row).ok());
      ASSERT_EQ(0, std::memcmp(row.data(), &batch[i * static_cast<size_t>(n_vocab)], n_vocab * 4))
          << "token by token, position " << i;
    }
  }
}

// The 3-turn conversation as a prompt cache runs it (runner_ref_test.cc
// DenseRefTest): turn k continues the state turn k-1 left, cut back to the
// tokens they share.
TEST_P(QuantRefTest, ConversationTurnsContinueThePreviousState) {
  const int64_t n_vocab = runner_->n_vocab();
  ASSERT_EQ(ref_.conversation.size(), 3u);
  auto seq = runner_->NewSequence();
  for (size_t k = 0; k < ref_.conversation.size(); ++k) {
    SCOPED_TRACE("turn " + std::to_string(k + 1));
    const RefTurn& t = ref_.conversation[k];
    if (k > 0) {
      ASSERT_GT(t.n_kept, 0);
      ASSERT_TRUE(seq->Truncate(t.n_kept).ok());
    }
    const std::vector<int32_t> rest(t.tokens.begin() + seq->n_tokens(), t.tokens.end());
    const std::vector<float> logits = Read(seq.get(), rest);
    std::vector<float> row(logits.end() - n_vocab, logits.end());
    float max_diff = 0;
    for (int64_t i = 0; i < n_vocab; ++i) {
      max_diff = std::max(
          max_diff, std::fabs(row[static_cast<size_t>(i)] - t.last_logits[static_cast<size_t>(i)]));
    }
    EXPECT_LT(max_diff, kMaxTol) << "last logits after reading " << rest.size() << " tokens";
    for (size_t step = 0; step < t.greedy.tokens.size(); ++step) {
      if (t.greedy.margin_top1_top2[step] > 2 * kMaxTol) {
        const int32_t ours =
            static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
        EXPECT_EQ(ours, t.greedy.tokens[step]) << "step " << step;
      }
      BatchEntry e{seq.get(), t.greedy.tokens[step], true};
      ASSERT_TRUE(runner_->Forward({&e, 1}, &row).ok());
    }
  }
}

std::string ModelCaseName(const ::testing::TestParamInfo<const char*>& info) {
  std::string s = info.param;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

// Most downloaded first (README-quants.md "Tensor-type census").
INSTANTIATE_TEST_SUITE_P(LowBit, QuantRefTest,
                         ::testing::Values("tiny-llama256l1t-q3_k_s", "tiny-llama256l1-q3_k_m",
                                           "tiny-llama256l1t-q3_k_l", "tiny-llama256l1-q2_k",
                                           "tiny-llama256l1-iq4_xs", "tiny-llama256l1t-iq4_nl",
                                           "tiny-llama256l1-iq3_s", "tiny-llama256l1t-iq3_xxs",
                                           "tiny-llama256l1t-iq2_xxs", "tiny-llama256l1t-iq2_xs",
                                           "tiny-llama256l1t-iq2_s", "tiny-llama256l1t-iq1_s",
                                           "tiny-llama256l1t-iq1_m", "tiny-llama256l1t-tq1_0",
                                           "tiny-llama256l1t-tq2_0", "tiny-llama256l1-q1_0",
                                           "tiny-llama256l1t-q2_0"),
                         ModelCaseName);

}  // namespace
}  // namespace mx::models
