// make-model's mixtures of experts: each family written at the shape of its
// ../shared/ref file has exactly that file's tensors (names, shapes) and
// keys, loads as its family, and runs batch-invariant; the real-shape and
// bench presets are valid; the Q4_K_M mix leaves the router in F32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "gguf/gguf_file.h"
#include "models/model.h"
#include "models/synthetic_model.h"
#include "synthetic_test_util.h"

namespace mx::models {
namespace {

using namespace synthetic_test;  // NOLINT(google-build-using-namespace): test helpers

struct MoeShape {
  const char* ref;  // the ref set whose file the spec reproduces
  SyntheticSpec spec;
  std::vector<const char*> keys;  // metadata that must equal the ref file's
};

std::vector<MoeShape> RefShapes() {
  std::vector<MoeShape> out;
  {
    auto s = SyntheticPreset("tiny-qwen3moe");
    out.push_back({"tiny-qwen3moe", *s,
                   {"qwen3moe.expert_count", "qwen3moe.expert_used_count",
                    "qwen3moe.expert_feed_forward_length", "qwen3moe.attention.key_length",
                    "qwen3moe.rope.freq_base"}});
  }
  {
    SyntheticSpec s;
    s.arch = "qwen35moe";
    s.n_layer = 4, s.n_embd = 64, s.n_head = 4, s.n_kv_head = 2, s.head_dim = 32;
    s.full_attention_interval = 2, s.rope_dims = 8, s.rope_sections = {2, 1, 1, 0};
    s.linear_key_heads = 2, s.linear_value_heads = 4, s.linear_head_dim = 16;
    s.n_expert = 8, s.n_expert_used = 3, s.n_ff_expert = 32, s.n_ff_shared = 64;
    s.tied_embeddings = true;
    out.push_back({"tiny-qwen35moe", s,
                   {"qwen35moe.expert_count", "qwen35moe.expert_used_count",
                    "qwen35moe.expert_shared_feed_forward_length",
                    "qwen35moe.rope.dimension_sections", "qwen35moe.ssm.inner_size"}});
  }
  {
    SyntheticSpec s;
    s.arch = "nemotron_h_moe";
    s.n_layer = 8, s.layer_pattern = "M-M*-M*-", s.n_embd = 64, s.n_head = 4, s.n_kv_head = 2;
    s.head_dim = 32, s.mamba_inner = 128, s.ssm_head_dim = 16, s.ssm_groups = 2, s.ssm_state = 16;
    s.n_expert = 16, s.n_expert_used = 4, s.n_ff_expert = 32, s.n_ff_shared = 64;
    s.expert_groups = 4, s.expert_groups_used = 2, s.tied_embeddings = true;
    out.push_back({"tiny-nemotron_h_moe", s,
                   {"nemotron_h_moe.feed_forward_length", "nemotron_h_moe.attention.head_count_kv",
                    "nemotron_h_moe.expert_weights_norm", "nemotron_h_moe.expert_weights_scale",
                    "nemotron_h_moe.expert_group_count", "nemotron_h_moe.expert_group_used_count",
                    "nemotron_h_moe.ssm.time_step_rank"}});
  }
  {
    SyntheticSpec s;
    s.arch = "gpt-oss";
    s.n_layer = 3, s.n_embd = 64, s.n_head = 4, s.n_kv_head = 2, s.head_dim = 16, s.n_ff = 32;
    s.n_expert = 6, s.n_expert_used = 3, s.n_ff_expert = 32, s.sliding_window = 64;
    s.n_ctx = 131072;
    out.push_back({"tiny-gpt-oss", s,
                   {"gpt-oss.expert_count", "gpt-oss.attention.sliding_window",
                    "gpt-oss.rope.scaling.type", "gpt-oss.rope.scaling.factor",
                    "gpt-oss.rope.scaling.original_context_length", "gpt-oss.rope.freq_base"}});
  }
  return out;
}

TEST(SyntheticMoeTest, EachFamilyWritesTheRefFilesTensorsLoadsAndRunsBatchInvariant) {
  for (const MoeShape& m : RefShapes()) {
    SCOPED_TRACE(m.ref);
    auto ref = gguf::GgufFile::Open(Env::Default(),
                                    std::string(MATRICXON_REF_DIR) + "/models/" + m.ref + ".gguf");
    ASSERT_TRUE(ref.ok()) << ref.status().ToString();
    auto ours = WritePreset(m.spec, std::string(m.ref) + ".gguf");
    ASSERT_NE(ours, nullptr);
    EXPECT_EQ(ours->tensors().size(), (*ref)->tensors().size());
    for (const gguf::TensorInfo& t : (*ref)->tensors()) {
      const gguf::TensorInfo* got = ours->FindTensor(t.name);
      ASSERT_NE(got, nullptr) << t.name;
      EXPECT_EQ(got->shape, t.shape) << t.name;
    }
    for (const char* key : m.keys) {
      ASSERT_NE(ours->Find(key), nullptr) << key;
      ASSERT_NE((*ref)->Find(key), nullptr) << key;
      EXPECT_TRUE(SameValue(*ours->Find(key), *(*ref)->Find(key)))
          << key << ": " << Show(*ours->Find(key)) << " vs " << Show(*(*ref)->Find(key));
    }

    const std::string path = TempPath(std::string(m.ref) + "-load.gguf");
    ASSERT_TRUE(WriteSyntheticModel(Env::Default(), m.spec, path).ok());
    auto model = Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    EXPECT_EQ((*model)->config().moe.n_expert, m.spec.n_expert);
    EXPECT_EQ((*model)->config().moe.n_expert_used, m.spec.n_expert_used);
    std::vector<float> batched, stepwise;
    RunBothWays(**model, &batched, &stepwise);
    ASSERT_EQ(batched.size(), stepwise.size());
    for (float v : batched) ASSERT_TRUE(std::isfinite(v));
    EXPECT_EQ(0, std::memcmp(batched.data(), stepwise.data(), batched.size() * sizeof(float)));
  }
}

TEST(SyntheticMoeTest, RealAndBenchPresetsAreValidAndKeepTheExpertCounts) {
  const struct {
    const char* real;
    const char* bench;
    int64_t n_expert, n_used, n_layer;
  } kPairs[] = {{"qwen3-30b-a3b", "qwen3-moe-bench", 128, 8, 48},
                {"qwen3.5-35b-a3b", "qwen3.5-moe-bench", 256, 8, 40},
                {"nemotron-3-nano", "nemotron-3-moe-bench", 128, 6, 52},
                {"gpt-oss-20b", "gpt-oss-bench", 32, 4, 24}};
  for (const auto& p : kPairs) {
    for (const char* name : {p.real, p.bench}) {
      SCOPED_TRACE(name);
      auto s = SyntheticPreset(name);
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      EXPECT_TRUE(ValidateSyntheticSpec(*s).ok()) << ValidateSyntheticSpec(*s).ToString();
      EXPECT_TRUE(SyntheticMoe(*s));
      EXPECT_EQ(s->n_expert, p.n_expert);
      EXPECT_EQ(s->n_expert_used, p.n_used);
      EXPECT_EQ(s->n_layer, p.n_layer);
      EXPECT_GE(s->n_vocab, 4096);
    }
  }
}

TEST(SyntheticMoeTest, Q4KMixKeepsTheRouterF32AndQuantizesTheExperts) {
  auto s = SyntheticPreset("qwen3-moe-bench");
  ASSERT_TRUE(s.ok());
  s->n_layer = 8, s->n_expert = 16, s->n_vocab = 1024, s->q4_k_m = true;
  auto f = WritePreset(*s, "moe-q4km.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->FindTensor("blk.3.ffn_gate_inp.weight")->type, DType::kF32);
  EXPECT_EQ(f->FindTensor("blk.3.ffn_gate_exps.weight")->type, DType::kQ4_K);
  EXPECT_EQ(f->FindTensor("blk.3.ffn_up_exps.weight")->type, DType::kQ4_K);
  // llama.cpp's use_more_bits layers (the first and last eighth, every third
  // between) take Q6_K for every ffn_down, the experts' too.
  EXPECT_EQ(f->FindTensor("blk.0.ffn_down_exps.weight")->type, DType::kQ6_K);
  EXPECT_EQ(f->FindTensor("blk.3.ffn_down_exps.weight")->type, DType::kQ6_K);
  EXPECT_EQ(f->FindTensor("blk.4.ffn_down_exps.weight")->type, DType::kQ4_K);
  EXPECT_EQ(f->FindTensor("blk.4.ffn_down_exps.weight")->shape,
            (std::vector<int64_t>{256, 512, 16}));
}

TEST(SyntheticMoeTest, BadExpertSpecsNameTheField) {
  auto s = SyntheticPreset("tiny-qwen3moe");
  ASSERT_TRUE(s.ok());
  SyntheticSpec bad = *s;
  bad.n_expert_used = 9;
  EXPECT_NE(ValidateSyntheticSpec(bad).message().find("experts-used"), std::string::npos);
  bad = *s;
  bad.arch = "nemotron_h_moe", bad.expert_groups = 3, bad.expert_groups_used = 1;
  EXPECT_NE(ValidateSyntheticSpec(bad).message().find("expert groups"), std::string::npos);
  bad = *s;
  bad.arch = "gpt-oss", bad.sliding_window = 0;
  EXPECT_NE(ValidateSyntheticSpec(bad).message().find("sliding window"), std::string::npos);
}

}  // namespace
}  // namespace mx::models
