// Writes the small seed corpus for image_decode_fuzz into a folder
// (tests/fuzz/README.md):
//   image_seed_corpus tests/fuzz/image_corpus
// One tiny file (< 2 KB) per format variant: PNG RGB / RGBA / grey / 16-bit /
// palette / interlaced, JPEG baseline / progressive / grey / 4:2:0, WebP
// lossless / lossy / alpha / animated, GIF plain / interlaced / transparent /
// animated.
#include <png.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "core/env.h"
#include "image/test_encode.h"

namespace mx::image::testing {
namespace {

std::vector<std::pair<std::string, Bytes>> Seeds() {
  const RgbImage img = TestPicture(12, 8);
  std::vector<std::pair<std::string, Bytes>> out;
  out.emplace_back("rgb.png", EncodePngRgb(img));
  PngSpec rgba{.width = 12, .height = 8, .color_type = PNG_COLOR_TYPE_RGB_ALPHA, .bit_depth = 8};
  PngSpec grey{.width = 12, .height = 8, .color_type = PNG_COLOR_TYPE_GRAY, .bit_depth = 8};
  PngSpec grey2{.width = 12, .height = 8, .color_type = PNG_COLOR_TYPE_GRAY, .bit_depth = 2};
  PngSpec deep{.width = 12, .height = 8, .color_type = PNG_COLOR_TYPE_RGB, .bit_depth = 16};
  PngSpec palette{.width = 12, .height = 8, .color_type = PNG_COLOR_TYPE_PALETTE, .bit_depth = 4};
  palette.palette = {{0, 0, 0}, {255, 0, 0}, {0, 255, 0}, {0, 0, 255}};
  palette.trns = {0};
  for (size_t i = 0; i < 96; ++i) {
    rgba.samples.insert(rgba.samples.end(), {img.rgb[i * 3], img.rgb[i * 3 + 1], img.rgb[i * 3 + 2],
                                             static_cast<uint8_t>(i * 2)});
    grey.samples.push_back(img.rgb[i * 3]);
    grey2.samples.push_back(static_cast<uint8_t>(i % 4));
    for (int c = 0; c < 3; ++c) deep.samples.insert(deep.samples.end(), {img.rgb[i * 3 + c], 7});
    palette.samples.push_back(static_cast<uint8_t>(i % 4));
  }
  PngSpec interlaced{.width = 12,
                     .height = 8,
                     .color_type = PNG_COLOR_TYPE_RGB,
                     .bit_depth = 8,
                     .interlace = true,
                     .samples = img.rgb};
  out.emplace_back("rgba.png", EncodePng(rgba));
  out.emplace_back("grey.png", EncodePng(grey));
  out.emplace_back("grey2.png", EncodePng(grey2));
  out.emplace_back("rgb16.png", EncodePng(deep));
  out.emplace_back("palette.png", EncodePng(palette));
  out.emplace_back("interlaced.png", EncodePng(interlaced));
  out.emplace_back("baseline.jpg", EncodeJpeg(img, {.quality = 50}));
  out.emplace_back("progressive.jpg", EncodeJpeg(img, {.quality = 50, .progressive = true}));
  out.emplace_back("grey.jpg", EncodeJpeg(img, {.quality = 50, .grey = true}));
  out.emplace_back("420.jpg", EncodeJpeg(img, {.quality = 50, .subsample = true}));
  out.emplace_back("lossless.webp", EncodeWebpLossless(img));
  out.emplace_back("lossy.webp", EncodeWebpLossy(img, 50));
  out.emplace_back("alpha.webp", EncodeWebpLosslessRgba(12, 8, rgba.samples));
  RgbImage second = img;
  for (uint8_t& v : second.rgb) v = static_cast<uint8_t>(v / 2);
  out.emplace_back("animated.webp", EncodeWebpAnimation({img, second}));
  GifSpec gif;
  gif.screen_w = 12, gif.screen_h = 8, gif.frame_w = 10, gif.frame_h = 6, gif.left = 1, gif.top = 1;
  gif.colors = {{0, 0, 0}, {255, 255, 255}, {200, 0, 0}, {0, 0, 200}};
  for (int i = 0; i < 60; ++i) gif.indices.push_back(static_cast<uint8_t>(i % 4));
  out.emplace_back("plain.gif", EncodeGif(gif));
  GifSpec variant = gif;
  variant.interlace = true;
  variant.local_map = true;
  out.emplace_back("interlaced.gif", EncodeGif(variant));
  variant = gif;
  variant.transparent = 1;
  variant.second_frame = true;
  out.emplace_back("animated.gif", EncodeGif(variant));
  return out;
}

}  // namespace
}  // namespace mx::image::testing

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output folder>\n", argv[0]);
    return 2;
  }
  mx::Env* env = mx::Env::Default();
  if (auto st = env->CreateDirs(argv[1]); !st.ok()) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return 1;
  }
  for (const auto& [name, bytes] : mx::image::testing::Seeds()) {
    if (bytes.empty()) {
      std::fprintf(stderr, "could not encode %s\n", name.c_str());
      return 1;
    }
    const std::string path = mx::JoinPath(argv[1], name);
    auto st = env->WriteFileAtomic(
        path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.ToString().c_str());
      return 1;
    }
    std::printf("%s: %zu bytes\n", path.c_str(), bytes.size());
  }
  return 0;
}
