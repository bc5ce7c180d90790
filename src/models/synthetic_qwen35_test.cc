// make-model's qwen35 presets: the file layout of the ref model, the weight
// recipe, every matrix type, the Q4_K_M mix and the shape checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "gguf/gguf_file.h"
#include "models/model.h"
#include "models/runner.h"
#include "models/synthetic_model.h"
#include "synthetic_test_util.h"

namespace mx::models {
namespace {

using namespace synthetic_test;  // NOLINT(google-build-using-namespace): test helpers

namespace fs = std::filesystem;

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
