// The mixture-of-experts block against llama.cpp's routing
// (../shared/ref/routing-*.json, README-moe.md): at every position and MoE
// layer of the 7 prompts the same experts in the same order with the same
// weights, wherever llama.cpp's decision is not a near-tie; and a token's
// logits that do not depend on which tokens share its batch or its experts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "models/model.h"
#include "models/runner.h"
#include "models/runner_test_util.h"
#include "ref_data.h"

namespace mx::models {
namespace {

// A decision whose k-th and (k+1)-th scores are closer than this may go
// either way in another float32 engine (README-moe.md "Near-ties").
constexpr float kNearTie = 1e-4f;
// llama.cpp's own quantized runs differ by up to 0.041 in the logits between
// one batch and token by token (README-moe.md): its router inputs carry that
// much noise, so a quantized run's decisions (and the order of two choices)
// are compared where their margin is above it, in probability units.
constexpr float kQuantizedNearTie = 1e-2f;

struct RoutingCase {
  std::string model;      // the ref set (and its routing file)
  bool quantized_native;  // llama.cpp's native run of a quantized file
};

std::string Name(const ::testing::TestParamInfo<RoutingCase>& info) {
  std::string s = info.param.model;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

class MoeRoutingTest : public ::testing::TestWithParam<RoutingCase> {
 protected:
  void SetUp() override {
    ref_ = mx::testing::LoadRefModel(GetParam().model);
    routing_ = mx::testing::LoadRefRouting(GetParam().model);
    ASSERT_FALSE(routing_.prompts.empty()) << "no routing file for " << GetParam().model;
    auto model = Model::Load(Env::Default(), ref_.model_path, {.progress = nullptr, .prefault = false});
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::move(model).value();
    auto runner = Runner::Create(*model_, {.n_threads = 2, .kv_type = DType::kF32, .n_ctx = 2048});
    ASSERT_TRUE(runner.ok()) << runner.status().ToString();
    runner_ = std::move(runner).value();
  }

  mx::testing::RefModel ref_;
  mx::testing::RefRouting routing_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Runner> runner_;
};

TEST_P(MoeRoutingTest, ExpertsAndWeightsAreLlamaCppsAtEveryDecision) {
  ASSERT_EQ(model_->config().moe.n_expert, routing_.n_expert);
  ASSERT_EQ(model_->config().moe.n_expert_used, routing_.n_expert_used);
  const bool quantized = GetParam().quantized_native;
  int64_t compared = 0, near_ties = 0, near_tie_flips = 0;
  for (const auto& p : routing_.prompts) {
    SCOPED_TRACE(p.name);
    std::vector<RoutingDecision> log;
    runner_->set_routing_log(&log);
    auto seq = runner_->NewSequence();
    ReadAllPositions(*runner_, seq.get(), p.tokens);
    runner_->set_routing_log(nullptr);
    // A quantized run follows llama.cpp's only up to its first flip at a
    // near-tie: the other expert's output moves everything after it.
    int64_t stop_at = static_cast<int64_t>(p.tokens.size());
    for (const auto& layer : p.layers) {
      for (size_t pos = 0; pos < p.tokens.size(); ++pos) {
        const RoutingDecision* ours = nullptr;
        for (const RoutingDecision& d : log) {
          if (d.layer == layer.layer && d.entry == static_cast<int64_t>(pos)) ours = &d;
        }
        ASSERT_NE(ours, nullptr) << "no decision at layer " << layer.layer << " position " << pos;
        const std::vector<int32_t>& want = layer.experts[pos];
        const std::vector<float>& want_w = layer.weights[pos];
        const float gap = layer.gap[pos];
        if (gap < (quantized ? kQuantizedNearTie : kNearTie)) {
          ++near_ties;
          if (ours->experts != want) {
            ++near_tie_flips;
            stop_at = std::min<int64_t>(stop_at, static_cast<int64_t>(pos));
          }
          continue;
        }
        if (quantized && static_cast<int64_t>(pos) > stop_at) continue;
        ++compared;
        std::vector<int32_t> got = ours->experts;
        std::vector<float> got_w = ours->weights;
        if (quantized) {
          // Two choices within the noise may come in either order.
          for (size_t j = 0; j + 1 < want.size(); ++j) {
            if (got[j] == want[j + 1] && got[j + 1] == want[j] &&
                std::fabs(want_w[j] - want_w[j + 1]) < 2 * kQuantizedNearTie) {
              std::swap(got[j], got[j + 1]);
              std::swap(got_w[j], got_w[j + 1]);
            }
          }
        }
        ASSERT_EQ(got, want) << "layer " << layer.layer << " position " << pos << " (gap " << gap
                             << ")";
        for (size_t j = 0; j < want_w.size(); ++j) {
          EXPECT_NEAR(got_w[j], want_w[j], quantized ? 3 * kQuantizedNearTie : 1e-4)
              << "layer " << layer.layer << " position " << pos << " choice " << j;
        }
      }
    }
  }
  std::printf("%s: %lld decisions equal to llama.cpp's, %lld near-ties (%lld went the other way)\n",
              GetParam().model.c_str(), static_cast<long long>(compared),
              static_cast<long long>(near_ties), static_cast<long long>(near_tie_flips));
  EXPECT_GT(compared, 1000);
  // Only a quantized run may flip at a near-tie; an F32 run is as close as
  // llama.cpp's numpy check (README-moe.md: the same experts everywhere).
  if (!quantized) {
    EXPECT_EQ(near_tie_flips, 0);
  }
}

// A token's logits are the same read in one batch, token by token, in
// chunks, or beside another sequence (its experts then also run over that
// sequence's tokens).
TEST_P(MoeRoutingTest, LogitsDoNotDependOnTheBatch) {
  const std::vector<int32_t>& tokens = ref_.prompt("long").tokens;
  const std::vector<int32_t>& other = ref_.prompt("code").tokens;
  const int64_t n_vocab = runner_->n_vocab();
  auto one = runner_->NewSequence();
  const std::vector<float> whole = ReadAllPositions(*runner_, one.get(), tokens);
  ASSERT_EQ(whole.size(), tokens.size() * static_cast<size_t>(n_vocab));

  for (const size_t chunk : {size_t{1}, size_t{7}}) {
    SCOPED_TRACE("chunks of " + std::to_string(chunk) + " beside another sequence");
    auto seq = runner_->NewSequence();
    auto side = runner_->NewSequence();
    std::vector<float> got;
    for (size_t at = 0; at < tokens.size(); at += chunk) {
      std::vector<BatchEntry> batch;
      const size_t end = std::min(tokens.size(), at + chunk);
      // The other sequence's tokens first, so this one's rows move in every
      // expert's gathered matrix.
      for (size_t i = at; i < std::min(other.size(), at + chunk); ++i) batch.push_back({side.get(), other[i], false});
      for (size_t i = at; i < end; ++i) batch.push_back({seq.get(), tokens[i], true});
      std::vector<float> logits;
      ASSERT_TRUE(runner_->Forward(batch, &logits).ok());
      got.insert(got.end(), logits.begin(), logits.end());
    }
    ASSERT_EQ(got.size(), whole.size());
    EXPECT_EQ(0, std::memcmp(got.data(), whole.data(), got.size() * sizeof(float)));
  }
}

INSTANTIATE_TEST_SUITE_P(Moe, MoeRoutingTest,
                         ::testing::Values(RoutingCase{"tiny-qwen3moe", false},
                                           RoutingCase{"tiny-qwen3moe-q8_0", true},
                                           RoutingCase{"tiny-qwen35moe", false},
                                           RoutingCase{"tiny-nemotron_h_moe", false},
                                           RoutingCase{"tiny-gpt-oss", false},
                                           RoutingCase{"tiny-gpt-oss-mxfp4", true}),
                         Name);

}  // namespace
}  // namespace mx::models
