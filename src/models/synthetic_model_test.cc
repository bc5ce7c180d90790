// make-model's writer: every weight type and the Q4_K_M mix load through
// Model::Load, run, and keep batch invariance (prompt in one batch vs token by
// token, bit for bit); qwen35 files have the layout of the ref file.
#include "models/synthetic_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>

#include "gguf/gguf_file.h"
#include "kernels/kernels.h"
#include "models/model.h"
#include "models/runner.h"
#include "scratch_dir.h"
#include "synthetic_test_util.h"

namespace mx::models {
namespace {

namespace fs = std::filesystem;

using namespace synthetic_test;  // NOLINT(google-build-using-namespace): test helpers

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
                                           DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ2_K,
                                           DType::kQ3_K, DType::kIQ4_NL, DType::kIQ4_XS,
                                           DType::kTQ1_0, DType::kTQ2_0, DType::kQ1_0,
                                           DType::kQ2_0, DType::kMXFP4),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return DTypeName(info.param);
                         });

// The grid types (IQ1 / IQ2 / IQ3) and NVFP4 load and run but cannot be
// written: make-model refuses them with a message naming the type.
TEST(SyntheticSpecTest, TypesWithoutAQuantizerAreRefused) {
  for (DType t : {DType::kIQ2_XXS, DType::kIQ3_S, DType::kIQ1_M, DType::kNVFP4}) {
    SyntheticSpec spec = SmallSpec();
    spec.weight_type = t;
    const Status st = WriteSyntheticModel(Env::Default(), spec, TempPath("refused.gguf"));
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << DTypeName(t);
    EXPECT_NE(st.ToString().find(DTypeName(t)), std::string::npos) << st.ToString();
  }
}

TEST(SyntheticWeightCopyTest, Bf16RowsOnAmxAreAlignedCopiesGivingTheSameLogits) {
  const std::vector<kernels::Isa> paths = kernels::AvailableIsas();
  if (std::find(paths.begin(), paths.end(), kernels::Isa::kAmx) == paths.end()) {
    GTEST_SKIP() << "this CPU (or OS) has no AMX-BF16: no path asks for aligned BF16 rows";
  }
  SyntheticSpec spec = SmallSpec();
  spec.weight_type = DType::kBF16;
  const std::string path = TempPath("bf16-copies.gguf");
  ASSERT_TRUE(WriteSyntheticModel(Env::Default(), spec, path).ok());
  // Loaded on avx512 the matrices point into the file; on amx, where the file
  // does not align them to 64 bytes, into aligned copies.
  ASSERT_TRUE(kernels::SetActiveIsa(kernels::Isa::kAvx512));
  auto in_file = Model::Load(Env::Default(), path);
  ASSERT_TRUE(kernels::SetActiveIsa(kernels::Isa::kAmx));
  auto copied = Model::Load(Env::Default(), path);
  ASSERT_TRUE(in_file.ok() && copied.ok());
  const uint8_t* map = (*in_file)->file().file_data();
  const size_t map_size = (*in_file)->file().file_size();
  for (int64_t i = 0; i < spec.n_layer; ++i) {
    for (const Matrix* m : {&(*copied)->layer(i).wq, &(*copied)->layer(i).w_down}) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(m->data) % 64, 0u);
      EXPECT_EQ(m->row_bytes % 64, 0u);
    }
    const Matrix& wq = (*in_file)->layer(i).wq;
    EXPECT_TRUE(wq.data >= map && wq.data < map + map_size);
  }
  std::vector<float> a_batched, a_stepwise, b_batched, b_stepwise;
  RunBothWays(**in_file, &a_batched, &a_stepwise);
  RunBothWays(**copied, &b_batched, &b_stepwise);
  kernels::SetActiveIsa(paths.back());
  ASSERT_EQ(a_batched.size(), b_batched.size());
  EXPECT_EQ(0, std::memcmp(a_batched.data(), b_batched.data(), a_batched.size() * 4));
  EXPECT_EQ(0, std::memcmp(a_batched.data(), a_stepwise.data(), a_batched.size() * 4));
  EXPECT_EQ(0, std::memcmp(b_batched.data(), b_stepwise.data(), b_batched.size() * 4));
}

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


namespace mx::models {
namespace {

// The dense families make-model writes: each loads as its family and runs
// batch invariant (small shapes of the presets' kinds).
TEST(SyntheticDenseFamiliesTest, EachArchLoadsAsItsFamilyAndRuns) {
  for (const std::string arch : {"smollm3", "granite", "phi3"}) {
    SCOPED_TRACE(arch);
    SyntheticSpec spec = SmallSpec();
    spec.arch = arch;
    spec.n_layer = 4;
    if (arch == "phi3") spec.rope_dims = 32, spec.rope_orig_ctx = 64, spec.sliding_window = 48;
    const std::string path = TempPath(arch + ".gguf");
    ASSERT_TRUE(WriteSyntheticModel(Env::Default(), spec, path).ok());
    auto model = Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const ModelConfig& c = (*model)->config();
    EXPECT_EQ(ArchName(c.arch), arch);
    if (arch == "smollm3") {
      EXPECT_FALSE(c.layers[3].rope);
      EXPECT_TRUE(c.layers[2].rope);
    }
    if (arch == "granite") {
      EXPECT_EQ(c.embedding_scale, 12.0f);
      EXPECT_EQ(c.logit_scale, 8.0f);
      EXPECT_EQ(c.attention_scale, 0.0078125f);
    }
    if (arch == "phi3") {
      EXPECT_EQ(c.rope.n_rot, 32);  // partial: heads of 64
      EXPECT_EQ(c.head_dim_k, 64);
      ASSERT_EQ(c.rope_factors_long.size(), 16u);
      EXPECT_EQ(c.rope_factors_long.front(), 1.0f);
      EXPECT_FLOAT_EQ(c.rope_factors_long.back(), 4.0f);  // n_ctx 256 / 64
      EXPECT_FLOAT_EQ(c.rope_factors_short.back(), 1.5f);
      EXPECT_NEAR(c.rope.attn_factor, std::sqrt(1 + std::log(4.0) / std::log(64.0)), 1e-6);
      EXPECT_NE((*model)->file().FindTensor("blk.0.attn_qkv.weight"), nullptr);
    }
    std::vector<float> batched, stepwise;
    RunBothWays(**model, &batched, &stepwise);
    ASSERT_EQ(batched.size(), 10u * 512u);
    for (float v : batched) ASSERT_TRUE(std::isfinite(v));
    EXPECT_EQ(0, std::memcmp(batched.data(), stepwise.data(), batched.size() * sizeof(float)));
  }
}

// llama3.2-1b: Llama 3.2 1B's shape and its rope_freqs table (converter's
// rule: factor 32, low 1, high 4 from 8192; base 5e5, 64-dim heads).
TEST(SyntheticDenseFamiliesTest, Llama32PresetWritesTheFrequencyFactors) {
  auto preset = SyntheticPreset("llama3.2-1b");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(preset->n_layer, 16);
  EXPECT_EQ(preset->n_embd, 2048);
  EXPECT_EQ(preset->n_head, 32);
  EXPECT_EQ(preset->n_kv_head, 8);
  EXPECT_EQ(preset->head_dim, 64);
  EXPECT_EQ(preset->n_ff, 8192);
  EXPECT_EQ(preset->n_vocab, 128256);
  EXPECT_TRUE(ValidateSyntheticSpec(*preset).ok());
  // The same RoPE on a small body (the table depends on head dim, base and the factors only).
  SyntheticSpec small = *preset;
  small.n_layer = 2, small.n_embd = 128, small.n_head = 2, small.n_kv_head = 1, small.n_ff = 256;
  small.n_vocab = 512, small.n_ctx = 256;
  const std::string path = TempPath("llama32.gguf");
  ASSERT_TRUE(WriteSyntheticModel(Env::Default(), small, path).ok());
  auto model = Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const std::vector<float>& f = (*model)->config().rope_freqs;
  ASSERT_EQ(f.size(), 32u);
  // Wavelength 2 pi 5e5^(2i/64) against 8192 / 4 = 2048 and 8192 / 1.
  for (size_t i = 0; i < f.size(); ++i) {
    const double wavelen = 2 * M_PI * std::pow(500000.0, 2.0 * static_cast<double>(i) / 64);
    if (wavelen < 2048) {
      EXPECT_EQ(f[i], 1.0f) << i;
    } else if (wavelen > 8192) {
      EXPECT_EQ(f[i], 32.0f) << i;
    } else {
      const double t = (8192 / wavelen - 1) / 3;
      EXPECT_NEAR(f[i], 1 / ((1 - t) / 32 + t), 1e-4 * f[i]) << i;
    }
  }
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_EQ(f[31], 32.0f);
  std::vector<float> batched, stepwise;
  RunBothWays(**model, &batched, &stepwise);
  EXPECT_EQ(0, std::memcmp(batched.data(), stepwise.data(), batched.size() * sizeof(float)));
}

TEST(SyntheticDenseFamiliesTest, Phi4MiniPresetShapes) {
  auto preset = SyntheticPreset("phi4-mini");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(preset->arch, "phi3");
  EXPECT_EQ(preset->n_embd / preset->n_head, 128);
  EXPECT_EQ(preset->rope_dims, 96);  // partial_rotary_factor 0.75
  EXPECT_EQ(preset->rope_orig_ctx, 4096);
  EXPECT_TRUE(ValidateSyntheticSpec(*preset).ok());
}

TEST(SyntheticDenseFamiliesTest, BadDenseSpecsNameTheField) {
  SyntheticSpec s = SmallSpec();
  s.arch = "qwen3";
  s.llama3_rope_factor = 8;
  EXPECT_EQ(ValidateSyntheticSpec(s).code(), Status::Code::kInvalidArgument);  // llama only
  s = SmallSpec();
  s.rope_dims = 32;
  EXPECT_EQ(ValidateSyntheticSpec(s).code(), Status::Code::kInvalidArgument);  // llama: whole heads
  s.arch = "phi3";
  s.rope_dims = 33;
  EXPECT_EQ(ValidateSyntheticSpec(s).code(), Status::Code::kInvalidArgument);
  s.rope_dims = 32;
  s.head_dim = 32;  // phi3 heads are n_embd / n_head (64)
  EXPECT_EQ(ValidateSyntheticSpec(s).code(), Status::Code::kInvalidArgument);
}

// tiny-gemma3: the ref tiny-gemma3 file's tensors (names and shapes) and its
// gemma3 keys; the model reads with its window and runs the same in one
// batch and token by token.
TEST(SyntheticDenseFamiliesTest, TinyGemma3PresetHasTheRefFilesTensors) {
  auto ref = gguf::GgufFile::Open(Env::Default(),
                                  std::string(MATRICXON_REF_DIR) + "/models/tiny-gemma3.gguf");
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  auto preset = SyntheticPreset("tiny-gemma3");
  ASSERT_TRUE(preset.ok());
  auto ours = WritePreset(*preset, "tiny-gemma3.gguf");
  ASSERT_NE(ours, nullptr);
  ASSERT_EQ(ours->tensors().size(), (*ref)->tensors().size());
  for (const gguf::TensorInfo& t : (*ref)->tensors()) {
    const gguf::TensorInfo* got = ours->FindTensor(t.name);
    ASSERT_NE(got, nullptr) << t.name;
    EXPECT_EQ(got->shape, t.shape) << t.name;
  }
  for (const char* key :
       {"gemma3.attention.sliding_window", "gemma3.rope.freq_base_swa", "gemma3.rope.freq_base",
        "gemma3.attention.key_length", "gemma3.attention.layer_norm_rms_epsilon"}) {
    ASSERT_NE(ours->Find(key), nullptr) << key;
    EXPECT_TRUE(SameValue(*ours->Find(key), *(*ref)->Find(key))) << key;
  }
  const std::string path = TempPath("tiny-gemma3-load.gguf");
  ASSERT_TRUE(WriteSyntheticModel(Env::Default(), *preset, path).ok());
  auto model = Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->config().layers[0].window, 32);
  EXPECT_EQ((*model)->config().layers[5].window, 0);
  std::vector<float> batched, stepwise;
  RunBothWays(**model, &batched, &stepwise);
  for (float v : batched) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(0, std::memcmp(batched.data(), stepwise.data(), batched.size() * sizeof(float)));
}

TEST(SyntheticDenseFamiliesTest, Gemma3_1BPresetShapes) {
  auto preset = SyntheticPreset("gemma-3-1b");
  ASSERT_TRUE(preset.ok());
  EXPECT_EQ(preset->arch, "gemma3");
  EXPECT_EQ(preset->n_layer, 26);
  EXPECT_EQ(preset->n_embd, 1152);
  EXPECT_EQ(preset->head_dim, 256);
  EXPECT_EQ(preset->n_kv_head, 1);
  EXPECT_EQ(preset->sliding_window, 512);
  EXPECT_EQ(preset->n_vocab, 262144);
  EXPECT_TRUE(ValidateSyntheticSpec(*preset).ok());
  SyntheticSpec s = *preset;
  s.arch = "llama";
  s.sliding_window_pattern = 6;
  EXPECT_EQ(ValidateSyntheticSpec(s).code(), Status::Code::kInvalidArgument);  // gemma3 only
}

}  // namespace
}  // namespace mx::models
