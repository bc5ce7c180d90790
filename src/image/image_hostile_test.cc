// DecodeImage on hostile bytes: empty, foreign, oversized, truncated at every
// length, size fields that promise a decompression bomb, and bit flips. Each
// must give an InvalidArgument (never a crash, abort or huge allocation); a
// flipped file may also decode to some valid picture.
#include <gtest/gtest.h>
#include <png.h>

#include <chrono>
#include <string>

#include "image/image_decode.h"
#include "image/test_encode.h"

namespace mx::image {
namespace {

using testing::Bytes;

void ExpectInvalid(const Result<RgbImage>& r, const std::string& message_part) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << r.status().ToString();
  EXPECT_NE(r.status().message().find(message_part), std::string::npos) << r.status().message();
}

// A decode result is either an error with an "image: " message or a
// consistent picture.
void ExpectWellFormed(const Result<RgbImage>& r) {
  if (!r.ok()) {
    EXPECT_EQ(r.status().message().rfind("image: ", 0), 0u) << r.status().message();
    return;
  }
  EXPECT_GT(r->width, 0);
  EXPECT_GT(r->height, 0);
  EXPECT_EQ(r->rgb.size(), static_cast<size_t>(r->width * r->height * 3));
}

// --- Little builders for hand-made headers.

uint32_t Crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
  }
  return c ^ 0xffffffffu;
}

void PutBe32(Bytes* out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out->push_back(static_cast<uint8_t>(v >> s));
}

void PutChunk(Bytes* out, const char* type, const Bytes& data) {
  PutBe32(out, static_cast<uint32_t>(data.size()));
  const size_t start = out->size();
  out->insert(out->end(), type, type + 4);
  out->insert(out->end(), data.begin(), data.end());
  PutBe32(out, Crc32(out->data() + start, out->size() - start));
}

// A PNG whose IHDR says width x height (8-bit RGB), followed by a tiny IDAT
// (a zlib stream of a few zero bytes) and IEND.
Bytes PngWithHeader(uint32_t width, uint32_t height) {
  Bytes out = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
  Bytes ihdr;
  PutBe32(&ihdr, width);
  PutBe32(&ihdr, height);
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});
  PutChunk(&out, "IHDR", ihdr);
  PutChunk(&out, "IDAT", {0x78, 0x9c, 0x63, 0x60, 0x00, 0x00, 0x00, 0x04, 0x00, 0x01});
  PutChunk(&out, "IEND", {});
  return out;
}

// Every test file: name, bytes, and how many bytes at the end may be cut off
// while the picture still decodes (the GIF trailer or the frames after the
// first, a JPEG's EOI).
struct Sample {
  std::string name;
  Bytes bytes;
  size_t optional_tail = 0;
};

std::vector<Sample> Samples() {
  const RgbImage img = testing::TestPicture(24, 18);
  testing::GifSpec gif;
  gif.screen_w = gif.frame_w = 13;
  gif.screen_h = gif.frame_h = 9;
  gif.colors = {{0, 0, 0}, {255, 0, 0}, {0, 0, 255}};
  for (int i = 0; i < 13 * 9; ++i) gif.indices.push_back(static_cast<uint8_t>(i % 3));
  testing::GifSpec gif_anim = gif;
  gif_anim.second_frame = true;
  RgbImage second = img;
  second.rgb[5] ^= 0xff;
  testing::PngSpec interlaced{.width = 24,
                              .height = 18,
                              .color_type = PNG_COLOR_TYPE_RGB,
                              .bit_depth = 8,
                              .interlace = true,
                              .samples = img.rgb};
  const Bytes gif_file = testing::EncodeGif(gif), gif_anim_file = testing::EncodeGif(gif_anim);
  return {
      {"png", testing::EncodePngRgb(img)},
      {"png-interlaced", testing::EncodePng(interlaced)},
      {"jpeg", testing::EncodeJpeg(img, {}), 2},
      {"jpeg-progressive", testing::EncodeJpeg(img, {.progressive = true}), 2},
      {"webp-lossless", testing::EncodeWebpLossless(img)},
      {"webp-lossy", testing::EncodeWebpLossy(img, 80)},
      {"webp-animated", testing::EncodeWebpAnimation({img, second})},
      {"gif", gif_file, 1},
      // Only the first frame is read: the file may end anywhere after it
      // (the single-frame file is the same bytes up to its trailer).
      {"gif-animated", gif_anim_file, gif_anim_file.size() - (gif_file.size() - 1)},
  };
}

TEST(ImageHostileTest, EmptyInput) {
  ExpectInvalid(DecodeImage({}, {}), "image: empty input (0 bytes)");
}

TEST(ImageHostileTest, WrongMagicNamesTheFirstBytes) {
  const std::string html = "<html><body>not a picture</body></html>";
  auto r = DecodeImage({reinterpret_cast<const uint8_t*>(html.data()), html.size()}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(r.status().message(),
            "image: not a PNG, JPEG, WebP or GIF file (first bytes 3c 68 74 6d)");
  // A RIFF file that is not WebP (here: AVI) is foreign too.
  const Bytes avi = {'R', 'I', 'F', 'F', 4, 0, 0, 0, 'A', 'V', 'I', ' '};
  ExpectInvalid(DecodeImage(avi, {}),
                "not a PNG, JPEG, WebP or GIF file (first bytes 52 49 46 46)");
  const Bytes one = {0x42};
  ExpectInvalid(DecodeImage(one, {}), "(first bytes 42)");
}

TEST(ImageHostileTest, TooManyBytesHasItsOwnCheck) {
  const DecodeLimits limits;
  EXPECT_TRUE(CheckImageBytes(20 << 20, limits).ok());
  Status st = CheckImageBytes(25 << 20, limits);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "image: 25 MB is more than the limit of 20 MB");
  st = CheckImageBytes((20 << 20) + 1, limits);
  EXPECT_EQ(st.message(), "image: 20971521 bytes (20.0 MB) is more than the limit of 20 MB");
  EXPECT_EQ(CheckImageBytes(0, limits).message(), "image: empty input (0 bytes)");

  // DecodeImage checks the size first, before looking at the bytes.
  const Bytes png = testing::EncodePngRgb(testing::TestPicture(16, 16));
  DecodeLimits small;
  small.max_bytes = png.size() - 1;
  ExpectInvalid(DecodeImage(png, small), "image: " + std::to_string(png.size()) +
                                             " bytes is more than the limit of " +
                                             std::to_string(png.size() - 1) + " bytes");
}

// A PNG that claims 100000x100000 pixels (30 GB of RGB) in a few dozen bytes
// is refused from its IHDR, before any pixel buffer exists (the test would
// run out of memory or time otherwise).
TEST(ImageHostileTest, DecompressionBombIsRefusedFromTheHeader) {
  const auto start = std::chrono::steady_clock::now();
  auto r = DecodeImage(PngWithHeader(100000, 100000), {});
  ExpectInvalid(r, "image: 100000x100000 pixels is more than the limit of 33554432 pixels");
  // The largest size PNG allows: libpng's row buffers alone would be 6 GB.
  ExpectInvalid(DecodeImage(PngWithHeader(0x7fffffff, 0x7fffffff), {}), "more than the limit");
  ExpectInvalid(DecodeImage(PngWithHeader(0x7fffffff, 1), {}), "more than the limit");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST(ImageHostileTest, AspectRatioLimit) {
  ExpectInvalid(DecodeImage(PngWithHeader(1, 100000), {}),
                "image: 1x100000 pixels: aspect ratio 100000 is above the limit 200");
  ExpectInvalid(DecodeImage(PngWithHeader(1000, 4), {}), "aspect ratio 250 is above the limit 200");
}

TEST(ImageHostileTest, ZeroSizedImages) {
  ExpectInvalid(DecodeImage(PngWithHeader(0, 10), {}), "image: PNG has no pixels (0x10 pixels)");
  ExpectInvalid(DecodeImage(PngWithHeader(10, 0), {}), "image: PNG has no pixels (10x0 pixels)");
  testing::GifSpec gif;
  gif.screen_w = 0;
  gif.screen_h = 5;
  gif.frame_w = 1;
  gif.frame_h = 1;
  gif.colors = {{0, 0, 0}, {1, 1, 1}};
  gif.indices = {1};
  ExpectInvalid(DecodeImage(testing::EncodeGif(gif), {}),
                "image: GIF screen has no pixels (0x5 pixels)");
  EXPECT_EQ(CheckImageDimensions("x", 0, 0, {}).message(), "image: x has no pixels (0x0 pixels)");
  EXPECT_FALSE(CheckImageDimensions("x", -1, 5, {}).ok());
}

// Each format's declared size meets the pixel limit before decoding.
TEST(ImageHostileTest, PixelLimitAppliesToEveryFormat) {
  DecodeLimits limits;
  limits.max_pixels = 100;
  for (const Sample& s : Samples()) {
    ExpectInvalid(DecodeImage(s.bytes, limits), "pixels is more than the limit of 100 pixels");
  }
}

TEST(ImageHostileTest, GifFrameOutsideTheScreen) {
  testing::GifSpec gif;
  gif.screen_w = 8;
  gif.screen_h = 8;
  gif.left = 4;
  gif.frame_w = 6;
  gif.frame_h = 2;
  gif.colors = {{0, 0, 0}, {1, 1, 1}};
  gif.indices.assign(12, 1);
  ExpectInvalid(DecodeImage(testing::EncodeGif(gif), {}),
                "image: GIF is corrupt: first frame 6x2 at (4,0) lies outside the 8x8 screen");
}

TEST(ImageHostileTest, EveryTruncationIsAnError) {
  for (const Sample& s : Samples()) {
    ASSERT_GT(s.bytes.size(), 20u) << s.name;
    ASSERT_TRUE(DecodeImage(s.bytes, {}).ok()) << s.name;
    for (size_t n = 1; n < s.bytes.size(); ++n) {
      auto r = DecodeImage(std::span(s.bytes).first(n), {});
      if (n + s.optional_tail < s.bytes.size()) {
        ASSERT_FALSE(r.ok()) << s.name << " cut to " << n << " of " << s.bytes.size();
        ASSERT_EQ(r.status().code(), Status::Code::kInvalidArgument) << s.name;
        ASSERT_EQ(r.status().message().rfind("image: ", 0), 0u) << r.status().message();
      } else {
        ExpectWellFormed(r);
      }
    }
  }
}

TEST(ImageHostileTest, ShortPrefixOfAMagicIsTruncated) {
  const Bytes png = {0x89, 'P', 'N'};
  ExpectInvalid(DecodeImage(png, {}), "image: PNG is truncated");
  const Bytes riff = {'R', 'I', 'F', 'F', 1, 2, 3, 4, 'W', 'E'};
  ExpectInvalid(DecodeImage(riff, {}), "image: WebP is truncated");
  const Bytes gif = {'G', 'I', 'F', '8'};
  ExpectInvalid(DecodeImage(gif, {}), "image: GIF is truncated");
}

// Flips one bit in every byte position (a different bit each time), and
// overwrites bytes with 0x00 / 0xff: errors or valid pictures, never a crash.
TEST(ImageHostileTest, BitFlipsNeverCrash) {
  for (const Sample& s : Samples()) {
    for (size_t i = 0; i < s.bytes.size(); ++i) {
      Bytes flipped = s.bytes;
      flipped[i] ^= static_cast<uint8_t>(1u << (i % 8));
      ExpectWellFormed(DecodeImage(flipped, {}));
      if (i % 7 == 0) {
        flipped[i] = (i % 2) != 0 ? 0xff : 0x00;
        ExpectWellFormed(DecodeImage(flipped, {}));
      }
    }
  }
}

// A JPEG frame header (SOF0) that claims another size: 65000x65000 pixels is
// refused from the header, not decoded; a zero height is an error.
Bytes JpegWithSize(uint16_t width, uint16_t height) {
  Bytes jpeg = testing::EncodeJpeg(testing::TestPicture(8, 8), {});
  for (size_t i = 0; i + 8 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc0) {  // SOF0: length(2) P(1) Y(2) X(2)
      jpeg[i + 5] = static_cast<uint8_t>(height >> 8), jpeg[i + 6] = static_cast<uint8_t>(height);
      jpeg[i + 7] = static_cast<uint8_t>(width >> 8), jpeg[i + 8] = static_cast<uint8_t>(width);
      return jpeg;
    }
  }
  return {};
}

TEST(ImageHostileTest, JpegSizeFromTheFrameHeader) {
  ExpectInvalid(DecodeImage(JpegWithSize(65000, 65000), {}),
                "image: 65000x65000 pixels is more than the limit");
  ExpectInvalid(DecodeImage(JpegWithSize(60000, 8), {}), "aspect ratio 7500 is above the limit");
  ExpectInvalid(DecodeImage(JpegWithSize(8, 0), {}), "image: JPEG is corrupt: ");
}

}  // namespace
}  // namespace mx::image
