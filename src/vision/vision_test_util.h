// Test helpers for the vision tests: the reference pictures of
// ../shared/ref/ref-tiny-qwen35-vision.json (pixels, recorded stage tensors,
// embeddings), a loader for the tiny mmproj, and rewritten copies of it for
// the hostile-file tests. Test-only.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "ref_data.h"
#include "vision/projector.h"

namespace mx::vision::test {

inline std::string MmprojPath() {
  return mx::testing::RefDir() + "/models/tiny-qwen35-mmproj.gguf";
}

inline std::vector<float> ReadF32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

inline const nlohmann::json& VisionJson() {
  static const nlohmann::json j = [] {
    std::ifstream in(mx::testing::RefDir() + "/ref-tiny-qwen35-vision.json");
    EXPECT_TRUE(in.good()) << "cannot read ref-tiny-qwen35-vision.json";
    return in.good() ? nlohmann::json::parse(in) : nlohmann::json::object();
  }();
  return j;
}

// One reference picture: llama.cpp's ViT input, stage tensors and output.
struct RefImage {
  std::string key;  // "a", "b", "c"
  int64_t width = 0, height = 0;
  int64_t npx = 0, npy = 0, nx = 0, ny = 0;
  std::vector<float> pixels;  // [3][height][width]
  std::vector<float> embd;    // [ny * nx][128]
  std::vector<float> stages_blob;
  std::map<std::string, std::pair<size_t, size_t>> stages;  // name -> (offset, n) in floats

  std::span<const float> Stage(const std::string& name) const {
    auto it = stages.find(name);
    EXPECT_NE(it, stages.end()) << "no stage " << name;
    if (it == stages.end()) return {};
    return std::span<const float>(stages_blob).subspan(it->second.first, it->second.second);
  }
  std::vector<float> StageCopy(const std::string& name) const {
    std::span<const float> s = Stage(name);
    return std::vector<float>(s.begin(), s.end());
  }
};

inline const RefImage& LoadRefImage(const std::string& key) {
  static std::map<std::string, std::unique_ptr<RefImage>> cache;
  auto& slot = cache[key];
  if (slot) return *slot;
  slot = std::make_unique<RefImage>();
  RefImage& r = *slot;
  r.key = key;
  const nlohmann::json& im = VisionJson()["images"][key];
  const std::string dir = mx::testing::RefDir() + "/";
  r.width = im["preprocessed"]["width"].get<int64_t>();
  r.height = im["preprocessed"]["height"].get<int64_t>();
  r.npx = im["n_patches_x"].get<int64_t>();
  r.npy = im["n_patches_y"].get<int64_t>();
  r.nx = im["merged_nx"].get<int64_t>();
  r.ny = im["merged_ny"].get<int64_t>();
  r.pixels = ReadF32(dir + im["preprocessed"]["file"].get<std::string>());
  r.embd = ReadF32(dir + im["embeddings"]["file"].get<std::string>());
  r.stages_blob = ReadF32(dir + im["stages"]["file"].get<std::string>());
  for (const auto& t : im["stages"]["tensors"]) {
    r.stages[t["name"].get<std::string>()] = {t["offset_floats"].get<size_t>(),
                                              t["n_floats"].get<size_t>()};
  }
  return r;
}

inline float MaxAbsDiff(std::span<const float> a, std::span<const float> b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0.0f;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const float d = std::fabs(a[i] - b[i]);
    m = std::isnan(d) ? INFINITY : std::max(m, d);
  }
  return m;
}

inline std::unique_ptr<Projector> LoadTiny() {
  auto p = Projector::Open(Env::Default(), MmprojPath());
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(p).value() : nullptr;
}

// A rewritten copy of the tiny mmproj, parsed from memory. The bytes live as
// long as the object.
struct MemFile {
  std::string bytes;
  std::unique_ptr<gguf::GgufFile> Parse(const std::string& name = "hostile.gguf") const {
    auto f =
        gguf::GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), name);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    return f.ok() ? std::move(f).value() : nullptr;
  }
};

// Copies the tiny mmproj's metadata and tensors into a writer, leaving out the
// keys and tensors named in `drop`, then lets `edit` add or replace things.
inline MemFile RewriteTiny(
    const std::vector<std::string>& drop,
    const std::function<void(gguf::GgufWriter&)>& edit = nullptr,
    const std::function<bool(const gguf::TensorInfo&, gguf::GgufWriter&)>& tensor_edit = nullptr) {
  auto src = gguf::GgufFile::Open(Env::Default(), MmprojPath());
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  gguf::GgufWriter w;
  if (!src.ok()) return {};
  auto dropped = [&](const std::string& name) {
    return std::find(drop.begin(), drop.end(), name) != drop.end();
  };
  for (const auto& [key, value] : (*src)->metadata()) {
    if (dropped(key) || key == "general.alignment") continue;
    EXPECT_TRUE(w.SetValue(key, value).ok()) << key;
  }
  for (const gguf::TensorInfo& t : (*src)->tensors()) {
    if (dropped(t.name)) continue;
    if (tensor_edit && tensor_edit(t, w)) continue;  // replaced
    EXPECT_TRUE(w.AddTensor(t.name, t.type, t.shape,
                            std::string(reinterpret_cast<const char*>(t.data), t.n_bytes))
                    .ok())
        << t.name;
  }
  if (edit) edit(w);
  return MemFile{w.Serialize()};
}

// A qwen3vl_merger projector of the given sizes with all-zero F32 weights
// (one block, a 1 x 1 position grid).
inline MemFile ZeroProjector(int64_t patch, int64_t e, int64_t n_ff, int64_t n_out) {
  gguf::GgufWriter w;
  w.SetString("general.architecture", "clip");
  w.SetBool("clip.has_vision_encoder", true);
  w.SetString("clip.projector_type", "qwen3vl_merger");
  w.SetBool("clip.use_gelu", true);
  w.SetU32("clip.vision.projection_dim", static_cast<uint32_t>(n_out));
  w.SetU32("clip.vision.image_size", 64);
  w.SetU32("clip.vision.patch_size", static_cast<uint32_t>(patch));
  w.SetU32("clip.vision.embedding_length", static_cast<uint32_t>(e));
  w.SetU32("clip.vision.feed_forward_length", static_cast<uint32_t>(n_ff));
  w.SetU32("clip.vision.block_count", 1);
  w.SetU32("clip.vision.attention.head_count", 1);
  w.SetF32("clip.vision.attention.layer_norm_epsilon", 1e-6f);
  w.SetF32Array("clip.vision.image_mean", {0.5f, 0.5f, 0.5f});
  w.SetF32Array("clip.vision.image_std", {0.5f, 0.5f, 0.5f});
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    EXPECT_TRUE(
        w.AddTensor(name, DType::kF32, shape, std::string(static_cast<size_t>(n) * 4, '\0')).ok())
        << name;
  };
  add("v.patch_embd.weight", {patch, patch, 3, e});
  add("v.patch_embd.weight.1", {patch, patch, 3, e});
  add("v.patch_embd.bias", {e});
  add("v.position_embd.weight", {e, 1});
  for (const char* n :
       {"ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias", "attn_out.bias", "ffn_down.bias"}) {
    add(std::string("v.blk.0.") + n, {e});
  }
  add("v.blk.0.attn_qkv.weight", {e, 3 * e});
  add("v.blk.0.attn_qkv.bias", {3 * e});
  add("v.blk.0.attn_out.weight", {e, e});
  add("v.blk.0.ffn_up.weight", {e, n_ff});
  add("v.blk.0.ffn_up.bias", {n_ff});
  add("v.blk.0.ffn_down.weight", {n_ff, e});
  add("v.post_ln.weight", {e});
  add("v.post_ln.bias", {e});
  add("mm.0.weight", {4 * e, 4 * e});
  add("mm.0.bias", {4 * e});
  add("mm.2.weight", {4 * e, n_out});
  add("mm.2.bias", {n_out});
  return MemFile{w.Serialize()};
}

}  // namespace mx::vision::test
