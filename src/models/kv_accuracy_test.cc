// The accuracy cost of each KV cache type on the reference models
// (docs/benchmarks.md "KV cache types: accuracy"): every reference prompt
// followed by llama.cpp's greedy continuation of it (teacher forcing), read
// under each KV type and compared with the same read under F16 KV rows, the
// default: mean and max |logit difference| over every position and token,
// and how often the greedy token (the argmax) agrees with F16's, over every
// position and over the continuation's steps only; the last column is how
// often it is llama.cpp's greedy token there (its reference ran F32 KV rows).
// Prints one table row per model and type; the bounds only catch a broken
// type.
//
//   build/src/models/models_ref_test --gtest_filter='*KvAccuracy*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "models/model.h"
#include "models/runner.h"
#include "ref_data.h"

namespace mx::models {
namespace {

struct KvTypes {
  DType k, v;
  std::string Name() const {
    return k == v ? DTypeLowerName(k) : "K " + DTypeLowerName(k) + ", V " + DTypeLowerName(v);
  }
};

struct Gap {
  double sum = 0;  // of |dlogit| over every logit compared
  double n = 0;    // logits compared
  float max = 0;
  int64_t positions = 0, agree = 0;                   // argmax agreement over every position
  int64_t steps = 0, steps_agree = 0, steps_ref = 0;  // over the continuation only
};

// Logits of every position of `tokens` under `types` (one batch: the same
// bits as any chunking, kernels are batch-invariant).
std::vector<float> ReadAll(const Model& model, const KvTypes& types,
                           const std::vector<int32_t>& tokens) {
  auto runner =
      Runner::Create(model, {.n_threads = 2, .kv_type = types.k, .n_ctx = 2048, .v_type = types.v});
  EXPECT_TRUE(runner.ok()) << runner.status().ToString();
  if (!runner.ok()) return {};
  auto seq = (*runner)->NewSequence();
  std::vector<BatchEntry> batch;
  for (int32_t t : tokens) batch.push_back({seq.get(), t, true});
  std::vector<float> logits;
  EXPECT_TRUE((*runner)->Forward(batch, &logits).ok());
  return logits;
}

class KvAccuracyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KvAccuracyTest, CostOfEachKvTypeAgainstF16) {
  const mx::testing::RefModel ref = mx::testing::LoadRefModel(GetParam());
  auto loaded =
      Model::Load(Env::Default(), ref.model_path, {.progress = nullptr, .prefault = false});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const Model& model = **loaded;
  const size_t n_vocab = static_cast<size_t>(model.config().n_vocab);
  const KvTypes kTypes[] = {{DType::kF16, DType::kF16},  // itself: the baseline's llama.cpp column
                            {DType::kF32, DType::kF32},
                            {DType::kQ8_0, DType::kQ8_0},
                            {DType::kQ4_0, DType::kQ4_0},
                            {DType::kQ8_0, DType::kQ4_0}};
  std::vector<Gap> gaps(std::size(kTypes));
  for (const mx::testing::RefPrompt& p : ref.prompts) {
    std::vector<int32_t> tokens = p.tokens;
    tokens.insert(tokens.end(), p.greedy.tokens.begin(), p.greedy.tokens.end());
    const std::vector<float> base = ReadAll(model, {DType::kF16, DType::kF16}, tokens);
    ASSERT_EQ(base.size(), tokens.size() * n_vocab);
    for (size_t t = 0; t < std::size(kTypes); ++t) {
      const std::vector<float> got = ReadAll(model, kTypes[t], tokens);
      ASSERT_EQ(got.size(), base.size());
      Gap& g = gaps[t];
      for (size_t pos = 0; pos + 1 < tokens.size(); ++pos) {
        const float* a = &got[pos * n_vocab];
        const float* b = &base[pos * n_vocab];
        for (size_t i = 0; i < n_vocab; ++i) {
          const float d = std::fabs(a[i] - b[i]);
          g.sum += d;
          g.max = std::max(g.max, d);
        }
        g.n += static_cast<double>(n_vocab);
        const auto ours = std::max_element(a, a + n_vocab) - a;
        const bool same = ours == std::max_element(b, b + n_vocab) - b;
        ++g.positions;
        g.agree += same;
        if (pos + 1 >= p.tokens.size()) {  // predicts continuation token pos + 1
          ++g.steps;
          g.steps_agree += same;
          g.steps_ref += ours == tokens[pos + 1];
        }
      }
    }
  }
  for (size_t t = 0; t < std::size(kTypes); ++t) {
    const Gap& g = gaps[t];
    const double mean = g.sum / g.n;
    std::printf("| %s | %s | %.1e | %.3f | %.1f%% (%lld/%lld) | %.1f%% (%lld/%lld) | %.1f%% |\n",
                GetParam().c_str(), kTypes[t].Name().c_str(), mean, g.max,
                100.0 * static_cast<double>(g.agree) / static_cast<double>(g.positions),
                static_cast<long long>(g.agree), static_cast<long long>(g.positions),
                100.0 * static_cast<double>(g.steps_agree) / static_cast<double>(g.steps),
                static_cast<long long>(g.steps_agree), static_cast<long long>(g.steps),
                100.0 * static_cast<double>(g.steps_ref) / static_cast<double>(g.steps));
    // Loose bounds (several times the measured cost): they fail only when a
    // type is broken, not when a kernel's rounding moves.
    // (Argmax agreement over prompt positions suffers from the near-ties of
    // these random-weight models: q4_0 keeps ~77% on tiny-qwen3.)
    const DType k = kTypes[t].k, v = kTypes[t].v;
    const bool q4 = k == DType::kQ4_0 || v == DType::kQ4_0;
    const double mean_bound = k == DType::kF16 ? 1e-9 : k == DType::kF32 ? 5e-3 : q4 ? 0.5 : 0.05;
    EXPECT_LT(mean, mean_bound) << kTypes[t].Name();
    EXPECT_GT(static_cast<double>(g.agree), (q4 ? 0.6 : 0.95) * static_cast<double>(g.positions))
        << kTypes[t].Name();
  }
}

INSTANTIATE_TEST_SUITE_P(RefModels, KvAccuracyTest,
                         ::testing::Values("tiny-llama", "tiny-qwen3", "tiny-qwen35",
                                           "tiny-hybrid-nemotron_h"),
                         [](const auto& info) {
                           std::string s = info.param;
                           std::replace(s.begin(), s.end(), '-', '_');
                           return s;
                         });

// Bytes per token of each KV type for a SmolLM2-135M-shaped model (30
// attention layers, 3 kv heads of 64) and how many 4096-token chats the
// default 2 GiB RAM pool holds by bytes (MATRICXON_PROMPT_CACHE_SLOTS, 4 by
// default and at most 64, also limits the count).
TEST(KvAccuracyBytes, BytesPerTokenOfEachType) {
  for (DType t : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0}) {
    StateLayout l;
    l.k_type = l.v_type = t;
    l.kv_dims.assign(30, 3 * 64);
    const size_t per_token = l.kv_bytes_per_token();
    const size_t chat = 4096 * per_token;
    std::printf("| %s | %zu | %.1f MiB | %zu |\n", DTypeLowerName(t).c_str(), per_token,
                static_cast<double>(chat) / (1 << 20), (size_t{2048} << 20) / chat);
  }
  StateLayout q8;
  q8.k_type = q8.v_type = DType::kQ8_0;
  q8.kv_dims.assign(30, 3 * 64);
  EXPECT_EQ(q8.kv_bytes_per_token(), 30u * 2 * 6 * 34);
}

}  // namespace
}  // namespace mx::models
