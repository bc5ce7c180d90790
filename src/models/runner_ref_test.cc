// The engine against llama.cpp's reference outputs (../shared/ref): logits at
// every position of every prompt, the full logits of the chat prompt, and the
// greedy continuations, with the tolerances stated in ref/README.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "kernels/kernels.h"
#include "models/model.h"
#include "models/runner.h"
#include "models/runner_test_util.h"
#include "ref_data.h"

namespace mx::models {
namespace {

using mx::testing::LoadAllLogits;
using mx::testing::LoadRefModel;
using mx::testing::RefModel;
using mx::testing::RefPrompt;
using mx::testing::RefTurn;

// Which kernels a case is for: BF16 weights read f32 activations on every
// path but amx, which rounds them to bf16 as llama.cpp does (kernels.h).
enum class Bf16Activations { kAny, kF32, kRounded };

struct RefCase {
  std::string model;
  DType kv_type;
  bool use_dequantized_reference;  // compare with dequantized_f32_reference
  float max_tol;                   // max abs logit difference allowed
  float mean_tol;                  // mean abs difference allowed on last_logits
  Bf16Activations bf16 = Bf16Activations::kAny;
  // A mixture of experts whose routing may tip where llama.cpp's margin is
  // below this (an F16 KV cache; in the units its router ranks):
  // LogitsMatchAtEveryPosition leaves those positions out. 0: no flips.
  float flip_gap = 0.0f;
};


std::string CaseName(const ::testing::TestParamInfo<RefCase>& info) {
  std::string s = info.param.model + (info.param.kv_type == DType::kF16 ? "_kvf16" : "_kvf32");
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

class RefTest : public ::testing::TestWithParam<RefCase> {
 protected:
  void SetUp() override {
    const Bf16Activations want = GetParam().bf16;
    if (want != Bf16Activations::kAny &&
        kernels::Bf16ActivationsRounded() != (want == Bf16Activations::kRounded)) {
      GTEST_SKIP() << "for kernels that " << (want == Bf16Activations::kRounded ? "round" : "keep")
                   << " BF16 weights' activations "
                   << (want == Bf16Activations::kRounded ? "to bf16" : "in f32") << "; the "
                   << kernels::IsaName(kernels::ActiveIsa()) << " path runs the other case";
    }
    ref_ = LoadRefModel(GetParam().model);
    auto model = Model::Load(Env::Default(), ref_.model_path, {.progress = nullptr, .prefault = false});
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::move(model).value();
    auto runner = Runner::Create(*model_, {.n_threads = 2, .kv_type = GetParam().kv_type, .n_ctx = 2048});
    ASSERT_TRUE(runner.ok()) << runner.status().ToString();
    runner_ = std::move(runner).value();
  }

  // All positions' logits of `tokens` read in one batch: [n][n_vocab].
  std::vector<float> ReadAll(SequenceState* seq, const std::vector<int32_t>& tokens) {
    return ReadAllPositions(*runner_, seq, tokens);
  }

  void CheckGreedyContinuations();

  RefModel ref_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Runner> runner_;
};

// The positions of `p` from the first one where one of our routing
// decisions (log) chose other experts than llama.cpp on (a mixture of
// experts with an F16 KV cache, whose rounding may tip a near-tie; the other
// expert's output reaches every later position through attention). A flip
// where llama.cpp's margin was not narrow is a test failure.
std::vector<bool> RoutingFlips(const mx::testing::RefRoutingPrompt* p,
                               const std::vector<RoutingDecision>& log, size_t n, float flip_gap) {
  std::vector<bool> flipped(n, false);
  if (p == nullptr) return flipped;
  for (const RoutingDecision& d : log) {
    for (const auto& layer : p->layers) {
      const auto pos = static_cast<size_t>(d.entry);
      if (layer.layer != d.layer || pos >= n) continue;
      // Two choices of near-equal weight may swap places: only the sum's
      // order changes, not the experts.
      std::vector<int32_t> want = layer.experts[pos], got = d.experts;
      std::sort(want.begin(), want.end());
      std::sort(got.begin(), got.end());
      if (want == got) continue;
      EXPECT_LT(layer.gap[pos], flip_gap) << "routing of layer " << d.layer << " position " << pos;
      flipped[pos] = true;
    }
  }
  for (size_t pos = 1; pos < n; ++pos) flipped[pos] = flipped[pos] || flipped[pos - 1];
  return flipped;
}

TEST_P(RefTest, LogitsMatchAtEveryPosition) {
  const RefCase& rc = GetParam();
  const int64_t n_vocab = runner_->n_vocab();
  ASSERT_EQ(n_vocab, 4096);
  ASSERT_FALSE(ref_.prompts.empty());
  // Mixtures of experts: positions whose routing tipped the other way at a
  // near-tie are left out (their logits differ at full size by design).
  const mx::testing::RefRouting routing =
      rc.flip_gap > 0 ? mx::testing::LoadRefRouting(rc.model) : mx::testing::RefRouting{};
  size_t left_out = 0, positions = 0;
  int prompts_flipped = 0;
  for (const RefPrompt& p : ref_.prompts) {
    positions += p.tokens.size();
    SCOPED_TRACE(p.name);
    auto seq = runner_->NewSequence();
    std::vector<RoutingDecision> log;
    runner_->set_routing_log(rc.flip_gap > 0 ? &log : nullptr);
    std::vector<float> logits = ReadAll(seq.get(), p.tokens);
    runner_->set_routing_log(nullptr);
    const std::vector<bool> flipped =
        RoutingFlips(routing.prompt(p.name), log, p.tokens.size(), rc.flip_gap);
    prompts_flipped += flipped.back() ? 1 : 0;
    ASSERT_EQ(logits.size(), p.tokens.size() * static_cast<size_t>(n_vocab));
    const auto& top5 = rc.use_dequantized_reference ? p.deq_top5_per_position : p.top5_per_position;
    const auto& last = rc.use_dequantized_reference ? p.deq_last_logits : p.last_logits;
    ASSERT_EQ(top5.size(), p.tokens.size());

    // Top-5 logits at every position, and the argmax where it is not a near-tie.
    float worst = 0;
    for (size_t pos = 0; pos < p.tokens.size(); ++pos) {
      if (flipped[pos]) {
        ++left_out;
        continue;
      }
      const float* row = &logits[pos * static_cast<size_t>(n_vocab)];
      for (const auto& [id, value] : top5[pos]) worst = std::max(worst, std::fabs(row[id] - value));
      float margin = top5[pos][0].second - top5[pos][1].second;
      if (margin > 2 * rc.max_tol) {
        int32_t ours = static_cast<int32_t>(std::max_element(row, row + n_vocab) - row);
        EXPECT_EQ(ours, top5[pos][0].first) << "argmax at position " << pos;
      }
    }
    EXPECT_LT(worst, rc.max_tol) << "top-5 logits";

    // Every logit of the last position.
    if (flipped.back()) continue;
    const float* row = &logits[(p.tokens.size() - 1) * static_cast<size_t>(n_vocab)];
    double sum = 0;
    float max_diff = 0;
    for (int64_t i = 0; i < n_vocab; ++i) {
      float d = std::fabs(row[i] - last[static_cast<size_t>(i)]);
      max_diff = std::max(max_diff, d);
      sum += d;
    }
    std::printf("%s %s: max |logit diff| %.2e over the top-5 of every position, %.2e at the last\n",
                CaseName({rc, 0}).c_str(), p.name.c_str(), worst, max_diff);
    EXPECT_LT(max_diff, rc.max_tol) << "last position";
    EXPECT_LT(sum / static_cast<double>(n_vocab), rc.mean_tol) << "last position mean";
  }
  if (rc.flip_gap > 0) {
    std::printf("%s: %zu of %zu positions left out from a routing flip at a near-tie on (%d prompts)\n",
                CaseName({rc, 0}).c_str(), left_out, positions, prompts_flipped);
    EXPECT_LE(prompts_flipped, 2) << "of " << ref_.prompts.size() << " prompts";
  }
}

// Cases compared with llama.cpp's native run of the same file (F32 models):
// the full chat logits and the greedy continuations exist for those.
class NativeRefTest : public RefTest {};

TEST_P(NativeRefTest, ChatPromptFullLogits) {
  const RefCase& rc = GetParam();
  std::vector<float> want = LoadAllLogits(rc.model);
  ASSERT_FALSE(want.empty()) << "no logits/" << rc.model << ".chat.f32";
  const RefPrompt& p = ref_.prompt("chat");
  auto seq = runner_->NewSequence();
  std::vector<float> got = ReadAll(seq.get(), p.tokens);
  ASSERT_EQ(got.size(), want.size());
  float max_diff = 0;
  double sum = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    float d = std::fabs(got[i] - want[i]);
    max_diff = std::max(max_diff, d);
    sum += d;
  }
  EXPECT_LT(max_diff, rc.max_tol);
  EXPECT_LT(sum / static_cast<double>(got.size()), rc.mean_tol);
}

// Greedy continuation, 32 steps, compared while llama.cpp's top-1 margin is
// larger than our error (ref/README.md "Suggested pass criteria").
void RefTest::CheckGreedyContinuations() {
  const RefCase& rc = GetParam();
  const int64_t n_vocab = runner_->n_vocab();
  int compared = 0;
  for (const RefPrompt& p : ref_.prompts) {
    SCOPED_TRACE(p.name);
    auto seq = runner_->NewSequence();
    std::vector<float> logits = ReadAll(seq.get(), p.tokens);
    std::vector<float> row(logits.end() - n_vocab, logits.end());
    for (size_t step = 0; step < p.greedy.tokens.size(); ++step) {
      if (p.greedy.margin_top1_top2[step] < 2 * rc.max_tol) break;
      int32_t ours = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
      ASSERT_EQ(ours, p.greedy.tokens[step]) << "step " << step;
      ++compared;
      BatchEntry e{seq.get(), p.greedy.tokens[step], true};
      ASSERT_TRUE(runner_->Forward({&e, 1}, &row).ok());
    }
  }
  // A wider tolerance (F16 KV) stops the comparison at the first margin below it.
  EXPECT_GT(compared, rc.max_tol < 5e-3f ? 100 : 50);
}

TEST_P(NativeRefTest, GreedyContinuationMatches) { CheckGreedyContinuations(); }

// The dense-family sets (ref/README-dense.md) have no full-logits file but a
// 3-turn conversation.
class DenseRefTest : public RefTest {};

TEST_P(DenseRefTest, GreedyContinuationMatches) { CheckGreedyContinuations(); }

// The conversation as a prompt cache runs it: turn k continues the state
// turn k-1 left (its prompt + 16 greedy tokens), cut back to the n_kept
// tokens they share, reading only the rest; its last logits and greedy
// tokens are llama.cpp's for the fresh turn.
TEST_P(DenseRefTest, ConversationTurnsContinueThePreviousState) {
  const RefCase& rc = GetParam();
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
    std::vector<float> logits = ReadAll(seq.get(), rest);
    std::vector<float> row(logits.end() - n_vocab, logits.end());
    float max_diff = 0;
    for (int64_t i = 0; i < n_vocab; ++i) {
      max_diff = std::max(max_diff, std::fabs(row[static_cast<size_t>(i)] - t.last_logits[static_cast<size_t>(i)]));
    }
    EXPECT_LT(max_diff, rc.max_tol) << "last logits after reading " << rest.size() << " tokens";
    // All 16 greedy tokens go into the state (the next turn cuts back into them).
    bool comparing = true;
    for (size_t step = 0; step < t.greedy.tokens.size(); ++step) {
      comparing = comparing && t.greedy.margin_top1_top2[step] >= 2 * rc.max_tol;
      if (comparing) {
        int32_t ours = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
        ASSERT_EQ(ours, t.greedy.tokens[step]) << "step " << step;
      }
      BatchEntry e{seq.get(), t.greedy.tokens[step], true};
      ASSERT_TRUE(runner_->Forward({&e, 1}, &row).ok());
    }
  }
}

// Hybrid sets without a full-logits file (ref/README-moe.md): the greedy
// continuations, a prompt read in llama.cpp's two chunks (the recurrent
// state carried across), and the 3-turn conversation's turns read fresh (a
// recurrent state cannot be cut back; the cache restarts from snapshots).
class HybridRefTest : public RefTest {};

TEST_P(HybridRefTest, GreedyContinuationMatches) { CheckGreedyContinuations(); }

float MaxDiff(const float* a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

TEST_P(HybridRefTest, TwoChunksCarryTheRecurrentState) {
  const RefCase& rc = GetParam();
  const size_t n_vocab = static_cast<size_t>(runner_->n_vocab());
  int checked = 0;
  for (const RefPrompt& p : ref_.prompts) {
    if (p.chunk_split <= 0 || p.last_logits_after_chunk1.empty()) continue;
    SCOPED_TRACE(p.name);
    const auto split = static_cast<size_t>(p.chunk_split);
    auto seq = runner_->NewSequence();
    const std::vector<float> first =
        ReadAll(seq.get(), std::vector<int32_t>(p.tokens.begin(), p.tokens.begin() + split));
    EXPECT_LT(MaxDiff(&first[first.size() - n_vocab], p.last_logits_after_chunk1), rc.max_tol);
    const std::vector<float> rest =
        ReadAll(seq.get(), std::vector<int32_t>(p.tokens.begin() + split, p.tokens.end()));
    EXPECT_LT(MaxDiff(&rest[rest.size() - n_vocab], p.last_logits), rc.max_tol);
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST_P(HybridRefTest, ConversationTurnsReadFresh) {
  const RefCase& rc = GetParam();
  const int64_t n_vocab = runner_->n_vocab();
  ASSERT_EQ(ref_.conversation.size(), 3u);
  for (size_t k = 0; k < ref_.conversation.size(); ++k) {
    SCOPED_TRACE("turn " + std::to_string(k + 1));
    const RefTurn& t = ref_.conversation[k];
    auto seq = runner_->NewSequence();
    std::vector<float> logits = ReadAll(seq.get(), t.tokens);
    std::vector<float> row(logits.end() - n_vocab, logits.end());
    EXPECT_LT(MaxDiff(row.data(), t.last_logits), rc.max_tol);
    for (size_t step = 0; step < t.greedy.tokens.size(); ++step) {
      if (t.greedy.margin_top1_top2[step] < 2 * rc.max_tol) break;
      const auto ours = static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
      ASSERT_EQ(ours, t.greedy.tokens[step]) << "step " << step;
      BatchEntry e{seq.get(), t.greedy.tokens[step], true};
      ASSERT_TRUE(runner_->Forward({&e, 1}, &row).ok());
    }
  }
}

const auto kNativeCases = ::testing::Values(
    // F32 models with an F32 KV cache: tight (README: a correct F32 engine lands near 1e-5).
    RefCase{"tiny-llama", DType::kF32, false, 1e-3f, 1e-4f},
    RefCase{"tiny-qwen3", DType::kF32, false, 1e-3f, 1e-4f},
    RefCase{"tiny-hybrid-nemotron_h", DType::kF32, false, 1e-3f, 1e-4f},
    RefCase{"tiny-qwen35", DType::kF32, false, 1e-3f, 1e-4f},
    // F32 models with our default F16 KV cache: README's F16-KV criteria.
    RefCase{"tiny-llama", DType::kF16, false, 1e-2f, 2e-3f},
    RefCase{"tiny-qwen3", DType::kF16, false, 1e-2f, 2e-3f},
    RefCase{"tiny-hybrid-nemotron_h", DType::kF16, false, 1e-2f, 2e-3f},
    RefCase{"tiny-qwen35", DType::kF16, false, 1e-2f, 2e-3f});

INSTANTIATE_TEST_SUITE_P(Native, RefTest, kNativeCases, CaseName);
INSTANTIATE_TEST_SUITE_P(Native, NativeRefTest, kNativeCases, CaseName);

// The dense families and RoPE variants (ref/README-dense.md): F32 models,
// compared with llama.cpp's native run, F32 and F16 KV.
const auto kDenseCases = ::testing::Values(
    RefCase{"tiny-llama31", DType::kF32, false, 1e-3f, 1e-4f},
    RefCase{"tiny-qwen3-yarn", DType::kF32, false, 1e-3f, 1e-4f},
    RefCase{"tiny-phi3", DType::kF32, false, 1e-3f, 1e-4f},
    RefCase{"tiny-smollm3", DType::kF32, false, 1e-3f, 1e-4f},
    RefCase{"tiny-granite", DType::kF32, false, 1e-3f, 1e-4f},
    RefCase{"tiny-llama31", DType::kF16, false, 1e-2f, 2e-3f},
    RefCase{"tiny-qwen3-yarn", DType::kF16, false, 1e-2f, 2e-3f},
    RefCase{"tiny-phi3", DType::kF16, false, 1e-2f, 2e-3f},
    RefCase{"tiny-smollm3", DType::kF16, false, 1e-2f, 2e-3f},
    RefCase{"tiny-granite", DType::kF16, false, 1e-2f, 2e-3f},
    // gemma3's GELU goes through llama.cpp's f16 table: README-dense's 5e-3
    // (F32 KV); an F16 KV cache adds up to ~1e-2.
    RefCase{"tiny-gemma3", DType::kF32, false, 5e-3f, 5e-4f},
    RefCase{"tiny-gemma3", DType::kF16, false, 1e-2f, 2e-3f},
    // Derived from a shared model, llama.cpp's outputs in tests/data/ref.
    RefCase{"tiny-mistral3", DType::kF32, false, 1e-3f, 1e-4f},
    RefCase{"tiny-mistral3", DType::kF16, false, 1e-2f, 2e-3f});
INSTANTIATE_TEST_SUITE_P(Dense, RefTest, kDenseCases, CaseName);
INSTANTIATE_TEST_SUITE_P(Dense, DenseRefTest, kDenseCases, CaseName);

// The mixtures of experts (ref/README-moe.md): F32 models against
// llama.cpp's native run, F32 and F16 KV. The routing itself is checked
// decision by decision in runner_moe_ref_test.cc.
const auto kMoeCases = ::testing::Values(
    RefCase{"tiny-qwen3moe", DType::kF32, false, 1e-3f, 1e-4f},
    RefCase{"tiny-qwen3moe", DType::kF16, false, 1e-2f, 2e-3f, Bf16Activations::kAny, 1e-3f},
    RefCase{"tiny-gpt-oss", DType::kF32, false, 1e-3f, 1e-4f},
    // gpt-oss's logits are ~10x larger (embeddings of std 1, output gain 2),
    // and its router ranks raw logits: F16 KV rounding moves both more.
    RefCase{"tiny-gpt-oss", DType::kF16, false, 3e-2f, 5e-3f, Bf16Activations::kAny, 5e-2f});
INSTANTIATE_TEST_SUITE_P(MoeDense, RefTest, kMoeCases, CaseName);
INSTANTIATE_TEST_SUITE_P(MoeDense, DenseRefTest, kMoeCases, CaseName);
const auto kHybridMoeCases = ::testing::Values(
    RefCase{"tiny-qwen35moe", DType::kF32, false, 1e-3f, 1e-4f},
    RefCase{"tiny-nemotron_h_moe", DType::kF32, false, 1e-3f, 1e-4f},
    RefCase{"tiny-qwen35moe", DType::kF16, false, 1e-2f, 2e-3f, Bf16Activations::kAny, 1e-3f},
    RefCase{"tiny-nemotron_h_moe", DType::kF16, false, 1e-2f, 2e-3f, Bf16Activations::kAny, 1e-3f});
INSTANTIATE_TEST_SUITE_P(MoeHybrid, RefTest, kHybridMoeCases, CaseName);
INSTANTIATE_TEST_SUITE_P(MoeHybrid, HybridRefTest, kHybridMoeCases, CaseName);

INSTANTIATE_TEST_SUITE_P(
    Dequantized, RefTest,
    ::testing::Values(
        // F16 / BF16 weights computed with f32 activations: the same
        // weights dequantized to F32 and run by llama.cpp, F32 criteria.
        RefCase{"tiny-llama-f16", DType::kF32, true, 1e-3f, 1e-4f},
        RefCase{"tiny-qwen2-bf16", DType::kF32, true, 1e-3f, 1e-4f, Bf16Activations::kF32}),
    CaseName);

// BF16 weights on bf16-rounded activations (amx), against llama.cpp's native
// run of the file, which rounds them the same way.
INSTANTIATE_TEST_SUITE_P(Bf16RoundedActivations, RefTest,
                         ::testing::Values(RefCase{"tiny-qwen2-bf16", DType::kF32, false, 5e-2f,
                                                   1e-2f, Bf16Activations::kRounded}),
                         CaseName);

// Quantized weights run on Q8_K / Q8_0-rounded activations as llama.cpp's do,
// so they are compared with llama.cpp's native logits. Tolerances:
// ref/README.md (~0.2-0.3, mean ~0.03, once one activation rounds the other
// way).
INSTANTIATE_TEST_SUITE_P(
    QuantizedActivations, RefTest,
    ::testing::Values(RefCase{"tiny-llama-q8_0", DType::kF32, false, 0.3f, 0.03f},
                      RefCase{"tiny-llama256-q4_k_m", DType::kF32, false, 0.3f, 0.03f},
                      RefCase{"tiny-qwen3moe-q8_0", DType::kF32, false, 0.3f, 0.03f},
                      RefCase{"tiny-gpt-oss-mxfp4", DType::kF32, false, 0.3f, 0.03f}),
    CaseName);

}  // namespace
}  // namespace mx::models
