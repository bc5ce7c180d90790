// Projector loading: the tiny mmproj's config, other weight types, and
// hostile or invalid files and inputs (each a clear error, never a crash).
#include "vision/projector.h"

#include <gtest/gtest.h>

#include <cstring>

#include "kernels/kernels.h"
#include "vision/vision_internal.h"
#include "vision/vision_test_util.h"

namespace mx::vision {
namespace {

using Code = Status::Code;
using test::MemFile;
using test::RewriteTiny;

// Expects `s` to have `code` and a message naming the file and every part.
void ExpectError(const Status& s, Code code, std::initializer_list<const char*> parts) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find("hostile.gguf"), std::string::npos) << s.ToString();
  for (const char* part : parts) {
    EXPECT_NE(s.message().find(part), std::string::npos)
        << "message lacks \"" << part << "\": " << s.ToString();
  }
}

Status LoadStatus(const MemFile& m) {
  auto f = m.Parse();
  if (f == nullptr) return Status::Internal("unparsable");
  auto p = Projector::Load(std::move(f));
  return p.ok() ? Status::Ok() : p.status();
}

// A tensor's bytes replaced by a same-named one of another shape or type.
std::function<bool(const gguf::TensorInfo&, gguf::GgufWriter&)> Replace(
    const std::string& name, DType type, std::vector<int64_t> shape) {
  return [=](const gguf::TensorInfo& t, gguf::GgufWriter& w) {
    if (t.name != name) return false;
    int64_t rows = 1;
    for (size_t i = 1; i < shape.size(); ++i) rows *= shape[i];
    EXPECT_TRUE(w.AddTensor(name, type, shape,
                            std::string(RowBytes(type, shape[0]) * static_cast<size_t>(rows), '\0'))
                    .ok());
    return true;
  };
}

TEST(ProjectorTest, TinyConfigIsTheReadmeTable) {
  auto p = test::LoadTiny();
  ASSERT_NE(p, nullptr);
  const ProjectorConfig& c = p->config();
  EXPECT_EQ(c.projector_type, "qwen3vl_merger");
  EXPECT_EQ(c.patch_size, 16);
  EXPECT_EQ(c.merge, 2);
  EXPECT_EQ(c.pixel_multiple(), 32);
  EXPECT_EQ(c.n_embd, 64);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.head_dim(), 16);
  EXPECT_EQ(c.n_ff, 176);
  EXPECT_EQ(c.n_layer, 3);
  EXPECT_EQ(c.n_embd_out, 128);
  EXPECT_EQ(c.pos_grid, 6);
  EXPECT_EQ(c.image_size, 96);
  EXPECT_FLOAT_EQ(c.eps, 1e-6f);
  EXPECT_TRUE(c.gelu);
  const std::array<float, 3> mean = {0.48145466f, 0.4578275f, 0.40821073f};
  const std::array<float, 3> stdv = {0.26862954f, 0.26130258f, 0.27577711f};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(c.image_mean[i], mean[i]);
    EXPECT_FLOAT_EQ(c.image_std[i], stdv[i]);
  }
  EXPECT_EQ(p->weight_bytes(), 318480u * 4);  // 318 480 F32 parameters
  EXPECT_EQ(p->path(), test::MmprojPath());
}

TEST(ProjectorTest, IsProjectorReadsTheArchitecture) {
  auto f = gguf::GgufFile::Open(Env::Default(), test::MmprojPath());
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(Projector::IsProjector(**f));
  auto lm =
      gguf::GgufFile::Open(Env::Default(), mx::testing::RefDir() + "/models/tiny-qwen35.gguf");
  ASSERT_TRUE(lm.ok());
  EXPECT_FALSE(Projector::IsProjector(**lm));
}

TEST(ProjectorTest, OutputWidthMustMatchTheModel) {
  auto p = test::LoadTiny();
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->CheckMatchesModel(128).ok());
  Status s = p->CheckMatchesModel(1024);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("128"), std::string::npos) << s.ToString();
  EXPECT_NE(s.message().find("1024"), std::string::npos) << s.ToString();
}

TEST(ProjectorTest, LanguageModelFileIsNotAProjector) {
  auto lm =
      gguf::GgufFile::Open(Env::Default(), mx::testing::RefDir() + "/models/tiny-qwen35.gguf");
  ASSERT_TRUE(lm.ok());
  auto p = Projector::Load(std::move(lm).value());
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), Code::kInvalidArgument);
  EXPECT_NE(p.status().message().find("tiny-qwen35.gguf"), std::string::npos);
  EXPECT_NE(p.status().message().find("'clip'"), std::string::npos) << p.status().ToString();
}

TEST(ProjectorTest, UnchangedRewriteLoads) { EXPECT_TRUE(LoadStatus(RewriteTiny({})).ok()); }

TEST(ProjectorTest, OtherProjectorTypeIsNotSupported) {
  auto m = RewriteTiny({}, [](gguf::GgufWriter& w) { w.SetString("clip.projector_type", "ldp"); });
  ExpectError(LoadStatus(m), Code::kNotSupported, {"'ldp'", "qwen3vl_merger"});
}

TEST(ProjectorTest, MissingProjectorTypeIsNamed) {
  ExpectError(LoadStatus(RewriteTiny({"clip.projector_type"})), Code::kNotFound,
              {"clip.vision.projector_type"});
}

TEST(ProjectorTest, PerModalityProjectorTypeIsRead) {
  auto m = RewriteTiny({"clip.projector_type"}, [](gguf::GgufWriter& w) {
    w.SetString("clip.vision.projector_type", "qwen3vl_merger");
  });
  EXPECT_TRUE(LoadStatus(m).ok());
}

TEST(ProjectorTest, NoVisionEncoderIsNotSupported) {
  auto m =
      RewriteTiny({}, [](gguf::GgufWriter& w) { w.SetBool("clip.has_vision_encoder", false); });
  ExpectError(LoadStatus(m), Code::kNotSupported, {"clip.has_vision_encoder"});
}

TEST(ProjectorTest, MissingTensorIsNamed) {
  ExpectError(LoadStatus(RewriteTiny({"v.blk.1.ffn_up.bias"})), Code::kNotFound,
              {"v.blk.1.ffn_up.bias"});
}

TEST(ProjectorTest, MissingSecondPatchKernelIsNamed) {
  ExpectError(LoadStatus(RewriteTiny({"v.patch_embd.weight.1"})), Code::kNotFound,
              {"v.patch_embd.weight.1"});
}

TEST(ProjectorTest, WrongTensorShapeSaysExpectedAndActual) {
  auto m = RewriteTiny({}, nullptr, Replace("v.blk.0.attn_qkv.weight", DType::kF32, {64, 190}));
  ExpectError(LoadStatus(m), Code::kInvalidArgument,
              {"v.blk.0.attn_qkv.weight", "[64, 190]", "expected [64, 192]"});
}

TEST(ProjectorTest, WrongPatchKernelShapeSaysExpectedAndActual) {
  auto m = RewriteTiny({}, nullptr, Replace("v.patch_embd.weight", DType::kF32, {14, 14, 3, 64}));
  ExpectError(LoadStatus(m), Code::kInvalidArgument,
              {"v.patch_embd.weight", "[14, 14, 3, 64]", "expected [16, 16, 3, 64]"});
}

TEST(ProjectorTest, UnsupportedWeightTypeIsNamed) {
  auto m = RewriteTiny({}, nullptr, Replace("mm.2.weight", DType::kI32, {256, 128}));
  ExpectError(LoadStatus(m), Code::kNotSupported, {"mm.2.weight", "I32"});
}

TEST(ProjectorTest, NonSquarePositionGridIsRejected) {
  auto m = RewriteTiny({}, nullptr, Replace("v.position_embd.weight", DType::kF32, {64, 35}));
  ExpectError(LoadStatus(m), Code::kInvalidArgument, {"v.position_embd.weight", "[64, 35]"});
}

TEST(ProjectorTest, DeepstackTensorIsNotSupported) {
  auto m = RewriteTiny({}, [](gguf::GgufWriter& w) {
    EXPECT_TRUE(
        w.AddTensor("v.deepstack.1.fc1.weight", DType::kF32, {256, 256}, std::string(262144, '\0'))
            .ok());
  });
  ExpectError(LoadStatus(m), Code::kNotSupported, {"v.deepstack.1.fc1.weight", "deepstack"});
}

TEST(ProjectorTest, ZeroAndOddSizesAreRejected) {
  struct Case {
    const char* key;
    uint32_t value;
    Code code;
  };
  for (const Case& k : {Case{"clip.vision.embedding_length", 0, Code::kInvalidArgument},
                        Case{"clip.vision.patch_size", 0, Code::kInvalidArgument},
                        Case{"clip.vision.block_count", 0, Code::kInvalidArgument},
                        Case{"clip.vision.attention.head_count", 0, Code::kInvalidArgument},
                        Case{"clip.vision.attention.head_count", 3, Code::kInvalidArgument},
                        Case{"clip.vision.attention.head_count", 32, Code::kInvalidArgument},
                        Case{"clip.vision.projection_dim", 0, Code::kInvalidArgument},
                        Case{"clip.vision.feed_forward_length", 0, Code::kInvalidArgument},
                        Case{"clip.vision.spatial_merge_size", 3, Code::kNotSupported},
                        Case{"clip.vision.block_count", 4, Code::kNotFound},
                        Case{"clip.vision.embedding_length", 65, Code::kInvalidArgument},
                        Case{"clip.vision.patch_size", 14, Code::kInvalidArgument}}) {
    SCOPED_TRACE(std::string(k.key) + " = " + std::to_string(k.value));
    auto m = RewriteTiny({}, [&](gguf::GgufWriter& w) { w.SetU32(k.key, k.value); });
    ExpectError(LoadStatus(m), k.code, {});
  }
}

TEST(ProjectorTest, MissingOrShortKeysAreNamed) {
  for (const char* key : {"clip.vision.patch_size", "clip.vision.attention.layer_norm_epsilon",
                          "clip.vision.image_mean", "clip.vision.image_size"}) {
    ExpectError(LoadStatus(RewriteTiny({key})), Code::kNotFound, {key});
  }
  auto m = RewriteTiny({}, [](gguf::GgufWriter& w) {
    w.SetF32Array("clip.vision.image_std", {0.5f, 0.5f});
  });
  ExpectError(LoadStatus(m), Code::kInvalidArgument, {"clip.vision.image_std", "2 values"});
  auto wrong_type = RewriteTiny(
      {}, [](gguf::GgufWriter& w) { w.SetString("clip.vision.embedding_length", "64"); });
  ExpectError(LoadStatus(wrong_type), Code::kInvalidArgument, {"clip.vision.embedding_length"});
}

TEST(ProjectorTest, WithoutUseGeluTheVitUsesGeluQuick) {
  auto m = RewriteTiny({"clip.use_gelu"});
  auto p = Projector::Load(m.Parse());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_FALSE((*p)->config().gelu);
  const test::RefImage& r = test::LoadRefImage("a");
  auto out = (*p)->Encode(r.pixels, r.width, r.height, nullptr);
  ASSERT_TRUE(out.ok());
  // A different activation: clearly not llama.cpp's GELU output.
  EXPECT_GT(test::MaxAbsDiff(out->data, r.embd), 1e-2f);
}

// Encode's argument checks: errors, never a crash or a huge allocation.
TEST(ProjectorTest, BadPictureSizesAreInvalidArguments) {
  auto p = test::LoadTiny();
  ASSERT_NE(p, nullptr);
  std::vector<float> pixels(3 * 160 * 96, 0.0f);
  struct Case {
    int64_t w, h;
    size_t n;
    const char* part;
  };
  for (const Case& k :
       {Case{0, 96, 0, "not positive"}, Case{160, -32, pixels.size(), "positive"},
        Case{150, 96, 3 * 150 * 96, "multiples of 32"},
        Case{160, 100, 3 * 160 * 100, "multiples of 32"},
        Case{16, 16, 3 * 16 * 16, "multiples of 32"}, Case{160, 96, pixels.size() - 1, "got 46079"},
        Case{160, 64, pixels.size(), "needs 30720"}, Case{32 * 200, 32 * 200, 64, "limit"},
        Case{INT64_MAX / 2 / 32 * 32, 32, 64, "limit"}}) {
    SCOPED_TRACE(std::to_string(k.w) + "x" + std::to_string(k.h));
    auto out = p->Encode(std::span<const float>(pixels.data(), std::min(k.n, pixels.size())), k.w,
                         k.h, nullptr);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), Code::kInvalidArgument);
    EXPECT_NE(out.status().message().find(k.part), std::string::npos) << out.status().ToString();
  }
}

TEST(ProjectorTest, WorkingMemoryIsBounded) {
  auto p = test::LoadTiny();
  ASSERT_NE(p, nullptr);
  ProjectorConfig c = p->config();
  // The tiny projector at the patch limit stays far below the cap...
  EXPECT_LT(internal::WorkspaceBytes(c, kMaxPatches, 16), 2e8);
  // ... a real Qwen 3.5 tower (768 wide, FFN 3072) too ...
  c.n_embd = 768;
  c.n_head = 12;
  c.n_ff = 3072;
  c.n_embd_out = 1024;
  EXPECT_LT(internal::WorkspaceBytes(c, kMaxPatches, 16), 1e9);
  // ... a hostile FFN width does not.
  c.n_ff = 1 << 18;
  EXPECT_GT(internal::WorkspaceBytes(c, kMaxPatches, 16), static_cast<double>(kMaxWorkspaceBytes));
}

TEST(ProjectorTest, HugeWorkingMemoryIsResourceExhausted) {
  // 320-pixel patches: 16384 of them are a 40960 x 40960 picture, whose
  // patch matrix alone is 20 GB. Refused before the pixels are looked at.
  const MemFile m = test::ZeroProjector(320, 4, 4, 4);
  auto p = Projector::Load(m.Parse());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::vector<float> pixels(16);
  auto out = (*p)->Encode(pixels, 320 * 128, 320 * 128, nullptr);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), Code::kResourceExhausted) << out.status().ToString();
  EXPECT_NE(out.status().message().find("working memory"), std::string::npos);
  // A small picture through the same file works (zero weights: zero output).
  std::vector<float> small(3 * 640 * 640, 1.0f);
  auto ok = (*p)->Encode(small, 640, 640, nullptr);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->nx * ok->ny, 1);
  for (float v : ok->data) EXPECT_EQ(v, 0.0f);
}

// The tiny mmproj with every matrix converted to `type` (where its rows fit
// the type's blocks); vectors stay F32.
MemFile Converted(DType type) {
  return RewriteTiny({}, nullptr, [type](const gguf::TensorInfo& t, gguf::GgufWriter& w) {
    if (t.shape.size() < 2 || t.type != DType::kF32 || t.name == "v.position_embd.weight" ||
        RowBytes(type, t.shape[0]) == 0) {
      return false;
    }
    const int64_t n = t.n_elements();
    std::string bytes(RowBytes(type, t.shape[0]) * static_cast<size_t>(n / t.shape[0]), '\0');
    for (int64_t r = 0; r < n / t.shape[0]; ++r) {
      kernels::QuantizeRow(type, reinterpret_cast<const float*>(t.data) + r * t.shape[0],
                           reinterpret_cast<uint8_t*>(bytes.data()) +
                               static_cast<size_t>(r) * RowBytes(type, t.shape[0]),
                           t.shape[0]);
    }
    EXPECT_TRUE(w.AddTensor(t.name, type, t.shape, bytes).ok()) << t.name;
    return true;
  });
}

class WeightTypeTest : public ::testing::TestWithParam<DType> {};

TEST_P(WeightTypeTest, EncodesCloseToTheF32Reference) {
  const MemFile m = Converted(GetParam());
  auto p = Projector::Load(m.Parse());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)->weights().blocks[0].qkv.type, GetParam());
  const test::RefImage& r = test::LoadRefImage("a");
  ThreadPool one(1), two(2);
  auto a = (*p)->Encode(r.pixels, r.width, r.height, &one);
  auto b = (*p)->Encode(r.pixels, r.width, r.height, &two);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(std::memcmp(a->data.data(), b->data.data(), a->data.size() * sizeof(float)), 0);
  const float diff = test::MaxAbsDiff(a->data, r.embd);
  std::printf("  [%s weights] embeddings vs F32 llama.cpp: %.3g\n", DTypeName(GetParam()).c_str(),
              diff);
  EXPECT_LE(diff, GetParam() == DType::kF16 ? 5e-3f : 5e-2f);
}

INSTANTIATE_TEST_SUITE_P(Types, WeightTypeTest,
                         ::testing::Values(DType::kF16, DType::kBF16, DType::kQ8_0),
                         [](const auto& info) { return DTypeName(info.param); });

}  // namespace
}  // namespace mx::vision
