// Preprocessing against llama.cpp's recorded ViT input (../shared/ref, "qwen35
// vision"), SmartResizeTarget's rules one case each, and PixelHash.
#include "image/preprocess.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>

#include "core/env.h"
#include "gguf/gguf_file.h"
#include "image/image_decode.h"
#include "image/test_encode.h"

namespace mx::image {
namespace {

// CLIP's mean / std as the README gives them; the mmproj file stores them
// as float32 (checked below).
constexpr std::array<float, 3> kClipMean = {0.48145466f, 0.4578275f, 0.40821073f};
constexpr std::array<float, 3> kClipStd = {0.26862954f, 0.26130258f, 0.27577711f};

std::string RefPath(const std::string& rel) { return JoinPath(MATRICXON_REF_DIR, rel); }

PreprocessParams QwenParams() {
  PreprocessParams p;
  p.mean = kClipMean;
  p.std = kClipStd;
  return p;
}

TEST(PreprocessRefTest, MmprojHoldsTheClipMeanAndStd) {
  auto f = gguf::GgufFile::Open(Env::Default(), RefPath("models/tiny-qwen35-mmproj.gguf"));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto mean = (*f)->GetFloatArray("clip.vision.image_mean");
  auto std = (*f)->GetFloatArray("clip.vision.image_std");
  ASSERT_TRUE(mean.ok() && std.ok());
  ASSERT_EQ(mean->size(), 3u);
  ASSERT_EQ(std->size(), 3u);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(static_cast<float>((*mean)[c]), kClipMean[c]) << c;
    EXPECT_EQ(static_cast<float>((*std)[c]), kClipStd[c]) << c;
  }
  EXPECT_EQ((*f)->GetInt("clip.vision.patch_size").value(), 16);
  EXPECT_EQ((*f)->GetInt("clip.vision.spatial_merge_size").value(), 2);
}

class PreprocessRefTest : public ::testing::TestWithParam<std::string> {};

// The three reference pictures decode and preprocess to llama.cpp's ViT input
// bit for bit, with the canvas size and content box the JSON records.
TEST_P(PreprocessRefTest, MatchesLlamaCppBitForBit) {
  auto json_text = Env::Default()->ReadFile(RefPath("ref-tiny-qwen35-vision.json"));
  ASSERT_TRUE(json_text.ok()) << json_text.status().ToString();
  const nlohmann::json ref = nlohmann::json::parse(*json_text);
  const nlohmann::json& im = ref["images"][GetParam()];
  const nlohmann::json& pre = im["preprocessed"];
  EXPECT_EQ(ref["preprocessing"]["image_min_tokens"].get<int64_t>(), QwenParams().min_tokens);
  EXPECT_EQ(ref["preprocessing"]["image_max_tokens"].get<int64_t>(), QwenParams().max_tokens);

  auto png = Env::Default()->ReadFile(RefPath(im["file"].get<std::string>()));
  ASSERT_TRUE(png.ok()) << png.status().ToString();
  auto img = DecodeImage({reinterpret_cast<const uint8_t*>(png->data()), png->size()}, {});
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  EXPECT_EQ(img->width, im["width"].get<int64_t>());
  EXPECT_EQ(img->height, im["height"].get<int64_t>());

  auto prep = Preprocess(*img, QwenParams());
  ASSERT_TRUE(prep.ok()) << prep.status().ToString();
  EXPECT_EQ(prep->width, pre["width"].get<int64_t>());
  EXPECT_EQ(prep->height, pre["height"].get<int64_t>());
  const auto box = pre["content_box"].get<std::vector<int64_t>>();
  ASSERT_EQ(box.size(), 4u);
  EXPECT_EQ(prep->content_x, box[0]);
  EXPECT_EQ(prep->content_y, box[1]);
  EXPECT_EQ(prep->content_w, box[2]);
  EXPECT_EQ(prep->content_h, box[3]);

  auto raw = Env::Default()->ReadFile(RefPath(pre["file"].get<std::string>()));
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  ASSERT_EQ(raw->size(), prep->pixels.size() * sizeof(float));
  size_t n_diff = 0, first_diff = 0;
  for (size_t i = 0; i < prep->pixels.size(); ++i) {
    uint32_t want;
    std::memcpy(&want, raw->data() + i * 4, 4);
    if (std::bit_cast<uint32_t>(prep->pixels[i]) != want && n_diff++ == 0) first_diff = i;
  }
  EXPECT_EQ(n_diff, 0u) << "first at float " << first_diff << " (plane "
                        << first_diff / (prep->width * prep->height) << ")";
}

INSTANTIATE_TEST_SUITE_P(Images, PreprocessRefTest, ::testing::Values("a", "b", "c"));

// Picture B in numbers: 150x50 -> 160x64, content 160x54 at rows 5-58, the
// rest black, which normalises to -mean/std.
TEST(PreprocessTest, LetterboxOfPictureB) {
  RgbImage img = testing::TestPicture(150, 50);
  auto prep = Preprocess(img, QwenParams());
  ASSERT_TRUE(prep.ok()) << prep.status().ToString();
  EXPECT_EQ(prep->width, 160);
  EXPECT_EQ(prep->height, 64);
  EXPECT_EQ(prep->content_x, 0);
  EXPECT_EQ(prep->content_y, 5);
  EXPECT_EQ(prep->content_w, 160);
  EXPECT_EQ(prep->content_h, 54);
  const size_t plane = 160 * 64;
  for (int c = 0; c < 3; ++c) {
    const float pad = (0.f / 255.0f - kClipMean[c]) / kClipStd[c];
    for (int y : {0, 4, 59, 63}) EXPECT_EQ(prep->pixels[c * plane + y * 160 + 7], pad) << y;
  }
}

// --- SmartResizeTarget, one rule per case (expected sizes worked out with
// float32 arithmetic by hand / the README's formulas).

Size2 Target(int64_t w, int64_t h, int64_t min_tokens = 8, int64_t max_tokens = 4096) {
  PreprocessParams p = QwenParams();
  p.min_tokens = min_tokens;
  p.max_tokens = max_tokens;
  return SmartResizeTarget(w, h, p);
}

TEST(SmartResizeTest, AlignedSizeIsKept) {
  EXPECT_EQ(Target(160, 96), (Size2{160, 96}));
  EXPECT_EQ(Target(1024, 768), (Size2{1024, 768}));
}

TEST(SmartResizeTest, RoundsToMultiplesOf32) {
  EXPECT_EQ(Target(150, 50), (Size2{160, 64}));
  EXPECT_EQ(Target(1920, 1080), (Size2{1920, 1088}));
}

TEST(SmartResizeTest, RoundsHalfAwayFromZero) {
  // 112 / 32 = 3.5 -> 4 and 80 / 32 = 2.5 -> 3 (round half to even: 4 and 2).
  EXPECT_EQ(Target(112, 80), (Size2{128, 96}));
}

TEST(SmartResizeTest, TooManyTokensShrinks) {
  // 4000x3008 rounds to 11 750 tokens > 4096: beta = sqrt(12e6 / 4194304).
  EXPECT_EQ(Target(4000, 3000), (Size2{2336, 1760}));
  EXPECT_EQ(Target(3000, 4000), (Size2{1760, 2336}));
  EXPECT_EQ(Target(1024, 1024, 8, 16), (Size2{128, 128}));
}

TEST(SmartResizeTest, TooFewTokensGrows) {
  EXPECT_EQ(Target(64, 32), (Size2{128, 64}));  // 2 tokens -> 8
  EXPECT_EQ(Target(33, 33), (Size2{96, 96}));
  EXPECT_EQ(Target(1, 200), (Size2{32, 1280}));
}

TEST(SmartResizeTest, OnePixelGrowsToMinTokens) { EXPECT_EQ(Target(1, 1), (Size2{96, 96})); }

TEST(SmartResizeTest, InvalidInputGivesZero) {
  EXPECT_EQ(Target(0, 10), (Size2{}));
  EXPECT_EQ(Target(10, -1), (Size2{}));
  PreprocessParams p = QwenParams();
  p.patch_size = 0;
  EXPECT_EQ(SmartResizeTarget(10, 10, p), (Size2{}));
}

TEST(SmartResizeTest, TokenCountStaysInLimitsForOrdinaryPictures) {
  for (int64_t w = 1; w <= 6000; w += 37) {
    for (int64_t h = std::max<int64_t>(1, w / 200); h <= std::min<int64_t>(6000, w * 200);
         h += 41) {
      const Size2 t = Target(w, h);
      const int64_t tokens = (t.width / 32) * (t.height / 32);
      ASSERT_EQ(t.width % 32, 0);
      ASSERT_EQ(t.height % 32, 0);
      ASSERT_GE(tokens, 8) << w << "x" << h;
      ASSERT_LE(tokens, 4096) << w << "x" << h;
    }
  }
}

// --- Preprocess edge cases

TEST(PreprocessTest, OnePixelFillsTheCanvas) {
  RgbImage img{1, 1, {10, 200, 30}};
  auto prep = Preprocess(img, QwenParams());
  ASSERT_TRUE(prep.ok()) << prep.status().ToString();
  EXPECT_EQ(prep->width, 96);
  EXPECT_EQ(prep->height, 96);
  EXPECT_EQ(prep->content_w, 96);
  EXPECT_EQ(prep->content_h, 96);
  const size_t plane = 96 * 96;
  for (int c = 0; c < 3; ++c) {
    const float want = (static_cast<float>(img.rgb[c]) / 255.0f - kClipMean[c]) / kClipStd[c];
    for (size_t i = 0; i < plane; i += 97) ASSERT_EQ(prep->pixels[c * plane + i], want);
  }
}

// A 1-pixel-wide column: the target is 32 wide and the content keeps a
// width of 1 (letterboxed), so (W-1)/(w'-1) is never 0/0.
TEST(PreprocessTest, OnePixelWideContent) {
  RgbImage img = testing::TestPicture(1, 150);
  auto prep = Preprocess(img, QwenParams());
  ASSERT_TRUE(prep.ok()) << prep.status().ToString();
  EXPECT_EQ(prep->width % 32, 0);
  EXPECT_GE(prep->content_w, 1);
  EXPECT_EQ(prep->content_h, prep->height);
  for (float v : prep->pixels) ASSERT_TRUE(std::isfinite(v));
}

TEST(PreprocessTest, ShrinksToMaxTokens) {
  RgbImage img = testing::TestPicture(2000, 1500);
  PreprocessParams p = QwenParams();
  p.max_tokens = 64;
  auto prep = Preprocess(img, p);
  ASSERT_TRUE(prep.ok()) << prep.status().ToString();
  EXPECT_LE((prep->width / 32) * (prep->height / 32), 64);
  EXPECT_EQ(prep->pixels.size(), static_cast<size_t>(3 * prep->width * prep->height));
  EXPECT_LE(prep->content_x + prep->content_w, prep->width);
  EXPECT_LE(prep->content_y + prep->content_h, prep->height);
}

TEST(PreprocessTest, ExtremeAspectRatioIsRefused) {
  RgbImage img{1000000, 1, std::vector<uint8_t>(3000000, 7)};
  auto prep = Preprocess(img, QwenParams());
  ASSERT_FALSE(prep.ok());
  EXPECT_EQ(prep.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(prep.status().message().find("image tokens"), std::string::npos)
      << prep.status().message();
}

TEST(PreprocessTest, InconsistentImageIsRefused) {
  RgbImage img{4, 4, std::vector<uint8_t>(47)};
  EXPECT_EQ(Preprocess(img, QwenParams()).status().code(), Status::Code::kInvalidArgument);
  EXPECT_FALSE(Preprocess(RgbImage{}, QwenParams()).ok());
}

TEST(PreprocessTest, ZeroStdIsRefused) {
  RgbImage img = testing::TestPicture(32, 32);
  PreprocessParams p = QwenParams();
  p.std[1] = 0;
  EXPECT_EQ(Preprocess(img, p).status().code(), Status::Code::kInvalidArgument);
  p = QwenParams();
  p.max_tokens = 4;  // below min_tokens 8
  EXPECT_EQ(Preprocess(img, p).status().code(), Status::Code::kInvalidArgument);
}

// --- PixelHash

TEST(PixelHashTest, SamePixelsSameHashAcrossFormats) {
  RgbImage img = testing::TestPicture(40, 30);
  auto from_png = DecodeImage(testing::EncodePngRgb(img), {});
  auto from_webp = DecodeImage(testing::EncodeWebpLossless(img), {});
  ASSERT_TRUE(from_png.ok() && from_webp.ok());
  EXPECT_EQ(PixelHash(*from_png), PixelHash(img));
  EXPECT_EQ(PixelHash(*from_webp), PixelHash(img));
}

TEST(PixelHashTest, OneByteOrTheShapeChangesTheHash) {
  RgbImage img = testing::TestPicture(40, 30);
  const uint64_t h = PixelHash(img);
  RgbImage changed = img;
  changed.rgb[1234] ^= 1;
  EXPECT_NE(PixelHash(changed), h);
  RgbImage reshaped = img;  // same bytes, 30x40
  reshaped.width = 30;
  reshaped.height = 40;
  EXPECT_NE(PixelHash(reshaped), h);
}

TEST(PixelHashTest, IsTruncatedSha256) {
  // SHA-256 of 16 zero bytes (width 0, height 0, no pixels) is
  // 374708fff7719dd5979ec875d56cd2286f6d3cf7ec317a3b25632aab28ec37bb.
  EXPECT_EQ(PixelHash(RgbImage{}), 0xd59d71f7ff084737ull);
}

}  // namespace
}  // namespace mx::image
