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

namespace mx::models {
namespace {

namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  return testing_support::ProcessTempPath("synth_" + name);
}

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

// qwen35 is checked on the file only (the engine does not load it yet).
const std::set<std::string> kVocabContentKeys = {
    "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"};

std::string Show(const gguf::Value& v) {
  std::string s = gguf::ValueTypeName(v.type);
  if (v.type == gguf::ValueType::kArray) {
    s += std::string("[") + gguf::ValueTypeName(v.array_type) + " x " +
         std::to_string(v.array_size()) + "]";
    for (size_t i = 0; i < v.ints.size() && i < 8; ++i) s += " " + std::to_string(v.ints[i]);
  } else if (v.type == gguf::ValueType::kString) {
    s += " '" + v.str.substr(0, 60) + "'";
  } else if (v.is_float()) {
    s += " " + std::to_string(v.f);
  } else {
    s += " " + std::to_string(v.i);
  }
  return s;
}

bool SameValue(const gguf::Value& a, const gguf::Value& b) {
  return a.type == b.type && a.array_type == b.array_type && a.i == b.i && a.u == b.u &&
         a.f == b.f && a.str == b.str && a.ints == b.ints && a.floats == b.floats &&
         a.strings == b.strings;
}

std::unique_ptr<gguf::GgufFile> WritePreset(const SyntheticSpec& spec, const std::string& file) {
  const std::string path = TempPath(file);
  const Status st = WriteSyntheticModel(Env::Default(), spec, path);
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto f = gguf::GgufFile::Open(Env::Default(), path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(*f) : nullptr;
}

// Metadata values, or -1 / empty (and a failure) when absent or mistyped.
int64_t IntKey(const gguf::GgufFile& f, const std::string& key) {
  Result<int64_t> v = f.GetInt(key);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : -1;
}
std::vector<int64_t> IntArrayKey(const gguf::GgufFile& f, const std::string& key) {
  Result<std::vector<int64_t>> v = f.GetIntArray(key);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : std::vector<int64_t>{};
}
std::string StringKey(const gguf::GgufFile& f, const std::string& key) {
  Result<std::string> v = f.GetString(key);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : std::string();
}

SyntheticSpec TinyQwen35() {
  Result<SyntheticSpec> s = SyntheticPreset("tiny-qwen35");
  EXPECT_TRUE(s.ok());
  return s.ok() ? *s : SyntheticSpec{};
}

// The preset reproduces ref/models/tiny-qwen35.gguf's layout: every metadata
// key and value (general.name included) except the vocabulary's content
// (tokens, token types, merges: our tokenizer learns its own merges; the
// token count is still compared), and every tensor's name, type and shape, in
// the same order.
TEST(SyntheticQwen35Test, TinyPresetHasTheRefFilesKeysAndTensors) {
  auto ref = gguf::GgufFile::Open(Env::Default(),
                                  std::string(MATRICXON_REF_DIR) + "/models/tiny-qwen35.gguf");
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  auto ours = WritePreset(TinyQwen35(), "tiny-qwen35.gguf");
  ASSERT_NE(ours, nullptr);

  for (const auto& [key, want] : (*ref)->metadata()) {
    const gguf::Value* got = ours->Find(key);
    if (got == nullptr) {
      ADD_FAILURE() << "missing key " << key << " = " << Show(want);
      continue;
    }
    if (kVocabContentKeys.count(key) != 0) {
      EXPECT_EQ(got->array_type, want.array_type) << key;
      if (key != "tokenizer.ggml.merges") {
        EXPECT_EQ(got->array_size(), want.array_size()) << key;
      }
      continue;
    }
    EXPECT_TRUE(SameValue(*got, want)) << key << ": ours " << Show(*got) << ", ref " << Show(want);
  }
  for (const auto& [key, v] : ours->metadata()) {
    EXPECT_NE((*ref)->Find(key), nullptr) << "extra key " << key << " = " << Show(v);
  }

  const auto& want = (*ref)->tensors();
  const auto& got = ours->tensors();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].Describe(), want[i].Describe()) << "tensor " << i;
  }
}

std::vector<float> F32Values(const gguf::GgufFile& f, const std::string& name) {
  const gguf::TensorInfo* t = f.FindTensor(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr || t->type != DType::kF32) return {};
  std::vector<float> v(static_cast<size_t>(t->n_elements()));
  std::memcpy(v.data(), t->data, v.size() * sizeof(float));
  return v;
}

double Rms(const std::vector<float>& v, double mean = 0) {
  double sum = 0;
  for (float x : v) sum += (x - mean) * (x - mean);
  return std::sqrt(sum / static_cast<double>(v.size()));
}

// The recipe of ../shared/ref/README.md: decay parameters in their ranges and
// spread over them, and the standard deviations of the conv, alpha and tied
// embeddings. 64 value heads give enough draws to tell the ranges apart.
TEST(SyntheticQwen35Test, WeightsFollowTheRefRecipe) {
  SyntheticSpec spec = TinyQwen35();
  spec.linear_value_heads = 64;
  auto f = WritePreset(spec, "recipe.gguf");
  ASSERT_NE(f, nullptr);
  std::vector<float> a, dt0, conv, alpha;
  for (int layer : {0, 1, 2, 4, 5, 6}) {
    const std::string blk = "blk." + std::to_string(layer) + ".";
    for (float x : F32Values(*f, blk + "ssm_a")) a.push_back(x);
    for (float x : F32Values(*f, blk + "ssm_dt.bias")) {
      dt0.push_back(static_cast<float>(std::log1p(std::exp(static_cast<double>(x)))));  // softplus
    }
    for (float x : F32Values(*f, blk + "ssm_conv1d.weight")) conv.push_back(x);
    for (float x : F32Values(*f, blk + "ssm_alpha.weight")) alpha.push_back(x);
  }
  ASSERT_EQ(a.size(), 6u * 64u);
  ASSERT_EQ(dt0.size(), 6u * 64u);
  // ssm_a = -U[0.05, 1]: 384 draws come within 0.01 of both ends.
  for (float x : a) EXPECT_TRUE(x >= -1.0f && x <= -0.05f) << x;
  EXPECT_GT(*std::max_element(a.begin(), a.end()), -0.06f);
  EXPECT_LT(*std::min_element(a.begin(), a.end()), -0.99f);
  // dt0 log-uniform in [0.05, 1]: a fifth of the draws below 0.09, a fifth above 0.55.
  for (float x : dt0) EXPECT_TRUE(x >= 0.05f - 1e-6f && x <= 1 + 1e-6f) << x;
  const auto below = std::count_if(dt0.begin(), dt0.end(), [](float x) { return x < 0.09f; });
  const auto above = std::count_if(dt0.begin(), dt0.end(), [](float x) { return x > 0.55f; });
  EXPECT_NEAR(static_cast<double>(below) / 384, std::log(0.09 / 0.05) / std::log(20.0), 0.06);
  EXPECT_NEAR(static_cast<double>(above) / 384, std::log(1 / 0.55) / std::log(20.0), 0.06);
  EXPECT_NEAR(Rms(conv), 0.5, 0.02);                       // 6 x 4 x 2176 values
  EXPECT_NEAR(Rms(alpha), 0.5 / std::sqrt(128.0), 0.002);  // 6 x 128 x 64 values
  EXPECT_EQ(f->FindTensor("output.weight"), nullptr);      // tied
  EXPECT_NEAR(Rms(F32Values(*f, "token_embd.weight")), 0.15, 0.005);
  EXPECT_NEAR(Rms(F32Values(*f, "blk.0.ssm_norm.weight"), 1.0), 0.1, 0.05);
}

// F16 and Q8_0 store every matrix (DeltaNet's small ssm_alpha / ssm_beta
// included) in the type; 1-D tensors, norms and ssm_conv1d stay F32, as
// llama.cpp's converter and quantizer keep them.
class SyntheticQwen35TypeTest : public ::testing::TestWithParam<DType> {};

TEST_P(SyntheticQwen35TypeTest, MatricesInTheTypeSmallTensorsF32) {
  SyntheticSpec spec = TinyQwen35();
  spec.weight_type = GetParam();
  auto f = WritePreset(spec, "types_" + DTypeName(GetParam()) + ".gguf");
  ASSERT_NE(f, nullptr);
  for (const char* name : {"token_embd.weight", "blk.0.attn_qkv.weight", "blk.0.attn_gate.weight",
                           "blk.0.ssm_alpha.weight", "blk.0.ssm_beta.weight",
                           "blk.0.ssm_out.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight",
                           "blk.0.ffn_down.weight", "blk.3.attn_q.weight", "blk.3.attn_k.weight",
                           "blk.3.attn_v.weight", "blk.3.attn_output.weight"}) {
    ASSERT_NE(f->FindTensor(name), nullptr) << name;
    EXPECT_EQ(f->FindTensor(name)->type, GetParam()) << name;
  }
  for (const char* name :
       {"blk.0.attn_norm.weight", "blk.0.post_attention_norm.weight", "blk.0.ssm_conv1d.weight",
        "blk.0.ssm_dt.bias", "blk.0.ssm_a", "blk.0.ssm_norm.weight", "blk.3.attn_q_norm.weight",
        "blk.3.attn_k_norm.weight", "output_norm.weight"}) {
    ASSERT_NE(f->FindTensor(name), nullptr) << name;
    EXPECT_EQ(f->FindTensor(name)->type, DType::kF32) << name;
  }
  EXPECT_EQ(IntKey(*f, "general.file_type"), GetParam() == DType::kF16 ? 1 : 7);
}

// The engine loads what make-model writes, in every type, and reads it
// batch-invariantly (one batch vs. token by token, bit for bit).
TEST_P(SyntheticQwen35TypeTest, EngineLoadsAndRunsItBatchInvariant) {
  SyntheticSpec spec = TinyQwen35();
  spec.weight_type = GetParam();
  spec.n_vocab = 512;
  const std::string path = TempPath("engine_" + DTypeName(GetParam()) + ".gguf");
  ASSERT_TRUE(WriteSyntheticModel(Env::Default(), spec, path).ok());
  auto model = Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->config().arch, Arch::kQwen35);
  EXPECT_EQ((*model)->config().n_recurrent_layers(), 6);
  std::vector<float> batched, stepwise;
  RunBothWays(**model, &batched, &stepwise);
  ASSERT_EQ(batched.size(), 10u * 512u);
  for (float v : batched) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(0, std::memcmp(batched.data(), stepwise.data(), batched.size() * sizeof(float)));
}

INSTANTIATE_TEST_SUITE_P(Types, SyntheticQwen35TypeTest,
                         ::testing::Values(DType::kF16, DType::kQ8_0),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return DTypeName(info.param);
                         });

// Q4_K_M as llama-quantize mixes it: attn_qkv counts as an attn_v, so the
// "more bits" layers get Q6_K for attn_qkv, attn_v and ffn_down; rows that
// are not a multiple of 256 (ssm_out here) fall back.
TEST(SyntheticQwen35Test, Q4KMMixTreatsAttnQkvLikeAttnV) {
  SyntheticSpec spec = TinyQwen35();
  spec.n_embd = 256, spec.n_ff = 512, spec.q4_k_m = true;
  auto f = WritePreset(spec, "q4_k_m.gguf");
  ASSERT_NE(f, nullptr);
  auto type = [&](const std::string& name) {
    const gguf::TensorInfo* t = f->FindTensor(name);
    EXPECT_NE(t, nullptr) << name;
    return t == nullptr ? DType::kF32 : t->type;
  };
  // 8 layers: 0, 3, 6, 7 get more bits.
  EXPECT_EQ(type("blk.0.attn_qkv.weight"), DType::kQ6_K);
  EXPECT_EQ(type("blk.1.attn_qkv.weight"), DType::kQ4_K);
  EXPECT_EQ(type("blk.6.attn_qkv.weight"), DType::kQ6_K);
  EXPECT_EQ(type("blk.3.attn_v.weight"), DType::kQ6_K);
  EXPECT_EQ(type("blk.7.attn_v.weight"), DType::kQ6_K);
  EXPECT_EQ(type("blk.2.ffn_down.weight"), DType::kQ4_K);
  EXPECT_EQ(type("blk.3.ffn_down.weight"), DType::kQ6_K);
  EXPECT_EQ(type("blk.1.ssm_alpha.weight"), DType::kQ4_K);
  EXPECT_EQ(type("blk.1.attn_gate.weight"), DType::kQ4_K);
  EXPECT_EQ(type("blk.1.ssm_out.weight"), DType::kQ5_0);  // rows of 128
  EXPECT_EQ(type("blk.3.attn_q.weight"), DType::kQ4_K);
  EXPECT_EQ(type("blk.1.ssm_conv1d.weight"), DType::kF32);
  EXPECT_EQ(type("token_embd.weight"), DType::kQ6_K);  // the tied head
}

// The qwen3.5-0.8b preset's shapes (4 of its 24 layers and a small vocab, so
// the test writes ~90 MB instead of 1.5 GB).
TEST(SyntheticQwen35Test, Qwen35_08BPresetShapes) {
  Result<SyntheticSpec> full = SyntheticPreset("qwen3.5-0.8b");
  ASSERT_TRUE(full.ok());
  EXPECT_TRUE(ValidateSyntheticSpec(*full).ok());
  EXPECT_EQ(full->n_layer, 24);
  EXPECT_EQ(full->n_vocab, 248320);
  SyntheticSpec spec = *full;
  spec.n_layer = 4, spec.n_vocab = 1024, spec.weight_type = DType::kQ8_0;
  auto f = WritePreset(spec, "qwen35_08b.gguf");
  ASSERT_NE(f, nullptr);
  auto shape = [&](const std::string& name) {
    const gguf::TensorInfo* t = f->FindTensor(name);
    EXPECT_NE(t, nullptr) << name;
    return t == nullptr ? std::vector<int64_t>{} : t->shape;
  };
  using S = std::vector<int64_t>;
  EXPECT_EQ(shape("blk.0.attn_qkv.weight"), (S{1024, 6144}));  // q 16x128 | k 16x128 | v 16x128
  EXPECT_EQ(shape("blk.0.attn_gate.weight"), (S{1024, 2048}));
  EXPECT_EQ(shape("blk.0.ssm_conv1d.weight"), (S{4, 6144}));
  EXPECT_EQ(shape("blk.0.ssm_a"), (S{16}));
  EXPECT_EQ(shape("blk.0.ssm_dt.bias"), (S{16}));
  EXPECT_EQ(shape("blk.0.ssm_alpha.weight"), (S{1024, 16}));
  EXPECT_EQ(shape("blk.0.ssm_norm.weight"), (S{128}));
  EXPECT_EQ(shape("blk.0.ssm_out.weight"), (S{2048, 1024}));
  EXPECT_EQ(shape("blk.0.ffn_down.weight"), (S{3584, 1024}));
  EXPECT_EQ(shape("blk.3.attn_q.weight"), (S{1024, 4096}));  // 8 heads x [q 256 | gate 256]
  EXPECT_EQ(shape("blk.3.attn_k.weight"), (S{1024, 512}));
  EXPECT_EQ(shape("blk.3.attn_q_norm.weight"), (S{256}));
  EXPECT_EQ(shape("blk.3.attn_output.weight"), (S{2048, 1024}));
  EXPECT_EQ(f->FindTensor("blk.2.attn_q.weight"), nullptr);
  EXPECT_EQ(f->FindTensor("blk.3.attn_qkv.weight"), nullptr);
  EXPECT_EQ(IntArrayKey(*f, "qwen35.rope.dimension_sections"), (S{11, 11, 10, 0}));
  EXPECT_EQ(IntKey(*f, "qwen35.rope.dimension_count"), 64);
  EXPECT_EQ(IntKey(*f, "qwen35.attention.key_length"), 256);
  EXPECT_EQ(IntKey(*f, "qwen35.ssm.inner_size"), 2048);
  EXPECT_EQ(IntKey(*f, "qwen35.ssm.state_size"), 128);
  EXPECT_EQ(IntKey(*f, "qwen35.ssm.time_step_rank"), 16);
  EXPECT_EQ(IntKey(*f, "qwen35.ssm.group_count"), 16);
  EXPECT_EQ(IntKey(*f, "qwen35.context_length"), 262144);
  EXPECT_EQ(IntKey(*f, "qwen35.vocab_size"), 1024);
  EXPECT_EQ(StringKey(*f, "tokenizer.ggml.pre"), "qwen35");
}

// Unset sections deal the rotated pairs over t, h, w; the interval places the
// attention layers.
TEST(SyntheticQwen35Test, DefaultSectionsAndAttentionInterval) {
  SyntheticSpec spec = TinyQwen35();
  spec.n_layer = 6, spec.full_attention_interval = 2, spec.n_vocab = 512;
  spec.rope_dims = 0, spec.rope_sections = {};  // the whole 64-dim head
  auto f = WritePreset(spec, "interval.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(IntKey(*f, "qwen35.rope.dimension_count"), 64);
  EXPECT_EQ(IntArrayKey(*f, "qwen35.rope.dimension_sections"),
            (std::vector<int64_t>{11, 11, 10, 0}));
  for (int i = 0; i < 6; ++i) {
    const std::string blk = "blk." + std::to_string(i) + ".";
    const bool attention = i % 2 == 1;
    EXPECT_EQ(f->FindTensor(blk + "attn_q.weight") != nullptr, attention) << i;
    EXPECT_EQ(f->FindTensor(blk + "attn_qkv.weight") != nullptr, !attention) << i;
  }
  spec.rope_dims = 16;
  f = WritePreset(spec, "interval16.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(IntArrayKey(*f, "qwen35.rope.dimension_sections"), (std::vector<int64_t>{3, 3, 2, 0}));
}

// Each bad qwen35 shape is refused with an error that names the field, and
// nothing is written.
TEST(SyntheticQwen35Test, BadShapesNameTheField) {
  const struct {
    const char* field;
    std::function<void(SyntheticSpec*)> spoil;
  } kCases[] = {
      {"linear-value-heads", [](SyntheticSpec* s) { s->linear_value_heads = 3; }},
      {"linear-value-heads", [](SyntheticSpec* s) { s->linear_value_heads = 0; }},
      {"linear-key-heads", [](SyntheticSpec* s) { s->linear_key_heads = -2; }},
      {"linear-head-dim", [](SyntheticSpec* s) { s->linear_head_dim = 0; }},
      {"linear-inner", [](SyntheticSpec* s) { s->linear_inner = 256; }},
      {"full-attention-interval", [](SyntheticSpec* s) { s->full_attention_interval = 0; }},
      {"ssm-conv", [](SyntheticSpec* s) { s->ssm_conv = 1; }},
      {"rope-dims", [](SyntheticSpec* s) { s->rope_dims = 15; }},
      {"rope-dims", [](SyntheticSpec* s) { s->rope_dims = 128; }},  // > head dim 64
      {"rope-sections",
       [](SyntheticSpec* s) {
         s->rope_sections = {3, 3, 3, 0};
       }},
      {"rope-sections",
       [](SyntheticSpec* s) {
         s->rope_sections = {-1, 5, 4, 0};
       }},
      {"multiple of 256", [](SyntheticSpec* s) { s->weight_type = DType::kQ4_K; }},  // rows of 128
      {"rope-dims", [](SyntheticSpec* s) { s->arch = "qwen3"; }},  // partial rotation is qwen35's
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.field);
    SyntheticSpec spec = TinyQwen35();
    ASSERT_TRUE(ValidateSyntheticSpec(spec).ok());
    c.spoil(&spec);
    const Status st = ValidateSyntheticSpec(spec);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << st.ToString();
    EXPECT_NE(st.message().find(c.field), std::string::npos) << st.message();
    const std::string path = TempPath("bad.gguf");
    EXPECT_EQ(WriteSyntheticModel(Env::Default(), spec, path).code(),
              Status::Code::kInvalidArgument);
    EXPECT_FALSE(fs::exists(path));
  }
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
