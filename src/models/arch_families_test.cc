// The dense families' hyper-parameters and the keys they read or ignore
// (ref/README-dense.md), on the reference files and on copies of them with
// one key or tensor changed: what llama.cpp refuses is refused with a clear
// error, what it ignores changes nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <functional>
#include <set>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "models/architecture.h"
#include "models/model.h"
#include "models/runner.h"
#include "derived_models.h"
#include "ref_data.h"
#include "scratch_dir.h"

namespace mx::models {
namespace {

namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  return testing_support::ProcessTempPath("arch_" + name);
}

// A ref model's file; a derived one (tests/data/ref) is written first.
std::string RefPath(const std::string& name) {
  if (mx::testing::IsDerivedModel(name)) {
    const std::string path = TempPath(name + ".gguf");
    const std::string err = mx::testing::WriteDerivedModel(name, path);
    EXPECT_EQ(err, "");
    return path;
  }
  return mx::testing::RefDir() + "/models/" + name + ".gguf";
}

// A copy of ref model `name` without the keys in `remove_keys` and the
// tensors in `drop_tensors`, plus what `set` writes.
std::string EditedCopy(const std::string& name, const std::string& out,
                       const std::function<void(gguf::GgufWriter&)>& set,
                       const std::set<std::string>& remove_keys = {},
                       const std::set<std::string>& drop_tensors = {}) {
  auto f = gguf::GgufFile::Open(Env::Default(), RefPath(name));
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  gguf::GgufWriter w;
  for (const auto& [key, v] : (*f)->metadata()) {
    if (remove_keys.count(key) || key == "general.alignment") continue;
    EXPECT_TRUE(w.SetValue(key, v).ok()) << key;
  }
  set(w);
  for (const gguf::TensorInfo& t : (*f)->tensors()) {
    if (drop_tensors.count(t.name)) continue;
    EXPECT_TRUE(w.AddTensor(t.name, t.type, t.shape,
                            std::string(reinterpret_cast<const char*>(t.data), t.n_bytes))
                    .ok());
  }
  const std::string path = TempPath(out);
  EXPECT_TRUE(w.WriteTo(Env::Default(), path).ok());
  return path;
}

Result<std::unique_ptr<Model>> Load(const std::string& path) {
  return Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
}

// Logits of a fixed 40-token prompt, [40][n_vocab].
std::vector<float> Logits(const Model& model, int64_t n_ctx = 2048) {
  auto runner = Runner::Create(model, {.n_threads = 2, .kv_type = DType::kF32, .n_ctx = n_ctx});
  EXPECT_TRUE(runner.ok());
  auto seq = (*runner)->NewSequence();
  std::vector<BatchEntry> batch;
  for (int32_t t = 0; t < 40; ++t) batch.push_back({seq.get(), (t * 97 + 5) % 4000, true});
  std::vector<float> logits;
  EXPECT_TRUE((*runner)->Forward(batch, &logits).ok());
  return logits;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Llama31Test, FrequencyFactorsAndAWideHeadLoad) {
  auto model = Load(RefPath("tiny-llama31"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.head_dim_k, 64);  // key_length, not n_embd / n_head = 16
  EXPECT_EQ(c.rope.n_rot, 64);
  ASSERT_EQ(c.rope_freqs.size(), 32u);
  EXPECT_EQ(c.rope_freqs[0], 1.0f);
  EXPECT_EQ(c.rope_freqs[31], 8.0f);
  EXPECT_EQ(c.RopeFactorsFor(64), c.rope_freqs);  // every context size
  EXPECT_EQ(c.rope.ext_factor, 0.0f);
}

TEST(Llama31Test, RopeDimsOtherThanTheHeadAreRefusedAsLlamaCppDoes) {
  const std::string path = EditedCopy("tiny-llama31", "llama31-nrot32.gguf", [](gguf::GgufWriter& w) {
    w.SetU32("llama.rope.dimension_count", 32);
  });
  auto model = Load(path);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(model.status().ToString().find("invalid n_rot"), std::string::npos)
      << model.status().ToString();
}

TEST(Llama31Test, AFactorTableOfTheWrongLengthNamesTheTensor) {
  auto f = gguf::GgufFile::Open(Env::Default(), RefPath("tiny-llama31"));
  ASSERT_TRUE(f.ok());
  const std::string path = EditedCopy(
      "tiny-llama31", "llama31-freqs16.gguf",
      [](gguf::GgufWriter& w) {
        std::vector<float> v(16, 2.0f);
        ASSERT_TRUE(w.AddTensor("rope_freqs.weight", DType::kF32, {16},
                                std::string(reinterpret_cast<const char*>(v.data()), 64))
                        .ok());
      },
      {}, {"rope_freqs.weight"});
  auto model = Load(path);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().ToString().find("rope_freqs.weight"), std::string::npos)
      << model.status().ToString();
}

TEST(YarnTest, Qwen3ReadsTheTypeFactorAndContextButNotTheYarnKeys) {
  auto model = Load(RefPath("tiny-qwen3-yarn"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const kernels::RopeParams& r = (*model)->config().rope;
  EXPECT_EQ(r.ext_factor, 1.0f);
  EXPECT_EQ(r.freq_scale, 0.25f);
  EXPECT_EQ(r.n_ctx_orig, 512);
  // The file has yarn_beta_fast 8, yarn_beta_slow 2, yarn_attn_factor 0.8.
  ASSERT_NE((*model)->file().Find("qwen3.rope.scaling.yarn_beta_fast"), nullptr);
  EXPECT_EQ(r.beta_fast, 32.0f);
  EXPECT_EQ(r.beta_slow, 1.0f);
  EXPECT_EQ(r.attn_factor, 1.0f);
  // Without them: the same logits, bit for bit.
  const std::string path = EditedCopy(
      "tiny-qwen3-yarn", "yarn-no-keys.gguf", [](gguf::GgufWriter&) {},
      {"qwen3.rope.scaling.yarn_beta_fast", "qwen3.rope.scaling.yarn_beta_slow",
       "qwen3.rope.scaling.yarn_attn_factor"});
  auto plain = Load(path);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_TRUE(BitEqual(Logits(**model), Logits(**plain)));
}

TEST(YarnTest, LlamaAndQwen2FilesWithYarnLoad) {
  for (const std::string name : {"tiny-llama", "tiny-qwen2-bf16"}) {
    SCOPED_TRACE(name);
    const std::string arch = name == "tiny-llama" ? "llama" : "qwen2";
    const std::string path = EditedCopy(name, name + "-yarn.gguf", [&](gguf::GgufWriter& w) {
      w.SetString(arch + ".rope.scaling.type", "yarn");
      w.SetF32(arch + ".rope.scaling.factor", 4.0f);
      w.SetU32(arch + ".rope.scaling.original_context_length", 512);
    });
    auto yarn = Load(path);
    ASSERT_TRUE(yarn.ok()) << yarn.status().ToString();
    EXPECT_EQ((*yarn)->config().rope.ext_factor, 1.0f);
    auto plain = Load(RefPath(name));
    ASSERT_TRUE(plain.ok());
    EXPECT_FALSE(BitEqual(Logits(**yarn), Logits(**plain)));
  }
}

TEST(Phi3Test, FusedProjectionsLongRopeAndTheIgnoredWindow) {
  auto model = Load(RefPath("tiny-phi3"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.arch, Arch::kPhi3);
  EXPECT_EQ(c.rope.mode, kernels::RopeMode::kNeox);
  EXPECT_NEAR(c.rope.attn_factor, 1.1055416f, 1e-6f);
  EXPECT_EQ(c.rope.n_ctx_orig, 512);
  ASSERT_EQ(c.rope_factors_long.size(), 16u);
  ASSERT_EQ(c.rope_factors_short.size(), 16u);
  // Long iff the context holds more than original_context_length tokens.
  EXPECT_EQ(c.RopeFactorsFor(513), c.rope_factors_long);
  EXPECT_EQ(c.RopeFactorsFor(512), c.rope_factors_short);
  // q | k | v rows of attn_qkv, gate | up rows of ffn_up.
  const LayerWeights& w = (*model)->layer(0);
  const gguf::TensorInfo* qkv = (*model)->file().FindTensor("blk.0.attn_qkv.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(w.wq.n_rows, 96);
  EXPECT_EQ(w.wk.n_rows, 32);
  EXPECT_EQ(w.wv.data, w.wk.data + 32 * w.wk.row_bytes);
  EXPECT_EQ(w.w_up.data, w.w_gate.data + 192 * w.w_gate.row_bytes);
  // The same file without sliding_window: the same logits, bit for bit.
  const std::string path = EditedCopy("tiny-phi3", "phi3-no-window.gguf", [](gguf::GgufWriter&) {},
                                      {"phi3.attention.sliding_window"});
  auto no_window = Load(path);
  ASSERT_TRUE(no_window.ok()) << no_window.status().ToString();
  const std::vector<float> with_key = Logits(**model);
  EXPECT_TRUE(BitEqual(with_key, Logits(**no_window)));
  // A context of 512 rotates with the short factors: other logits.
  EXPECT_FALSE(BitEqual(with_key, Logits(**model, 512)));
}

TEST(SmolLm3Test, EveryFourthLayerHasNoRope) {
  auto model = Load(RefPath("tiny-smollm3"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  ASSERT_EQ(c.layers.size(), 4u);
  EXPECT_TRUE(c.layers[0].rope && c.layers[1].rope && c.layers[2].rope);
  EXPECT_FALSE(c.layers[3].rope);
  EXPECT_EQ(c.rope.mode, kernels::RopeMode::kNormal);
}

TEST(GraniteTest, ScalesAreReadAndLogitScaleIsRequired) {
  auto model = Load(RefPath("tiny-granite"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.embedding_scale, 12.0f);
  EXPECT_NEAR(c.residual_scale, 0.22f, 1e-7f);
  EXPECT_EQ(c.attention_scale, 1.0f / 32);
  EXPECT_EQ(c.logit_scale, 8.0f);
  EXPECT_TRUE(c.use_rope);

  const std::string no_logit = EditedCopy("tiny-granite", "granite-no-logit-scale.gguf",
                                          [](gguf::GgufWriter&) {}, {"granite.logit_scale"});
  auto refused = Load(no_logit);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().ToString().find("granite.logit_scale"), std::string::npos);
}

TEST(GraniteTest, FinetunedFalseTurnsRopeOff) {
  const std::string path = EditedCopy("tiny-granite", "granite-not-finetuned.gguf", [](gguf::GgufWriter& w) {
    w.SetBool("granite.rope.scaling.finetuned", false);
  });
  auto off = Load(path);
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE((*off)->config().use_rope);
  auto runner = Runner::Create(**off, {.n_threads = 1, .kv_type = DType::kF32, .n_ctx = 64});
  ASSERT_TRUE(runner.ok());
  EXPECT_FALSE((*runner)->layout()->rope_on(0));
  auto on = Load(RefPath("tiny-granite"));
  ASSERT_TRUE(on.ok());
  EXPECT_FALSE(BitEqual(Logits(**off), Logits(**on)));
}

TEST(Mistral3Test, ReadsTheYarnKeysAndTheAttentionTemperature) {
  auto model = Load(RefPath("tiny-mistral3"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.rope.ext_factor, 1.0f);
  EXPECT_EQ(c.rope.freq_scale, 0.25f);
  EXPECT_EQ(c.rope.beta_fast, 16.0f);
  EXPECT_EQ(c.rope.beta_slow, 2.0f);
  // yarn_log_multiplier 0.5: (1 + 0.1 ln 4) / (1 + 0.05 ln 4) over the
  // rotation's own 1 + 0.1 ln 4.
  EXPECT_NEAR(c.rope.attn_factor, 1.0 / (1.0 + 0.05 * std::log(4.0)), 1e-6);
  EXPECT_EQ(c.attn_temperature_scale, 0.25f);
  EXPECT_EQ(c.attn_temperature_floor, 128);
}

TEST(Mistral3Test, TheTemperatureStartsAtTheOriginalContext) {
  // The 40 positions of Logits() are all below 128: no temperature yet.
  const std::string path = EditedCopy("tiny-mistral3", "mistral3-no-temp.gguf", [](gguf::GgufWriter&) {},
                                      {"mistral3.attention.temperature_scale"});
  auto plain = Load(path);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)->config().attn_temperature_scale, 0.0f);
  auto model = Load(RefPath("tiny-mistral3"));
  ASSERT_TRUE(model.ok());
  EXPECT_TRUE(BitEqual(Logits(**model), Logits(**plain)));
  // From position 32 on (a floor of 32), it changes every logit there.
  const std::string early = EditedCopy("tiny-mistral3", "mistral3-orig32.gguf", [](gguf::GgufWriter& w) {
    w.SetU32("mistral3.rope.scaling.original_context_length", 32);
  });
  const std::string early_plain = EditedCopy(
      "tiny-mistral3", "mistral3-orig32-no-temp.gguf",
      [](gguf::GgufWriter& w) { w.SetU32("mistral3.rope.scaling.original_context_length", 32); },
      {"mistral3.attention.temperature_scale"});
  auto a = Load(early), b = Load(early_plain);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<float> la = Logits(**a), lb = Logits(**b);
  const size_t row = la.size() / 40;
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), 32 * row * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(la.data() + 32 * row, lb.data() + 32 * row, 8 * row * sizeof(float)), 0);
}

TEST(Mistral3Test, OutOfRangeKeysNameTheKey) {
  for (const std::string key : {"mistral3.attention.temperature_scale", "mistral3.rope.scaling.yarn_beta_fast",
                                "mistral3.rope.scaling.yarn_log_multiplier"}) {
    SCOPED_TRACE(key);
    const std::string path = EditedCopy("tiny-mistral3", "mistral3-bad.gguf",
                                        [&](gguf::GgufWriter& w) { w.SetF32(key, -1.0f); });
    auto model = Load(path);
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(model.status().ToString().find(key), std::string::npos) << model.status().ToString();
  }
}

TEST(Gemma3Test, LocalAndGlobalLayersBasesAndScales) {
  auto model = Load(RefPath("tiny-gemma3"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const ModelConfig& c = (*model)->config();
  ASSERT_EQ(c.layers.size(), 6u);
  for (size_t il = 0; il < 6; ++il) {
    EXPECT_EQ(c.layers[il].window, il < 5 ? 32 : 0) << il;
    EXPECT_EQ(c.layers[il].rope_local, il < 5) << il;
    EXPECT_EQ(c.layers[il].ffn, Ffn::kGeGlu);
  }
  EXPECT_EQ(c.rope.freq_base, 1e6f);
  EXPECT_EQ(c.rope_local_base, 1e4f);
  EXPECT_EQ(c.rope.mode, kernels::RopeMode::kNeox);
  EXPECT_EQ(c.embedding_scale, 8.0f);  // sqrtf(64)
  EXPECT_EQ(c.attention_scale, 0.0f);  // 1 / sqrt(key_length)
  EXPECT_EQ(c.final_logit_softcap, 0.0f);
  EXPECT_TRUE(c.qk_norm && c.post_norms && c.tied_output);
}

// The pattern repeats (P = 3: layers 2 and 5 global); without a window every
// layer is global; the key llama.cpp does not read for gemma3
// (attention.scale) changes nothing, and a missing freq_base_swa is 10000.
TEST(Gemma3Test, PatternWindowAndIgnoredKeys) {
  auto ref = Load(RefPath("tiny-gemma3"));
  ASSERT_TRUE(ref.ok());
  const std::vector<float> want = Logits(**ref);
  auto p3 = Load(EditedCopy("tiny-gemma3", "gemma3-p3.gguf", [](gguf::GgufWriter& w) {
    w.SetU32("gemma3.attention.sliding_window_pattern", 3);
  }));
  ASSERT_TRUE(p3.ok()) << p3.status().ToString();
  for (size_t il = 0; il < 6; ++il) {
    EXPECT_EQ((*p3)->config().layers[il].window, il % 3 < 2 ? 32 : 0) << il;
  }
  EXPECT_FALSE(BitEqual(Logits(**p3), want));
  auto no_window = Load(EditedCopy("tiny-gemma3", "gemma3-no-window.gguf", [](gguf::GgufWriter&) {},
                                   {"gemma3.attention.sliding_window"}));
  ASSERT_TRUE(no_window.ok()) << no_window.status().ToString();
  for (const LayerConfig& l : (*no_window)->config().layers) EXPECT_EQ(l.window, 0);
  EXPECT_FALSE(BitEqual(Logits(**no_window), want));
  auto ignored = Load(EditedCopy(
      "tiny-gemma3", "gemma3-ignored.gguf",
      [](gguf::GgufWriter& w) { w.SetF32("gemma3.attention.scale", 0.5f); },
      {"gemma3.rope.freq_base_swa"}));
  ASSERT_TRUE(ignored.ok()) << ignored.status().ToString();
  EXPECT_TRUE(BitEqual(Logits(**ignored), want));
}

// docs/models.md carries the code's own table of architectures.
TEST(ArchitectureTableTest, DocsModelsHoldsTheCodesTable) {
  std::ifstream in(std::string(MATRICXON_SOURCE_DIR) + "/docs/models.md");
  ASSERT_TRUE(in) << "docs/models.md";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string begin = "<!-- architectures: begin -->\n", end = "<!-- architectures: end -->";
  const size_t b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), ArchitectureTable())
      << "regenerate the table of docs/models.md from ArchitectureTable()";
}

// The mixtures of experts' keys, as llama.cpp's loader checks and reads them
// (ref/README-moe.md "Which rule each architecture uses").
TEST(MoeKeysTest, ExpertCountsOutOfRangeAreRefusedByName) {
  auto too_many = Load(EditedCopy("tiny-qwen3moe", "qwen3moe-k9.gguf", [](gguf::GgufWriter& w) {
    w.SetU32("qwen3moe.expert_used_count", 9);
  }));
  ASSERT_FALSE(too_many.ok());
  EXPECT_NE(too_many.status().message().find("qwen3moe.expert_used_count = 9, expected 1..8"),
            std::string::npos)
      << too_many.status().ToString();
  auto groups = Load(EditedCopy("tiny-nemotron_h_moe", "nemotron-groups.gguf",
                                [](gguf::GgufWriter& w) {
                                  w.SetU32("nemotron_h_moe.expert_group_used_count", 4);
                                }));
  ASSERT_FALSE(groups.ok());
  EXPECT_NE(groups.status().message().find("expert_group_used_count = 4"), std::string::npos)
      << groups.status().ToString();
  auto no_width = Load(EditedCopy("tiny-gpt-oss", "gpt-oss-no-ff.gguf", [](gguf::GgufWriter&) {},
                                  {"gpt-oss.expert_feed_forward_length"}));
  ASSERT_FALSE(no_width.ok());
  EXPECT_NE(no_width.status().message().find("gpt-oss.expert_feed_forward_length"),
            std::string::npos);
}

TEST(MoeKeysTest, KeysLlamaCppIgnoresChangeNothingAndTheOnesItReadsDo) {
  // qwen3moe renormalises whatever expert_weights_norm says.
  auto base = Load(RefPath("tiny-qwen3moe"));
  ASSERT_TRUE(base.ok()) << base.status().ToString();
  const std::vector<float> want = Logits(**base);
  auto ignored = Load(EditedCopy("tiny-qwen3moe", "qwen3moe-norm.gguf", [](gguf::GgufWriter& w) {
    w.SetBool("qwen3moe.expert_weights_norm", false);
    w.SetF32("qwen3moe.expert_weights_scale", 3.0f);
  }));
  ASSERT_TRUE(ignored.ok()) << ignored.status().ToString();
  EXPECT_TRUE(BitEqual(Logits(**ignored), want));
  // nemotron_h_moe reads both.
  auto nemo = Load(RefPath("tiny-nemotron_h_moe"));
  ASSERT_TRUE(nemo.ok());
  const std::vector<float> nemo_want = Logits(**nemo);
  auto unnormed = Load(EditedCopy("tiny-nemotron_h_moe", "nemotron-unnormed.gguf",
                                  [](gguf::GgufWriter& w) {
                                    w.SetBool("nemotron_h_moe.expert_weights_norm", false);
                                  }));
  ASSERT_TRUE(unnormed.ok());
  EXPECT_FALSE((*unnormed)->config().moe.normalize);
  EXPECT_FALSE(BitEqual(Logits(**unnormed), nemo_want));
  // gpt-oss ignores an array sliding_window_pattern (llama.cpp's loader
  // leaves the default 2) but reads a scalar one.
  auto oss = Load(RefPath("tiny-gpt-oss"));
  ASSERT_TRUE(oss.ok());
  const std::vector<float> oss_want = Logits(**oss);
  auto array = Load(EditedCopy("tiny-gpt-oss", "gpt-oss-array.gguf", [](gguf::GgufWriter& w) {
    w.SetI32Array("gpt-oss.attention.sliding_window_pattern", {1, 1, 1});
  }));
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_TRUE(BitEqual(Logits(**array), oss_want));
  auto scalar = Load(EditedCopy("tiny-gpt-oss", "gpt-oss-p3.gguf", [](gguf::GgufWriter& w) {
    w.SetU32("gpt-oss.attention.sliding_window_pattern", 3);
  }));
  ASSERT_TRUE(scalar.ok());
  EXPECT_EQ((*scalar)->config().layers[1].window, 64);
  EXPECT_EQ((*scalar)->config().layers[2].window, 0);
}

// One merged ffn_gate_up_exps tensor (each expert's gate rows, then its up
// rows) in place of ffn_gate_exps and ffn_up_exps gives the same model.
TEST(MoeKeysTest, AMergedGateUpTensorGivesTheSameLogits) {
  auto ref = gguf::GgufFile::Open(Env::Default(), RefPath("tiny-qwen3moe"));
  ASSERT_TRUE(ref.ok());
  const std::string path = EditedCopy(
      "tiny-qwen3moe", "qwen3moe-gate-up.gguf",
      [&](gguf::GgufWriter& w) {
        for (int64_t l = 0; l < 4; ++l) {
          const std::string g = "blk." + std::to_string(l) + ".ffn_gate_exps.weight";
          const std::string u = "blk." + std::to_string(l) + ".ffn_up_exps.weight";
          const gguf::TensorInfo* gt = (*ref)->FindTensor(g);
          const gguf::TensorInfo* ut = (*ref)->FindTensor(u);
          ASSERT_NE(gt, nullptr);
          ASSERT_NE(ut, nullptr);
          const size_t per = gt->n_bytes / 8;  // one expert's rows
          std::string merged;
          for (size_t e = 0; e < 8; ++e) {
            merged.append(reinterpret_cast<const char*>(gt->data) + e * per, per);
            merged.append(reinterpret_cast<const char*>(ut->data) + e * per, per);
          }
          ASSERT_TRUE(w.AddTensor("blk." + std::to_string(l) + ".ffn_gate_up_exps.weight",
                                  gt->type, {64, 64, 8}, merged)
                          .ok());
        }
      },
      {},
      {"blk.0.ffn_gate_exps.weight", "blk.0.ffn_up_exps.weight", "blk.1.ffn_gate_exps.weight",
       "blk.1.ffn_up_exps.weight", "blk.2.ffn_gate_exps.weight", "blk.2.ffn_up_exps.weight",
       "blk.3.ffn_gate_exps.weight", "blk.3.ffn_up_exps.weight"});
  auto base = Load(RefPath("tiny-qwen3moe"));
  auto merged = Load(path);
  ASSERT_TRUE(base.ok());
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  // The merged tensor is bound twice (gate and up halves) and counted once.
  EXPECT_EQ((*merged)->weight_bytes(), (*base)->weight_bytes());
  EXPECT_TRUE(BitEqual(Logits(**merged), Logits(**base)));
}

}  // namespace
}  // namespace mx::models
