// make-model's vision projector writer: the tiny preset reproduces
// ref/tiny-qwen35-mmproj.gguf's keys and tensor table, the 0.8B preset has the
// real Qwen3.5-0.8B vision tower's shape, weights are deterministic by seed
// and bad specs are errors.
#include "models/synthetic_projector.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include "gguf/gguf_file.h"
#include "models/synthetic_model.h"
#include "scratch_dir.h"

namespace mx::models {
namespace {

namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  return testing_support::ProcessTempPath("proj_" + name);
}

const std::string kRefPath = std::string(MATRICXON_REF_DIR) + "/models/tiny-qwen35-mmproj.gguf";

SyntheticProjectorSpec Preset(const std::string& name) {
  Result<SyntheticProjectorSpec> s = SyntheticProjectorPreset(name);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : SyntheticProjectorSpec{};
}

std::unique_ptr<gguf::GgufFile> Write(const SyntheticProjectorSpec& spec, const std::string& file) {
  const std::string path = TempPath(file);
  const Status st = WriteSyntheticProjector(Env::Default(), spec, path);
  EXPECT_TRUE(st.ok()) << st.ToString();
  auto f = gguf::GgufFile::Open(Env::Default(), path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return f.ok() ? std::move(*f) : nullptr;
}

bool SameValue(const gguf::Value& a, const gguf::Value& b) {
  return a.type == b.type && a.array_type == b.array_type && a.i == b.i && a.u == b.u &&
         a.f == b.f && a.str == b.str && a.ints == b.ints && a.floats == b.floats &&
         a.strings == b.strings;
}

std::string Show(const gguf::Value& v) {
  std::string s = gguf::ValueTypeName(v.type);
  if (v.type == gguf::ValueType::kArray) {
    s += std::string("[") + gguf::ValueTypeName(v.array_type) + " x " +
         std::to_string(v.array_size()) + "]";
    for (int64_t x : v.ints) s += " " + std::to_string(x);
    for (double x : v.floats) s += " " + std::to_string(x);
  } else if (v.type == gguf::ValueType::kString) {
    s += " '" + v.str + "'";
  } else if (v.is_float()) {
    s += " " + std::to_string(v.f);
  } else {
    s += " " + std::to_string(v.i);
  }
  return s;
}

// Every key of the ref file with its type and value (there are no weights in
// the metadata), no key more, and every tensor's name, type and shape in order.
TEST(SyntheticProjectorTest, TinyPresetHasTheRefFilesKeysAndTensors) {
  auto ref = gguf::GgufFile::Open(Env::Default(), kRefPath);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  auto ours = Write(Preset("tiny-qwen35"), "tiny.mmproj.gguf");
  ASSERT_NE(ours, nullptr);

  for (const auto& [key, want] : (*ref)->metadata()) {
    const gguf::Value* got = ours->Find(key);
    if (got == nullptr) {
      ADD_FAILURE() << "missing key " << key << " = " << Show(want);
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
    EXPECT_EQ(got[i].offset, want[i].offset) << got[i].name;
  }
  EXPECT_EQ(ours->file_size(), (*ref)->file_size());
}

// Key order and encoding too: everything before the tensor data is the ref
// file's bytes.
TEST(SyntheticProjectorTest, TinyPresetHeaderIsTheRefFilesBytes) {
  auto ref = gguf::GgufFile::Open(Env::Default(), kRefPath);
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  auto ours = Write(Preset("tiny-qwen35"), "tiny-header.mmproj.gguf");
  ASSERT_NE(ours, nullptr);
  const size_t header = static_cast<size_t>((*ref)->tensors()[0].data - (*ref)->file_data());
  ASSERT_EQ(static_cast<size_t>(ours->tensors()[0].data - ours->file_data()), header);
  EXPECT_EQ(0, std::memcmp(ours->file_data(), (*ref)->file_data(), header));
}

// Each preset's projection is its LM preset's width: libmtmd refuses a pair
// whose widths differ.
TEST(SyntheticProjectorTest, ProjectionDimIsTheLmPresetsWidth) {
  for (const std::string& name : SyntheticProjectorPresetNames()) {
    SCOPED_TRACE(name);
    Result<SyntheticSpec> lm = SyntheticPreset(name);
    ASSERT_TRUE(lm.ok()) << lm.status().ToString();
    EXPECT_EQ(Preset(name).projection_dim, lm->n_embd);
    EXPECT_TRUE(ValidateSyntheticProjectorSpec(Preset(name)).ok());
  }
}

// Qwen3.5-0.8B's vision_config: depth 12, hidden 768, 12 heads, FFN 3072,
// 2304 = 48 x 48 position embeddings, out_hidden_size 1024, patch 16; F16
// matrices and patch kernels, F32 norms, biases and position grid.
TEST(SyntheticProjectorTest, Qwen35_08bPresetHasTheRealVisionTowerShape) {
  const SyntheticProjectorSpec s = Preset("qwen3.5-0.8b");
  EXPECT_EQ(s.weight_type, DType::kF16);
  std::map<std::string, ProjectorTensor> by_name;
  for (const ProjectorTensor& t : SyntheticProjectorTensors(s)) by_name.emplace(t.name, t);
  EXPECT_EQ(by_name.size(), 4u + 12u * 12u + 6u);
  auto expect = [&](const std::string& name, DType type, std::vector<int64_t> shape) {
    auto it = by_name.find(name);
    ASSERT_NE(it, by_name.end()) << name;
    EXPECT_EQ(it->second.type, type) << name;
    EXPECT_EQ(it->second.shape, shape) << name;
  };
  expect("v.patch_embd.weight", DType::kF16, {16, 16, 3, 768});
  expect("v.patch_embd.weight.1", DType::kF16, {16, 16, 3, 768});
  expect("v.patch_embd.bias", DType::kF32, {768});
  expect("v.position_embd.weight", DType::kF32, {768, 2304});
  expect("v.blk.11.ln1.weight", DType::kF32, {768});
  expect("v.blk.11.attn_qkv.weight", DType::kF16, {768, 2304});
  expect("v.blk.11.attn_qkv.bias", DType::kF32, {2304});
  expect("v.blk.11.attn_out.weight", DType::kF16, {768, 768});
  expect("v.blk.11.ffn_up.weight", DType::kF16, {768, 3072});
  expect("v.blk.11.ffn_down.weight", DType::kF16, {3072, 768});
  expect("v.post_ln.bias", DType::kF32, {768});
  expect("mm.0.weight", DType::kF16, {3072, 3072});
  expect("mm.2.weight", DType::kF16, {3072, 1024});
  expect("mm.2.bias", DType::kF32, {1024});
  EXPECT_EQ(by_name.count("v.blk.12.ln1.weight"), 0u);
}

TEST(SyntheticProjectorTest, SameSpecSameBytesOtherSeedOtherBytes) {
  SyntheticProjectorSpec s = Preset("tiny-qwen35");
  auto a = Write(s, "a.gguf"), b = Write(s, "b.gguf");
  s.seed = 2;
  auto c = Write(s, "c.gguf");
  ASSERT_TRUE(a && b && c);
  ASSERT_EQ(a->file_size(), b->file_size());
  ASSERT_EQ(a->file_size(), c->file_size());
  EXPECT_EQ(0, std::memcmp(a->file_data(), b->file_data(), a->file_size()));
  EXPECT_NE(0, std::memcmp(a->file_data(), c->file_data(), a->file_size()));
}

double Rms(const gguf::GgufFile& f, const std::string& name, double mean = 0) {
  const gguf::TensorInfo* t = f.FindTensor(name);
  EXPECT_TRUE(t != nullptr && t->type == DType::kF32) << name;
  if (t == nullptr || t->type != DType::kF32) return -1;
  std::vector<float> v(static_cast<size_t>(t->n_elements()));
  std::memcpy(v.data(), t->data, v.size() * sizeof(float));
  double sum = 0;
  for (float x : v) sum += (x - mean) * (x - mean);
  return std::sqrt(sum / static_cast<double>(v.size()));
}

// The reference's recipe, within sampling error.
TEST(SyntheticProjectorTest, WeightsFollowTheRecipe) {
  auto f = Write(Preset("tiny-qwen35"), "recipe.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(Rms(*f, "v.patch_embd.weight"), 1 / std::sqrt(768.0), 0.002);
  EXPECT_NEAR(Rms(*f, "v.position_embd.weight"), 0.5, 0.03);
  EXPECT_NEAR(Rms(*f, "v.blk.0.attn_qkv.weight"), 1 / std::sqrt(64.0), 0.005);
  EXPECT_NEAR(Rms(*f, "v.blk.0.ffn_down.weight"), 1 / std::sqrt(176.0), 0.005);
  EXPECT_NEAR(Rms(*f, "mm.0.weight"), 1 / std::sqrt(256.0), 0.001);
  EXPECT_NEAR(Rms(*f, "v.blk.0.ln1.weight", 1.0), 0.1, 0.03);
  EXPECT_NEAR(Rms(*f, "v.blk.2.attn_qkv.bias"), 0.2, 0.04);
  EXPECT_NEAR(Rms(*f, "v.post_ln.bias"), 0.1, 0.03);
}

// F16 and Q8_0 reach the matrices; the patch kernels follow the converter
// (F16 in an F16 file, F32 otherwise); the grid, norms and biases stay F32.
TEST(SyntheticProjectorTest, WeightTypeReachesTheMatrices) {
  for (DType w : {DType::kF16, DType::kQ8_0}) {
    SCOPED_TRACE(DTypeName(w));
    SyntheticProjectorSpec s = Preset("tiny-qwen35");
    s.weight_type = w;
    s.n_ff = 192;  // Q8_0 rows are multiples of 32
    auto f = Write(s, DTypeName(w) + ".gguf");
    ASSERT_NE(f, nullptr);
    Result<int64_t> file_type = f->GetInt("general.file_type");
    ASSERT_TRUE(file_type.ok());
    EXPECT_EQ(*file_type, w == DType::kF16 ? 1 : 7);
    EXPECT_EQ(f->FindTensor("v.blk.1.attn_qkv.weight")->type, w);
    EXPECT_EQ(f->FindTensor("v.blk.1.ffn_down.weight")->type, w);
    EXPECT_EQ(f->FindTensor("mm.2.weight")->type, w);
    EXPECT_EQ(f->FindTensor("v.patch_embd.weight.1")->type,
              w == DType::kF16 ? DType::kF16 : DType::kF32);
    EXPECT_EQ(f->FindTensor("v.position_embd.weight")->type, DType::kF32);
    EXPECT_EQ(f->FindTensor("v.blk.1.ln2.weight")->type, DType::kF32);
    EXPECT_EQ(f->FindTensor("mm.0.bias")->type, DType::kF32);
  }
}

void ExpectInvalid(const SyntheticProjectorSpec& s, const std::string& field) {
  const Status st = ValidateSyntheticProjectorSpec(s);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << field;
  EXPECT_NE(st.ToString().find(field), std::string::npos) << st.ToString();
  EXPECT_FALSE(WriteSyntheticProjector(Env::Default(), s, TempPath("invalid.gguf")).ok());
}

TEST(SyntheticProjectorTest, InvalidSpecsAreErrorsNamingTheField) {
  const SyntheticProjectorSpec base = Preset("tiny-qwen35");
  SyntheticProjectorSpec s = base;
  s.n_head = 3;  // 64 / 3
  ExpectInvalid(s, "heads");
  s = base, s.n_head = 8;  // heads of 8 dims: fine
  EXPECT_TRUE(ValidateSyntheticProjectorSpec(s).ok());
  s = base, s.n_head = 32;  // heads of 2 dims: no room for the 2-D RoPE
  ExpectInvalid(s, "heads");
  s = base, s.spatial_merge = 3;
  ExpectInvalid(s, "spatial-merge");
  s = base, s.n_block = 0;
  ExpectInvalid(s, "blocks");
  s = base, s.pos_grid = -1;
  ExpectInvalid(s, "position-grid");
  s = base, s.projection_dim = 0;
  ExpectInvalid(s, "projection-dim");
  s = base, s.image_std[1] = 0;
  ExpectInvalid(s, "image-mean/std");
  s = base, s.image_mean[2] = NAN;
  ExpectInvalid(s, "image-mean/std");
  s = base, s.weight_type = DType::kQ8_0;  // ffn_down rows of 176
  ExpectInvalid(s, "ffn_down.weight");
  s = base, s.weight_type = DType::kQ4_K;
  ExpectInvalid(s, "weight type");
  EXPECT_EQ(SyntheticProjectorPreset("tiny").status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(SyntheticProjectorPreset("tiny").status().ToString().find("qwen3.5-0.8b"),
            std::string::npos);
}

TEST(SyntheticProjectorTest, DefaultPathSitsBesideTheModel) {
  EXPECT_EQ(DefaultProjectorPath("/m/tiny-qwen35.gguf"), "/m/tiny-qwen35.mmproj.gguf");
  EXPECT_EQ(DefaultProjectorPath("model"), "model.mmproj.gguf");
  EXPECT_EQ(DefaultProjectorPath("a.b.gguf"), "a.b.mmproj.gguf");
}

}  // namespace
}  // namespace mx::models
