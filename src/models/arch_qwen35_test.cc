// qwen35 files as real Qwen 3.5 GGUFs may carry them: the per-layer
// recurrent_layers array instead of full_attention_interval, and
// multi-token-prediction draft blocks (nextn_predict_layers) at the end that
// the forward pass must skip. Built by rewriting the reference tiny-qwen35.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>

#include "gguf/gguf_writer.h"
#include "models/model.h"
#include "models/runner.h"
#include "ref_data.h"

namespace mx::models {
namespace {

const std::string& RefPath() {
  static const std::string path = mx::testing::RefDir() + "/models/tiny-qwen35.gguf";
  return path;
}

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/qwen35_" + std::to_string(::getpid()) + "_" + name;
}

// The reference file with its metadata and tensors copied, after `edit` had
// its say: it may set keys and add tensors; keys it names in `drop` are left out.
std::string Rewrite(const std::string& name, const std::vector<std::string>& drop,
                    const std::function<void(gguf::GgufWriter&, const gguf::GgufFile&)>& edit) {
  auto src = gguf::GgufFile::Open(Env::Default(), RefPath());
  EXPECT_TRUE(src.ok());
  gguf::GgufWriter w;
  for (const auto& [key, value] : (*src)->metadata()) {
    if (std::find(drop.begin(), drop.end(), key) != drop.end()) continue;
    if (key == "general.alignment") continue;
    EXPECT_TRUE(w.SetValue(key, value).ok()) << key;
  }
  for (const gguf::TensorInfo& t : (*src)->tensors()) {
    EXPECT_TRUE(w.AddTensor(t.name, t.type, t.shape,
                            std::string(reinterpret_cast<const char*>(t.data), t.n_bytes))
                    .ok());
  }
  edit(w, **src);
  const std::string path = TempPath(name);
  EXPECT_TRUE(w.WriteTo(Env::Default(), path).ok());
  return path;
}

// Logits of every position of a fixed prompt.
std::vector<float> Logits(const std::string& path) {
  auto model = Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return {};
  auto runner = Runner::Create(**model, {.n_threads = 2, .kv_type = DType::kF32, .n_ctx = 256});
  EXPECT_TRUE(runner.ok());
  auto seq = (*runner)->NewSequence();
  std::vector<BatchEntry> batch;
  for (int32_t t : {17, 300, 4000, 9, 1234, 77, 2048, 5, 600, 3333})
    batch.push_back({seq.get(), t, true});
  std::vector<float> logits;
  EXPECT_TRUE((*runner)->Forward(batch, &logits).ok());
  return logits;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return !a.empty() && a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(Qwen35FileTest, RecurrentLayersArrayGivesTheSameModelAsTheInterval) {
  const std::vector<float> want = Logits(RefPath());
  const std::string path =
      Rewrite("pattern.gguf", {"qwen35.full_attention_interval"},
              [](gguf::GgufWriter& w, const gguf::GgufFile&) {
                w.SetI32Array("qwen35.attention.recurrent_layers", {1, 1, 1, 0, 1, 1, 1, 0});
              });
  auto model = Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->config().layers[3].mixer, Mixer::kGatedAttention);
  EXPECT_EQ((*model)->config().layers[2].mixer, Mixer::kDeltaNet);
  EXPECT_TRUE(BitEqual(Logits(path), want));
}

TEST(Qwen35FileTest, APatternThatDisagreesWithTheTensorsNamesTheMissingTensor) {
  // Layer 0 said to be full attention, but it holds DeltaNet tensors.
  const std::string path =
      Rewrite("wrong_pattern.gguf", {"qwen35.full_attention_interval"},
              [](gguf::GgufWriter& w, const gguf::GgufFile&) {
                w.SetI32Array("qwen35.attention.recurrent_layers", {0, 1, 1, 0, 1, 1, 1, 0});
              });
  auto model = Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("blk.0.attn_q.weight"), std::string::npos)
      << model.status().ToString();
}

TEST(Qwen35FileTest, RecurrentLayersArrayOfTheWrongLengthIsRefused) {
  const std::string path =
      Rewrite("short_pattern.gguf", {}, [](gguf::GgufWriter& w, const gguf::GgufFile&) {
        w.SetI32Array("qwen35.attention.recurrent_layers", {1, 1, 1, 0});
      });
  auto model = Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("recurrent_layers"), std::string::npos)
      << model.status().ToString();
}

TEST(Qwen35FileTest, DraftBlocksAtTheEndAreSkipped) {
  const std::vector<float> want = Logits(RefPath());
  // A ninth block (a copy of block 7 under another name, plus a draft-only
  // tensor), announced by nextn_predict_layers = 1: the forward pass must
  // not run it, so the logits stay the reference's.
  const std::string path = Rewrite(
      "nextn.gguf", {"qwen35.block_count"}, [](gguf::GgufWriter& w, const gguf::GgufFile& src) {
        w.SetU32("qwen35.block_count", 9);
        w.SetU32("qwen35.nextn_predict_layers", 1);
        for (const gguf::TensorInfo& t : src.tensors()) {
          if (t.name.rfind("blk.7.", 0) != 0) continue;
          // Other weights (every byte 0x01): if the block ran, the logits would change.
          ASSERT_TRUE(w.AddTensor("blk.8." + t.name.substr(6), t.type, t.shape,
                                  std::string(t.n_bytes, '\x01'))
                          .ok());
        }
        ASSERT_TRUE(w.AddTensor("blk.8.nextn.eh_proj.weight", DType::kF32, {256, 128},
                                std::string(256 * 128 * 4, '\0'))
                        .ok());
      });
  auto model = Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ((*model)->config().n_layer, 8);
  EXPECT_EQ((*model)->config().n_nextn_layers, 1);
  EXPECT_TRUE(BitEqual(Logits(path), want));
}

TEST(Qwen35FileTest, AllBlocksDraftIsRefused) {
  const std::string path =
      Rewrite("all_nextn.gguf", {}, [](gguf::GgufWriter& w, const gguf::GgufFile&) {
        w.SetU32("qwen35.nextn_predict_layers", 8);
      });
  auto model = Model::Load(Env::Default(), path, {.progress = nullptr, .prefault = false});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("nextn_predict_layers"), std::string::npos)
      << model.status().ToString();
}

}  // namespace
}  // namespace mx::models
