// Long-context generation attention (Runner::SplitAttention, past 1024
// positions): single-token steps, alone or next to another chat's step, give
// the bytes that reading the same tokens in prompt batches gives, for every
// KV type.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "models/model.h"
#include "models/runner.h"
#include "models/synthetic_model.h"

namespace mx::models {
namespace {

namespace fs = std::filesystem;

class RunnerAttentionTest : public ::testing::TestWithParam<DType> {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(::testing::TempDir()) / ("mx_runner_attn_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    SyntheticSpec s;
    s.arch = "llama";
    s.n_layer = 2, s.n_embd = 256, s.n_head = 4, s.n_kv_head = 2, s.n_ff = 512;
    s.n_vocab = 512, s.n_ctx = 4096;
    s.weight_type = DType::kF16;
    const std::string path = (dir_ / "m.gguf").string();
    ASSERT_TRUE(WriteSyntheticModel(Env::Default(), s, path).ok());
    auto model = Model::Load(Env::Default(), path);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = (*model).release();
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  static inline fs::path dir_;
  static inline Model* model_ = nullptr;
};

std::vector<int32_t> Tokens(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(rng() % 512);
  return t;
}

// Reads tokens [from, to) of `t` into seq in batches of up to 512, logits
// for the last `tail` of them appended to `out`.
void Read(Runner& r, SequenceState* seq, const std::vector<int32_t>& t, size_t from, size_t to,
          size_t tail, std::vector<float>* out) {
  std::vector<float> logits;
  for (size_t i0 = from; i0 < to; i0 += 512) {
    std::vector<BatchEntry> batch;
    for (size_t i = i0; i < to && i < i0 + 512; ++i) batch.push_back({seq, t[i], i + tail >= to});
    ASSERT_TRUE(r.Forward(batch, &logits).ok());
    out->insert(out->end(), logits.begin(), logits.end());
  }
}

TEST_P(RunnerAttentionTest, LongContextStepsEqualPromptReading) {
  ASSERT_NE(model_, nullptr);
  auto runner = Runner::Create(*model_, {.n_threads = 2, .kv_type = GetParam(), .n_ctx = 2048});
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  Runner& r = **runner;
  const size_t n = 1300, steps = 4;
  const std::vector<int32_t> a = Tokens(n + steps, 1), b = Tokens(n + 200 + steps, 2);
  // Reference: each chat read in prompt batches, logits of its last `steps` tokens.
  std::vector<float> want_a, want_b;
  auto ra = r.NewSequence(), rb = r.NewSequence();
  Read(r, ra.get(), a, 0, a.size(), steps, &want_a);
  Read(r, rb.get(), b, 0, b.size(), steps, &want_b);
  ASSERT_EQ(want_a.size(), steps * 512);
  for (float v : want_a) ASSERT_TRUE(std::isfinite(v));

  // Chat a alone, then a and b together, one token per step each.
  std::vector<float> none;
  auto sa = r.NewSequence(), sb = r.NewSequence(), sa2 = r.NewSequence();
  Read(r, sa.get(), a, 0, n, 0, &none);
  Read(r, sb.get(), b, 0, n + 200, 0, &none);
  Read(r, sa2.get(), a, 0, n, 0, &none);
  std::vector<float> logits;
  for (size_t s = 0; s < steps; ++s) {
    const BatchEntry e{sa.get(), a[n + s], true};
    ASSERT_TRUE(r.Forward({&e, 1}, &logits).ok());
    ASSERT_EQ(0, std::memcmp(logits.data(), &want_a[s * 512], 512 * 4)) << "alone, step " << s;
    const BatchEntry two[] = {{sa2.get(), a[n + s], true}, {sb.get(), b[n + 200 + s], true}};
    ASSERT_TRUE(r.Forward(two, &logits).ok());
    ASSERT_EQ(0, std::memcmp(logits.data(), &want_a[s * 512], 512 * 4)) << "a batched, step " << s;
    ASSERT_EQ(0, std::memcmp(&logits[512], &want_b[s * 512], 512 * 4)) << "b batched, step " << s;
  }
}

INSTANTIATE_TEST_SUITE_P(KvTypes, RunnerAttentionTest,
                         ::testing::Values(DType::kF16, DType::kF32, DType::kQ8_0, DType::kQ4_0),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return DTypeName(info.param);
                         });

}  // namespace
}  // namespace mx::models
