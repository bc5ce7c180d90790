// Test-only encoders (target mx_image_test_encode): write pictures into
// memory with libpng, libjpeg, libwebp (+ libwebpmux for animations) and
// giflib, so that tests and the fuzz seed corpus can make every variant of
// every format without files on disk. They return an empty vector when the
// library fails (tests then fail on the empty input).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "image/image_decode.h"

namespace mx::image::testing {

using Bytes = std::vector<uint8_t>;
using Rgb = std::array<uint8_t, 3>;

// A PNG from rows as libpng takes them: `samples` holds height rows of
// width * channels(color_type) samples, each sample one byte for bit depth
// <= 8 (one value per byte, packed by libpng for depths < 8) or two bytes
// big-endian for depth 16. color_type / bit_depth are PNG_COLOR_TYPE_* /
// 1, 2, 4, 8, 16. `palette` for PNG_COLOR_TYPE_PALETTE, `trns` optional.
struct PngSpec {
  int width = 0, height = 0;
  int color_type = 2;  // PNG_COLOR_TYPE_RGB
  int bit_depth = 8;
  bool interlace = false;
  std::vector<uint8_t> samples = {};
  std::vector<Rgb> palette = {};
  std::vector<uint8_t> trns = {};  // tRNS alpha per palette entry
};
Bytes EncodePng(const PngSpec& spec);
// An 8-bit RGB PNG of `img`.
Bytes EncodePngRgb(const RgbImage& img);

struct JpegSpec {
  int quality = 100;
  bool grey = false;  // one component (img's R channel)
  bool progressive = false;
  bool subsample = false;  // 4:2:0 chroma instead of 4:4:4
  bool cmyk = false;       // four components, Adobe CMYK (R, G, B, 255 - G as C M Y K)
};
Bytes EncodeJpeg(const RgbImage& img, const JpegSpec& spec);

// Lossless WebP of `img` (exact RGB).
Bytes EncodeWebpLossless(const RgbImage& img);
// Lossless WebP with an alpha channel: rgba is [h][w][4]; RGB is kept exactly
// under transparent pixels.
Bytes EncodeWebpLosslessRgba(int width, int height, const std::vector<uint8_t>& rgba);
// Lossy WebP at `quality` (0..100).
Bytes EncodeWebpLossy(const RgbImage& img, float quality);
// Animated lossless WebP with the given frames (same size as the canvas),
// 100 ms each.
Bytes EncodeWebpAnimation(const std::vector<RgbImage>& frames);

// A GIF: a screen of screen_w x screen_h with a global colour map, one frame
// of frame_w x frame_h at (left, top) holding `indices` ([frame_h][frame_w]),
// an optional transparent index (-1: none) and optionally a second frame
// (the same again, all index 0) so that the file is an animation.
struct GifSpec {
  int screen_w = 0, screen_h = 0;
  int left = 0, top = 0, frame_w = 0, frame_h = 0;
  std::vector<Rgb> colors = {};  // padded to a power of two
  std::vector<uint8_t> indices = {};
  int transparent = -1;
  bool interlace = false;
  bool local_map = false;  // put the colour map on the frame instead of the screen
  bool second_frame = false;
};
Bytes EncodeGif(const GifSpec& spec);

// A deterministic test picture: gradients, a square and stripes.
RgbImage TestPicture(int width, int height);

}  // namespace mx::image::testing
