// Qwen-VL preprocessing as llama.cpp's libmtmd does it. Every expression below
// keeps llama.cpp's float32 operations and their order (ints converted to
// float where llama.cpp's mixed int/float arithmetic converts them); this
// file is compiled with -ffp-contract=off so that no a + b*c becomes an FMA,
// which would change the last bit and with it, after truncation to uint8, a
// whole level.
#include "image/preprocess.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace mx::image {
namespace {

constexpr int64_t kMaxSide = int64_t{1} << 31;

float Lerp(float a, float b, float t) { return a + (b - a) * t; }

// Bilinear resize with corner-aligned sampling: output (x, y) reads the
// source at (x * (W-1)/(w'-1), y * (H-1)/(h'-1)); the result is truncated.
// `dst` is [dst_h][dst_w][3].
void ResizeBilinear(const RgbImage& src, int64_t dst_w, int64_t dst_h, std::vector<uint8_t>* dst) {
  const int64_t sw = src.width, sh = src.height;
  dst->resize(static_cast<size_t>(dst_w * dst_h * 3));
  // A one-pixel-wide target samples only the first column (llama.cpp's
  // guard against dividing by zero).
  const float x_ratio =
      dst_w > 1 ? static_cast<float>(sw - 1) / static_cast<float>(dst_w - 1) : 0.f;
  const float y_ratio =
      dst_h > 1 ? static_cast<float>(sh - 1) / static_cast<float>(dst_h - 1) : 0.f;
  const uint8_t* s = src.rgb.data();
  for (int64_t y = 0; y < dst_h; ++y) {
    const float py = static_cast<float>(y) * y_ratio;
    const int64_t y0 = std::min(static_cast<int64_t>(py), sh - 1);
    const int64_t y1 = std::min(y0 + 1, sh - 1);
    const float yf = py - static_cast<float>(y0);
    for (int64_t x = 0; x < dst_w; ++x) {
      const float px = static_cast<float>(x) * x_ratio;
      const int64_t x0 = std::min(static_cast<int64_t>(px), sw - 1);
      const int64_t x1 = std::min(x0 + 1, sw - 1);
      const float xf = px - static_cast<float>(x0);
      const uint8_t* p00 = s + (y0 * sw + x0) * 3;
      const uint8_t* p10 = s + (y0 * sw + x1) * 3;
      const uint8_t* p01 = s + (y1 * sw + x0) * 3;
      const uint8_t* p11 = s + (y1 * sw + x1) * 3;
      uint8_t* out = dst->data() + (y * dst_w + x) * 3;
      for (int c = 0; c < 3; ++c) {
        const float top = Lerp(p00[c], p10[c], xf);
        const float bottom = Lerp(p01[c], p11[c], xf);
        // In [0, 255]: a lerp never leaves the interval of its ends.
        out[c] = static_cast<uint8_t>(Lerp(top, bottom, yf));
      }
    }
  }
}

}  // namespace

Status ValidatePreprocessParams(const PreprocessParams& p) {
  if (p.patch_size < 1 || p.merge < 1 || p.patch_size > 1024 || p.merge > 1024 ||
      p.patch_size * p.merge > 1024) {
    return Status::InvalidArgument("image preprocessing: patch size " +
                                   std::to_string(p.patch_size) + " x merge " +
                                   std::to_string(p.merge) + " is not in 1..1024");
  }
  if (p.min_tokens < 1 || p.max_tokens < p.min_tokens || p.max_tokens > (int64_t{1} << 20)) {
    return Status::InvalidArgument(
        "image preprocessing: token limits " + std::to_string(p.min_tokens) + ".." +
        std::to_string(p.max_tokens) + " are not 1 <= min <= max <= 1048576");
  }
  for (int c = 0; c < 3; ++c) {
    if (!std::isfinite(p.mean[c]) || !std::isfinite(p.std[c]) || p.std[c] == 0.f) {
      return Status::InvalidArgument("image preprocessing: mean " + std::to_string(p.mean[c]) +
                                     " / std " + std::to_string(p.std[c]) + " of channel " +
                                     std::to_string(c) + " is not usable");
    }
  }
  return Status::Ok();
}

Size2 SmartResizeTarget(int64_t width, int64_t height, const PreprocessParams& p) {
  if (width < 1 || height < 1 || width > kMaxSide || height > kMaxSide) return {};
  if (!ValidatePreprocessParams(p).ok()) return {};
  const int64_t f = p.patch_size * p.merge;
  const float ff = static_cast<float>(f);
  // std::round on float: half away from zero.
  auto round_by_f = [&](float x) { return static_cast<int64_t>(std::round(x / ff)) * f; };
  auto ceil_by_f = [&](float x) { return static_cast<int64_t>(std::ceil(x / ff)) * f; };
  auto floor_by_f = [&](float x) { return static_cast<int64_t>(std::floor(x / ff)) * f; };
  const int64_t min_pixels = p.min_tokens * f * f;
  const int64_t max_pixels = p.max_tokens * f * f;
  const float fw = static_cast<float>(width), fh = static_cast<float>(height);

  int64_t h = std::max(f, round_by_f(fh));
  int64_t w = std::max(f, round_by_f(fw));
  if (h * w > max_pixels) {
    const float beta =
        std::sqrt(static_cast<float>(height * width) / static_cast<float>(max_pixels));
    h = std::max(f, floor_by_f(fh / beta));
    w = std::max(f, floor_by_f(fw / beta));
  } else if (h * w < min_pixels) {
    const float beta =
        std::sqrt(static_cast<float>(min_pixels) / static_cast<float>(height * width));
    h = ceil_by_f(fh * beta);
    w = ceil_by_f(fw * beta);
  }
  return {w, h};
}

Result<PreparedImage> Preprocess(const RgbImage& img, const PreprocessParams& p) {
  MX_RETURN_IF_ERROR(ValidatePreprocessParams(p));
  const int64_t sw = img.width, sh = img.height;
  if (sw < 1 || sh < 1 || sw > kMaxSide || sh > kMaxSide ||
      img.rgb.size() != static_cast<uint64_t>(sw) * static_cast<uint64_t>(sh) * 3) {
    return Status::InvalidArgument(
        "image preprocessing: " + std::to_string(sw) + "x" + std::to_string(sh) + " picture with " +
        std::to_string(img.rgb.size()) + " RGB bytes is not a valid picture");
  }
  const Size2 target = SmartResizeTarget(sw, sh, p);
  const int64_t f = p.patch_size * p.merge;
  const int64_t n_tokens = (target.width / f) * (target.height / f);
  if (n_tokens > p.max_tokens) {
    return Status::InvalidArgument(
        "image: " + std::to_string(sw) + "x" + std::to_string(sh) + " pixels would need " +
        std::to_string(n_tokens) + " image tokens (" + std::to_string(target.width) + "x" +
        std::to_string(target.height) + "), more than the limit of " +
        std::to_string(p.max_tokens) + ": the aspect ratio is too extreme");
  }

  PreparedImage out;
  out.width = target.width;
  out.height = target.height;
  const int64_t w = target.width, h = target.height;

  // Step 3: the picture on the canvas, as [h][w][3] bytes.
  std::vector<uint8_t> resized;
  const std::vector<uint8_t>* content = &img.rgb;
  if (w == sw && h == sh) {
    out.content_w = w;
    out.content_h = h;
  } else {
    const float scale_w = static_cast<float>(w) / static_cast<float>(sw);
    const float scale_h = static_cast<float>(h) / static_cast<float>(sh);
    const float scale = std::min(scale_w, scale_h);
    out.content_w = std::min(static_cast<int64_t>(std::ceil(static_cast<float>(sw) * scale)), w);
    out.content_h = std::min(static_cast<int64_t>(std::ceil(static_cast<float>(sh) * scale)), h);
    out.content_w = std::max<int64_t>(out.content_w, 1);
    out.content_h = std::max<int64_t>(out.content_h, 1);
    out.content_x = (w - out.content_w) / 2;
    out.content_y = (h - out.content_h) / 2;
    ResizeBilinear(img, out.content_w, out.content_h, &resized);
    content = &resized;
  }

  // Step 4: normalise into planar [3][h][w]; the black padding is u = 0.
  const size_t plane = static_cast<size_t>(w * h);
  out.pixels.resize(plane * 3);
  for (int c = 0; c < 3; ++c) {
    const float pad = (0.f / 255.0f - p.mean[c]) / p.std[c];
    std::fill(out.pixels.begin() + c * plane, out.pixels.begin() + (c + 1) * plane, pad);
  }
  for (int64_t y = 0; y < out.content_h; ++y) {
    const uint8_t* row = content->data() + y * out.content_w * 3;
    const size_t dst_row = static_cast<size_t>((out.content_y + y) * w + out.content_x);
    for (int64_t x = 0; x < out.content_w; ++x) {
      for (int c = 0; c < 3; ++c) {
        const float u = static_cast<float>(row[x * 3 + c]);
        out.pixels[c * plane + dst_row + x] = (u / 255.0f - p.mean[c]) / p.std[c];
      }
    }
  }
  return out;
}

uint64_t PixelHash(const RgbImage& img) {
  uint8_t header[16];
  for (int i = 0; i < 8; ++i) {
    header[i] = static_cast<uint8_t>(static_cast<uint64_t>(img.width) >> (8 * i));
    header[8 + i] = static_cast<uint8_t>(static_cast<uint64_t>(img.height) >> (8 * i));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const bool ok = ctx != nullptr && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, header, sizeof(header)) == 1 &&
                  EVP_DigestUpdate(ctx, img.rgb.data(), img.rgb.size()) == 1 &&
                  EVP_DigestFinal_ex(ctx, digest, &digest_len) == 1 && digest_len >= 8;
  EVP_MD_CTX_free(ctx);
  if (!ok) {
    // OpenSSL fails only when it cannot allocate its context. Rather than
    // one value for every picture (which would make them all look alike to
    // the cache), fall back to FNV-1a over the same bytes: distinct pictures
    // still differ, though not against an adversary.
    uint64_t fnv = 0xcbf29ce484222325ull;
    auto mix = [&fnv](const uint8_t* b, size_t n) {
      for (size_t i = 0; i < n; ++i) fnv = (fnv ^ b[i]) * 0x100000001b3ull;
    };
    mix(header, sizeof(header));
    mix(img.rgb.data(), img.rgb.size());
    return fnv;
  }
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h |= static_cast<uint64_t>(digest[i]) << (8 * i);
  return h;
}

}  // namespace mx::image
