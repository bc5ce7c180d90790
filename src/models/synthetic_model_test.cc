// make-model's writer: every weight type and the Q4_K_M mix load through
// Model::Load, run, and keep batch invariance (prompt in one batch vs token by
// token, bit for bit).
#include "models/synthetic_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "gguf/gguf_file.h"
#include "models/model.h"
#include "models/runner.h"

namespace mx::models {
namespace {

namespace fs = std::filesystem;

fs::path TempDirOfThisProcess() {
  return fs::path(::testing::TempDir()) / ("mx_synth_" + std::to_string(getpid()));
}
std::string TempPath(const std::string& name) {
  const fs::path dir = TempDirOfThisProcess();
  fs::create_directories(dir);
  return (dir / name).string();
}
// The models this process wrote are removed when its tests end.
class RemoveTempDir : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(TempDirOfThisProcess(), ec);
  }
};
const auto* const kRemoveTempDir = ::testing::AddGlobalTestEnvironment(new RemoveTempDir);

// A small model whose rows (256, 512 values) suit every block type.
SyntheticSpec SmallSpec() {
  SyntheticSpec s;
  s.arch = "llama";
  s.n_layer = 2, s.n_embd = 256, s.n_head = 4, s.n_kv_head = 2, s.n_ff = 512;
  s.n_vocab = 512, s.n_ctx = 256;
  return s;
}

// Logits of `tokens` read in one batch, and token by token; both [n][n_vocab].
void RunBothWays(const Model& model, std::vector<float>* batched, std::vector<float>* stepwise) {
  auto runner = Runner::Create(model, {.n_threads = 2, .kv_type = DType::kF16, .n_ctx = 64});
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  const std::vector<int32_t> tokens = {1, 7, 300, 42, 99, 5, 17, 256, 3, 64};
  auto a = (*runner)->NewSequence(), b = (*runner)->NewSequence();
  std::vector<BatchEntry> batch;
  for (int32_t t : tokens) batch.push_back({a.get(), t, true});
  ASSERT_TRUE((*runner)->Forward(batch, batched).ok());
  std::vector<float> logits;
  stepwise->clear();
  for (int32_t t : tokens) {
    const BatchEntry e{b.get(), t, true};
    ASSERT_TRUE((*runner)->Forward({&e, 1}, &logits).ok());
    stepwise->insert(stepwise->end(), logits.begin(), logits.end());
  }
}

class SyntheticTypeTest : public ::testing::TestWithParam<DType> {};

TEST_P(SyntheticTypeTest, WritesLoadsAndRunsBatchInvariant) {
  SyntheticSpec spec = SmallSpec();
  spec.weight_type = GetParam();
  const std::string path = TempPath(DTypeName(GetParam()) + ".gguf");
  ASSERT_TRUE(WriteSyntheticModel(Env::Default(), spec, path).ok());
  auto model = Model::Load(Env::Default(), path);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->file().FindTensor("blk.0.attn_q.weight")->type, GetParam());
  EXPECT_EQ((*model)->file().FindTensor("blk.1.ffn_down.weight")->type, GetParam());

  std::vector<float> batched, stepwise;
  RunBothWays(**model, &batched, &stepwise);
  ASSERT_EQ(batched.size(), stepwise.size());
  ASSERT_EQ(batched.size(), 10u * 512u);
  for (float v : batched) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(0, std::memcmp(batched.data(), stepwise.data(), batched.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Types, SyntheticTypeTest,
                         ::testing::Values(DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0,
                                           DType::kQ4_0, DType::kQ4_1, DType::kQ5_0, DType::kQ5_1,
                                           DType::kQ4_K, DType::kQ5_K, DType::kQ6_K),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return DTypeName(info.param);
                         });

TEST(SyntheticQ4KMTest, SmolLM2RowsFallBackAsLlamaQuantize) {
  // SmolLM2-135M: 30 layers, rows of 576 (fallback) and 1536 (K-quant).
  Result<SyntheticSpec> s = SyntheticPreset("smollm2-135m");
  ASSERT_TRUE(s.ok());
  int q5_0 = 0, q8_0_v = 0, q4_k = 0, q6_k = 0;
  for (int64_t i = 0; i < s->n_layer; ++i) {
    const DType v = Q4KMTensorType(*s, "blk." + std::to_string(i) + ".attn_v.weight", i, 576);
    (v == DType::kQ5_0 ? q5_0 : q8_0_v) += 1;
    const DType d = Q4KMTensorType(*s, "blk." + std::to_string(i) + ".ffn_down.weight", i, 1536);
    (d == DType::kQ4_K ? q4_k : q6_k) += 1;
    EXPECT_EQ(Q4KMTensorType(*s, "blk." + std::to_string(i) + ".attn_q.weight", i, 576),
              DType::kQ5_0);
  }
  EXPECT_EQ(q5_0, 16);
  EXPECT_EQ(q8_0_v, 14);
  EXPECT_EQ(q4_k, 16);
  EXPECT_EQ(q6_k, 14);
  EXPECT_EQ(Q4KMTensorType(*s, "token_embd.weight", -1, 576), DType::kQ8_0);  // tied head
}

TEST(SyntheticQ4KMTest, Qwen3RowsAreKQuants) {
  Result<SyntheticSpec> s = SyntheticPreset("qwen3-0.6b");
  ASSERT_TRUE(s.ok());
  int q6_v = 0;
  for (int64_t i = 0; i < s->n_layer; ++i) {
    q6_v += Q4KMTensorType(*s, "blk." + std::to_string(i) + ".attn_v.weight", i, 1024) ==
            DType::kQ6_K;
    EXPECT_EQ(Q4KMTensorType(*s, "blk." + std::to_string(i) + ".ffn_gate.weight", i, 1024),
              DType::kQ4_K);
  }
  EXPECT_EQ(q6_v, 14);
  EXPECT_EQ(Q4KMTensorType(*s, "token_embd.weight", -1, 1024), DType::kQ6_K);
}

TEST(SyntheticQ4KMTest, MixedModelLoadsAndRunsBatchInvariant) {
  for (int64_t dim : {int64_t{192}, int64_t{256}}) {  // fallback rows / K-quant rows
    SCOPED_TRACE(dim);
    SyntheticSpec spec = SmallSpec();
    spec.n_embd = dim, spec.n_head = 3, spec.n_kv_head = 1, spec.head_dim = 64;
    spec.n_layer = 8;
    spec.q4_k_m = true;
    spec.tied_embeddings = dim == 192;
    const std::string path = TempPath("q4_k_m_" + std::to_string(dim) + ".gguf");
    ASSERT_TRUE(WriteSyntheticModel(Env::Default(), spec, path).ok());
    auto model = Model::Load(Env::Default(), path);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const gguf::GgufFile& f = (*model)->file();
    EXPECT_EQ(f.FindTensor("blk.0.ffn_down.weight")->type, DType::kQ6_K);
    EXPECT_EQ(f.FindTensor("blk.2.ffn_down.weight")->type, DType::kQ4_K);  // 8 layers: 0, 3, 6, 7 get more bits
    EXPECT_EQ(f.FindTensor("blk.3.attn_q.weight")->type, dim == 192 ? DType::kQ5_0 : DType::kQ4_K);
    EXPECT_EQ(f.FindTensor("blk.0.attn_v.weight")->type, dim == 192 ? DType::kQ8_0 : DType::kQ6_K);
    if (dim == 256) {
      EXPECT_EQ(f.FindTensor("output.weight")->type, DType::kQ6_K);
    }
    std::vector<float> batched, stepwise;
    RunBothWays(**model, &batched, &stepwise);
    ASSERT_EQ(batched.size(), stepwise.size());
    EXPECT_EQ(0, std::memcmp(batched.data(), stepwise.data(), batched.size() * sizeof(float)));
  }
}

TEST(SyntheticSpecTest, KQuantNeedsRowsOf256) {
  SyntheticSpec spec = SmallSpec();
  spec.n_embd = 192, spec.n_head = 3, spec.n_kv_head = 1, spec.head_dim = 64;
  spec.weight_type = DType::kQ4_K;
  const Status st = ValidateSyntheticSpec(spec);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("multiple of 256"), std::string::npos) << st.message();
  spec.q4_k_m = true;
  EXPECT_TRUE(ValidateSyntheticSpec(spec).ok());
}

}  // namespace
}  // namespace mx::models

namespace mx::models {
namespace {

// make-model writes nemotron_h as llama.cpp lays it out: per-layer kind
// arrays, Mamba2 tensors and SSM keys; the engine loads it, reads the layer
// kinds from the arrays, and chunking keeps its logits bit-identical.
TEST(SyntheticHybridTest, NemotronHLoadsWithItsLayerPatternAndRuns) {
  auto spec = SyntheticPreset("tiny-hybrid");
  ASSERT_TRUE(spec.ok());
  spec->layer_pattern = "M*-M";
  spec->n_layer = 6;
  spec->n_vocab = 512;
  spec->weight_type = DType::kQ8_0;
  const std::string path = TempPath("hybrid.gguf");
  ASSERT_TRUE(WriteSyntheticModel(Env::Default(), *spec, path).ok());
  auto model = Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.arch, Arch::kNemotronH);
  const Mixer want[] = {Mixer::kMamba2, Mixer::kAttention, Mixer::kNone,
                        Mixer::kMamba2, Mixer::kMamba2, Mixer::kAttention};
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(c.layers[i].mixer, want[i]) << i;
    EXPECT_EQ(c.layers[i].ffn, want[i] == Mixer::kNone ? Ffn::kReluSquared : Ffn::kNone) << i;
  }
  EXPECT_EQ(c.ssm_d_inner, 256);
  EXPECT_EQ(c.n_recurrent_layers(), 3);
  EXPECT_LT((*model)->layer(0).ssm_a[0], -0.99f);  // A is negative
  std::vector<float> batched, stepwise;
  RunBothWays(**model, &batched, &stepwise);
  ASSERT_FALSE(batched.empty());
  EXPECT_EQ(std::memcmp(batched.data(), stepwise.data(), batched.size() * sizeof(float)), 0);
  for (float v : batched) ASSERT_TRUE(std::isfinite(v));
  SyntheticSpec bad = *spec;
  bad.layer_pattern = "MX";
  EXPECT_EQ(ValidateSyntheticSpec(bad).code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace mx::models
