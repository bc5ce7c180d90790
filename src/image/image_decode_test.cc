// DecodeImage on well-formed pictures: the same picture written in every
// format and variant (encoded in memory by test_encode.h) decodes to the RGB
// stb_image would give llama.cpp: alpha dropped, grey replicated, 16-bit high
// byte, palettes applied.
#include "image/image_decode.h"

#include <gtest/gtest.h>
#include <png.h>

#include <cstdlib>
#include <string>

#include "core/env.h"
#include "image/test_encode.h"

namespace mx::image {
namespace {

using testing::Bytes;
using testing::Rgb;

Result<RgbImage> Decode(const Bytes& bytes) { return DecodeImage(bytes, DecodeLimits{}); }

// Asserts exact equality, reporting the first differing pixel.
void ExpectSameRgb(const RgbImage& got, const RgbImage& want) {
  ASSERT_EQ(got.width, want.width);
  ASSERT_EQ(got.height, want.height);
  ASSERT_EQ(got.rgb.size(), want.rgb.size());
  for (size_t i = 0; i < want.rgb.size(); ++i) {
    ASSERT_EQ(static_cast<int>(got.rgb[i]), static_cast<int>(want.rgb[i]))
        << "pixel " << (i / 3) % want.width << "," << (i / 3) / want.width << " channel " << i % 3;
  }
}

// The largest per-channel difference.
int MaxDiff(const RgbImage& a, const RgbImage& b) {
  int d = 0;
  for (size_t i = 0; i < a.rgb.size() && i < b.rgb.size(); ++i) {
    d = std::max(d, std::abs(static_cast<int>(a.rgb[i]) - static_cast<int>(b.rgb[i])));
  }
  return d;
}

RgbImage GreyToRgb(int width, int height, const std::vector<uint8_t>& grey) {
  RgbImage img{width, height, {}};
  for (uint8_t g : grey) img.rgb.insert(img.rgb.end(), {g, g, g});
  return img;
}

TEST(ImageFormatTest, NamesAndSniffing) {
  EXPECT_STREQ(ImageFormatName(ImageFormat::kPng), "PNG");
  EXPECT_STREQ(ImageFormatName(ImageFormat::kJpeg), "JPEG");
  EXPECT_STREQ(ImageFormatName(ImageFormat::kWebp), "WebP");
  EXPECT_STREQ(ImageFormatName(ImageFormat::kGif), "GIF");
  const RgbImage img = testing::TestPicture(8, 8);
  EXPECT_EQ(SniffImageFormat(testing::EncodePngRgb(img)).value(), ImageFormat::kPng);
  EXPECT_EQ(SniffImageFormat(testing::EncodeJpeg(img, {})).value(), ImageFormat::kJpeg);
  EXPECT_EQ(SniffImageFormat(testing::EncodeWebpLossless(img)).value(), ImageFormat::kWebp);
  testing::GifSpec gif{.screen_w = 8,
                       .screen_h = 8,
                       .frame_w = 8,
                       .frame_h = 8,
                       .colors = {{0, 0, 0}, {255, 255, 255}},
                       .indices = std::vector<uint8_t>(64)};
  EXPECT_EQ(SniffImageFormat(testing::EncodeGif(gif)).value(), ImageFormat::kGif);
}

// The reference pictures are 8-bit RGB PNGs of the sizes the JSON gives.
TEST(ImageDecodeTest, ReferencePngs) {
  const struct {
    const char* file;
    int64_t width, height;
  } kFiles[] = {{"tiny-qwen35-a-160x96.png", 160, 96},
                {"tiny-qwen35-b-150x50.png", 150, 50},
                {"tiny-qwen35-c-160x96.png", 160, 96}};
  for (const auto& f : kFiles) {
    auto bytes = Env::Default()->ReadFile(JoinPath(JoinPath(MATRICXON_REF_DIR, "images"), f.file));
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    auto img = DecodeImage({reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()}, {});
    ASSERT_TRUE(img.ok()) << f.file << ": " << img.status().ToString();
    EXPECT_EQ(img->width, f.width);
    EXPECT_EQ(img->height, f.height);
    EXPECT_EQ(img->rgb.size(), static_cast<size_t>(f.width * f.height * 3));
  }
}

// --- PNG variants

TEST(PngDecodeTest, RgbIsExact) {
  const RgbImage img = testing::TestPicture(37, 23);
  auto got = Decode(testing::EncodePngRgb(img));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameRgb(*got, img);
}

TEST(PngDecodeTest, InterlacedRgbIsExact) {
  const RgbImage img = testing::TestPicture(37, 23);
  testing::PngSpec s{.width = 37,
                     .height = 23,
                     .color_type = PNG_COLOR_TYPE_RGB,
                     .bit_depth = 8,
                     .interlace = true,
                     .samples = img.rgb};
  auto got = Decode(testing::EncodePng(s));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameRgb(*got, img);
}

TEST(PngDecodeTest, RgbaDropsAlpha) {
  const RgbImage img = testing::TestPicture(20, 10);
  testing::PngSpec s{
      .width = 20, .height = 10, .color_type = PNG_COLOR_TYPE_RGB_ALPHA, .bit_depth = 8};
  for (size_t i = 0; i < 200; ++i) {
    s.samples.insert(s.samples.end(), &img.rgb[i * 3], &img.rgb[i * 3] + 3);
    s.samples.push_back(static_cast<uint8_t>(i % 3 == 0 ? 0 : i));  // transparent too
  }
  auto got = Decode(testing::EncodePng(s));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameRgb(*got, img);  // not composited: RGB under alpha 0 is kept
}

TEST(PngDecodeTest, GreyIsReplicated) {
  std::vector<uint8_t> grey(15 * 9);
  for (size_t i = 0; i < grey.size(); ++i) grey[i] = static_cast<uint8_t>(i * 7);
  testing::PngSpec s{.width = 15,
                     .height = 9,
                     .color_type = PNG_COLOR_TYPE_GRAY,
                     .bit_depth = 8,
                     .interlace = false,
                     .samples = grey};
  auto got = Decode(testing::EncodePng(s));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameRgb(*got, GreyToRgb(15, 9, grey));
}

TEST(PngDecodeTest, GreyAlphaDropsAlpha) {
  std::vector<uint8_t> grey(15 * 9), samples;
  for (size_t i = 0; i < grey.size(); ++i) {
    grey[i] = static_cast<uint8_t>(255 - i);
    samples.push_back(grey[i]);
    samples.push_back(static_cast<uint8_t>(i * 3));
  }
  testing::PngSpec s{.width = 15,
                     .height = 9,
                     .color_type = PNG_COLOR_TYPE_GRAY_ALPHA,
                     .bit_depth = 8,
                     .interlace = false,
                     .samples = samples};
  auto got = Decode(testing::EncodePng(s));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameRgb(*got, GreyToRgb(15, 9, grey));
}

// 1, 2 and 4-bit grey scale to 8 bits by replication (v * 255 / (2^d - 1)).
TEST(PngDecodeTest, LowBitGreyIsScaled) {
  for (int depth : {1, 2, 4}) {
    const int max = (1 << depth) - 1;
    std::vector<uint8_t> samples(13 * 5), grey;
    for (size_t i = 0; i < samples.size(); ++i) {
      samples[i] = static_cast<uint8_t>(i % (max + 1));
      grey.push_back(static_cast<uint8_t>(samples[i] * 255 / max));
    }
    testing::PngSpec s{.width = 13,
                       .height = 5,
                       .color_type = PNG_COLOR_TYPE_GRAY,
                       .bit_depth = depth,
                       .interlace = false,
                       .samples = samples};
    auto got = Decode(testing::EncodePng(s));
    ASSERT_TRUE(got.ok()) << depth << ": " << got.status().ToString();
    ExpectSameRgb(*got, GreyToRgb(13, 5, grey));
  }
}

TEST(PngDecodeTest, SixteenBitKeepsTheHighByte) {
  const RgbImage img = testing::TestPicture(11, 7);
  testing::PngSpec s{.width = 11, .height = 7, .color_type = PNG_COLOR_TYPE_RGB, .bit_depth = 16};
  for (uint8_t v : img.rgb) s.samples.insert(s.samples.end(), {v, static_cast<uint8_t>(~v)});
  auto got = Decode(testing::EncodePng(s));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameRgb(*got, img);

  // 16-bit grey + alpha: high byte of grey, replicated.
  testing::PngSpec ga{
      .width = 11, .height = 7, .color_type = PNG_COLOR_TYPE_GRAY_ALPHA, .bit_depth = 16};
  std::vector<uint8_t> grey;
  for (int i = 0; i < 77; ++i) {
    grey.push_back(static_cast<uint8_t>(i * 3));
    ga.samples.insert(ga.samples.end(), {grey.back(), 0xff, 0x12, 0x34});
  }
  got = Decode(testing::EncodePng(ga));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameRgb(*got, GreyToRgb(11, 7, grey));
}

TEST(PngDecodeTest, PaletteIsApplied) {
  const std::vector<Rgb> palette = {{0, 0, 0}, {255, 0, 0}, {0, 255, 0}, {10, 20, 30}, {9, 8, 7}};
  for (int depth : {8, 4}) {
    testing::PngSpec s{
        .width = 9, .height = 6, .color_type = PNG_COLOR_TYPE_PALETTE, .bit_depth = depth};
    s.palette = palette;
    s.trns = {0, 128};  // transparency is dropped, not composited
    RgbImage want{9, 6, {}};
    for (int i = 0; i < 54; ++i) {
      s.samples.push_back(static_cast<uint8_t>((i * 7) % 5));
      const Rgb& c = palette[s.samples.back()];
      want.rgb.insert(want.rgb.end(), c.begin(), c.end());
    }
    auto got = Decode(testing::EncodePng(s));
    ASSERT_TRUE(got.ok()) << depth << ": " << got.status().ToString();
    ExpectSameRgb(*got, want);
  }
}

// --- JPEG (lossy: compared within a tolerance)

TEST(JpegDecodeTest, Quality100IsClose) {
  const RgbImage img = testing::TestPicture(40, 24);
  auto got = Decode(testing::EncodeJpeg(img, {}));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->width, 40);
  ASSERT_EQ(got->height, 24);
  EXPECT_LE(MaxDiff(*got, img), 6);
}

TEST(JpegDecodeTest, ProgressiveAndSubsampledAreClose) {
  const RgbImage img = testing::TestPicture(40, 24);
  auto progressive = Decode(testing::EncodeJpeg(img, {.progressive = true}));
  ASSERT_TRUE(progressive.ok()) << progressive.status().ToString();
  EXPECT_LE(MaxDiff(*progressive, img), 6);
  // 4:2:0 halves the chroma resolution: sharp colour edges blur.
  auto subsampled = Decode(testing::EncodeJpeg(img, {.quality = 95, .subsample = true}));
  ASSERT_TRUE(subsampled.ok()) << subsampled.status().ToString();
  EXPECT_EQ(subsampled->rgb.size(), img.rgb.size());
}

TEST(JpegDecodeTest, GreyIsReplicated) {
  const RgbImage img = testing::TestPicture(16, 16);
  auto got = Decode(testing::EncodeJpeg(img, {.grey = true}));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (size_t i = 0; i < 256; ++i) {
    ASSERT_EQ(got->rgb[i * 3], got->rgb[i * 3 + 1]);
    ASSERT_EQ(got->rgb[i * 3], got->rgb[i * 3 + 2]);
    ASSERT_LE(std::abs(got->rgb[i * 3] - img.rgb[i * 3]), 3) << i;
  }
}

TEST(JpegDecodeTest, CmykIsNotSupported) {
  auto got = Decode(testing::EncodeJpeg(testing::TestPicture(8, 8), {.cmyk = true}));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Status::Code::kNotSupported);
  EXPECT_EQ(got.status().message(), "image: CMYK JPEG is not supported (convert it to RGB)");
}

// --- WebP

TEST(WebpDecodeTest, LosslessIsExact) {
  const RgbImage img = testing::TestPicture(33, 17);
  auto got = Decode(testing::EncodeWebpLossless(img));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameRgb(*got, img);
}

TEST(WebpDecodeTest, LosslessWithAlphaDropsAlpha) {
  const RgbImage img = testing::TestPicture(33, 17);
  std::vector<uint8_t> rgba;
  for (size_t i = 0; i < 33 * 17; ++i) {
    rgba.insert(rgba.end(), &img.rgb[i * 3], &img.rgb[i * 3] + 3);
    rgba.push_back(static_cast<uint8_t>(i % 2 == 0 ? 0 : 200));
  }
  auto got = Decode(testing::EncodeWebpLosslessRgba(33, 17, rgba));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameRgb(*got, img);
}

TEST(WebpDecodeTest, LossyIsClose) {
  RgbImage img{32, 32, std::vector<uint8_t>(32 * 32 * 3)};
  for (size_t i = 0; i < img.rgb.size(); ++i) img.rgb[i] = static_cast<uint8_t>(60 + (i % 3) * 50);
  auto got = Decode(testing::EncodeWebpLossy(img, 95));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_LE(MaxDiff(*got, img), 4);  // a flat colour survives 4:2:0 well
}

TEST(WebpDecodeTest, AnimationGivesTheFirstFrame) {
  const RgbImage first = testing::TestPicture(24, 16);
  RgbImage second = first;
  for (uint8_t& v : second.rgb) v = static_cast<uint8_t>(255 - v);
  const Bytes file = testing::EncodeWebpAnimation({first, second});
  ASSERT_FALSE(file.empty());
  auto got = Decode(file);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameRgb(*got, first);
}

// --- GIF

testing::GifSpec PaletteGif(int w, int h) {
  testing::GifSpec s;
  s.screen_w = s.frame_w = w;
  s.screen_h = s.frame_h = h;
  s.colors = {{0, 0, 0}, {255, 255, 255}, {200, 10, 20}, {1, 2, 3}, {40, 50, 60}};
  for (int i = 0; i < w * h; ++i) s.indices.push_back(static_cast<uint8_t>((i * 3 + i / w) % 5));
  return s;
}

RgbImage Expected(const testing::GifSpec& s) {
  RgbImage img{s.screen_w, s.screen_h, std::vector<uint8_t>(s.screen_w * s.screen_h * 3, 0)};
  for (int y = 0; y < s.frame_h; ++y) {
    for (int x = 0; x < s.frame_w; ++x) {
      const int index = s.indices[y * s.frame_w + x];
      if (index == s.transparent) continue;
      uint8_t* p = &img.rgb[((s.top + y) * s.screen_w + s.left + x) * 3];
      for (int c = 0; c < 3; ++c) p[c] = s.colors[index][c];
    }
  }
  return img;
}

TEST(GifDecodeTest, PaletteIsExact) {
  const testing::GifSpec s = PaletteGif(19, 11);
  auto got = Decode(testing::EncodeGif(s));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameRgb(*got, Expected(s));
}

TEST(GifDecodeTest, InterlacedAndLocalMapAreExact) {
  testing::GifSpec s = PaletteGif(19, 21);
  s.interlace = true;
  s.local_map = true;
  auto got = Decode(testing::EncodeGif(s));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameRgb(*got, Expected(s));
}

TEST(GifDecodeTest, TransparentAndUndrawnPixelsAreBlack) {
  testing::GifSpec s = PaletteGif(7, 5);
  s.screen_w = 12;
  s.screen_h = 9;
  s.left = 3;
  s.top = 2;
  s.transparent = 1;  // white
  auto got = Decode(testing::EncodeGif(s));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameRgb(*got, Expected(s));
  EXPECT_EQ(got->rgb[0], 0);  // outside the frame
}

TEST(GifDecodeTest, AnimationGivesTheFirstFrame) {
  testing::GifSpec s = PaletteGif(10, 10);
  s.second_frame = true;
  auto got = Decode(testing::EncodeGif(s));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameRgb(*got, Expected(s));
}

}  // namespace
}  // namespace mx::image
