// The Qwen-VL image preprocessing of llama.cpp's libmtmd (projector
// qwen3vl_merger, used for Qwen 3.5), bit for bit: "smart resize" of the
// target size, an aspect-preserving bilinear resize letterboxed onto a black
// canvas, and per-channel normalisation into planar float32. The steps and
// their float32 arithmetic are written down in ../shared/ref/README.md,
// section "qwen35 vision", steps 2-4.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "image/image_decode.h"

namespace mx::image {

// What the vision tower wants. A token covers merge x merge patches of
// patch_size x patch_size pixels, so canvas sides are multiples of
// f = merge * patch_size and the canvas holds (w/f) * (h/f) tokens.
struct PreprocessParams {
  int64_t patch_size = 16;             // clip.vision.patch_size
  int64_t merge = 2;                   // clip.vision.spatial_merge_size
  int64_t min_tokens = 8;              // llama.cpp's built-in Qwen-VL limits (--image-min-tokens)
  int64_t max_tokens = 4096;           // (--image-max-tokens)
  std::array<float, 3> mean{}, std{};  // clip.vision.image_mean / image_std, R G B
};

// InvalidArgument unless 1 <= patch_size, merge and merge * patch_size <= 1024,
// 1 <= min_tokens <= max_tokens <= 1 << 20, and every std is finite and
// non-zero and every mean finite.
Status ValidatePreprocessParams(const PreprocessParams& p);

struct Size2 {
  int64_t width = 0, height = 0;
  bool operator==(const Size2&) const = default;
};

// Step 2, the canvas size for a width x height picture (f = merge * patch):
// each side rounded to a multiple of f (half away from zero, at least f);
// if that gives more than max_tokens * f^2 pixels both sides shrink by
// beta = sqrt(H*W / Nmax) and round down, if fewer than min_tokens * f^2
// they grow by beta = sqrt(Nmin / (H*W)) and round up. In float32 as
// llama.cpp computes it. Returns {0, 0} when a side is outside 1 .. 2^31 or
// the parameters are invalid. Pure; thread-safe.
Size2 SmartResizeTarget(int64_t width, int64_t height, const PreprocessParams& p);

// The vision tower's input for one picture.
struct PreparedImage {
  int64_t width = 0, height = 0;  // canvas = ViT input size (multiples of merge * patch)
  std::vector<float> pixels;      // [3][height][width], normalised: (u/255 - mean_c) / std_c
  // Where the picture lies on the canvas (the rest is black padding, which
  // normalises to -mean_c / std_c). The whole canvas when no resize happened.
  int64_t content_x = 0, content_y = 0, content_w = 0, content_h = 0;
};

// Steps 3-4: when the canvas size differs from the picture's, scales it by
// s = min(w/W, h/H) to w' = min(ceil(W*s), w) by h' = min(ceil(H*s), h) with
// corner-aligned bilinear sampling (truncated to uint8, no antialiasing),
// pastes it at ((w-w')/2, (h-h')/2) on a black canvas; then normalises.
//
// InvalidArgument when the parameters are invalid, the image is empty or its
// rgb size is not width*height*3, or the canvas would hold more than
// max_tokens tokens (only for aspect ratios beyond about 4096:1, where the
// "at least f" rule of step 2 outgrows the shrink). The result is owned by the
// caller. Pure; thread-safe.
Result<PreparedImage> Preprocess(const RgbImage& img, const PreprocessParams& p);

// A 64-bit fingerprint of a decoded picture: the first 8 bytes (read
// little-endian) of SHA-256 over width and height (each as 8 little-endian
// bytes) followed by the RGB bytes. Two pictures that decode to the same
// pixels hash alike whatever their file format; a collision is as hard as
// one of truncated SHA-256 (about 2^32 pictures for an even chance). Used to
// tell pictures apart in the prompt cache. Should OpenSSL fail to allocate
// its context, FNV-1a over the same bytes is returned instead (still distinct
// for distinct pictures in practice, but not collision-resistant).
uint64_t PixelHash(const RgbImage& img);

}  // namespace mx::image
