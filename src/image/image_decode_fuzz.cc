// libFuzzer entry point for picture decoding and preprocessing
// (tests/fuzz/README.md). Decodes the input under small limits and, when it
// is accepted, preprocesses it to at most 64 tokens and hashes it, aborting
// when a result is inconsistent (ASan and UBSan catch the rest).
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string>

#include "image/image_decode.h"
#include "image/preprocess.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mx::image::DecodeLimits limits;
  limits.max_bytes = 1 << 20;
  limits.max_pixels = 1 << 18;  // 768 KB of RGB: keeps each input fast
  auto img = mx::image::DecodeImage(std::span(data, size), limits);
  if (!img.ok()) {
    const std::string& m = img.status().message();
    if (m.rfind("image: ", 0) != 0) std::abort();  // every error names the image
    return 0;
  }
  if (img->width < 1 || img->height < 1 || img->width * img->height > limits.max_pixels ||
      img->rgb.size() != static_cast<size_t>(img->width * img->height * 3)) {
    std::abort();
  }
  volatile uint64_t sink = mx::image::PixelHash(*img);
  mx::image::PreprocessParams p;
  p.min_tokens = 4;
  p.max_tokens = 64;
  p.mean = {0.48145466f, 0.4578275f, 0.40821073f};
  p.std = {0.26862954f, 0.26130258f, 0.27577711f};
  auto prep = mx::image::Preprocess(*img, p);
  if (!prep.ok()) return 0;  // extreme aspect ratios only
  const int64_t w = prep->width, h = prep->height;
  if (w % 32 != 0 || h % 32 != 0 || (w / 32) * (h / 32) > p.max_tokens ||
      prep->pixels.size() != static_cast<size_t>(3 * w * h) || prep->content_w < 1 ||
      prep->content_h < 1 || prep->content_x < 0 || prep->content_y < 0 ||
      prep->content_x + prep->content_w > w || prep->content_y + prep->content_h > h) {
    std::abort();
  }
  for (float v : {prep->pixels.front(), prep->pixels.back()}) {
    if (!std::isfinite(v)) std::abort();
    sink = sink + std::bit_cast<uint32_t>(v);
  }
  return 0;
}
