// Pictures in a prompt (SPEC §11). A picture takes nx * ny consecutive rows
// of the prompt (its merged patch grid, raster order), fed as embeddings
// from the model's vision projector instead of token embeddings. In the
// token list that the prompt cache and the saved caches match, each such
// row holds an image row token: a negative id, never a vocabulary id.
//
// Positions (Qwen-VL's multi-section RoPE, ../shared/ref/README.md
// "qwen35 vision" step 11): a text row at position p is (p, p, p, 0); the
// rows of a picture starting at position p0 are (p0, p0 + y, p0 + x, 0) for
// grid cell (x, y); the picture advances the position by max(nx, ny), not
// by its row count, so rows after a picture sit at positions behind their
// row numbers.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "models/runner.h"

namespace mx::engine {

// How cached chats treat pictures (MATRICXON_PROMPT_CACHE_IMAGES).
enum class ImageCacheMode {
  kFresh,  // a prompt with pictures never reuses a cached chat (the default)
  kHash,   // pictures match by a hash of their decoded pixels
};
Result<ImageCacheMode> ParseImageCacheMode(const std::string& s);  // "fresh" | "hash"

struct PromptImage {
  int64_t first_row = 0;    // the prompt row of grid cell (0, 0)
  int64_t nx = 0, ny = 0;   // merged grid: columns, rows
  uint64_t pixel_hash = 0;  // of the decoded picture (image::PixelHash)
  // Computes the picture's embeddings, [ny * nx][n_embd] floats in row
  // order, on the given threads (the model's compute loop calls it, only
  // when a row of the picture has to be read).
  std::function<Result<std::vector<float>>(ThreadPool*)> encode;

  int64_t n_rows() const { return nx * ny; }
  int64_t n_pos() const { return nx > ny ? nx : ny; }
  int64_t end_row() const { return first_row + n_rows(); }
};

// The fresh mode's image row token: the same for every picture, so nothing
// could tell two pictures apart; such prompts are never matched.
inline constexpr int32_t kImagePlaceholderToken = INT32_MIN;
inline bool IsImageRowToken(int32_t token) { return token < 0; }

// The token of row `i` of a picture in `mode`: the placeholder when fresh;
// in hash mode a negative id derived from the pixel hash, the grid and i,
// so that another picture (or the same pixels in another grid) differs
// from its first row on. Never kImagePlaceholderToken in hash mode.
int32_t ImageRowToken(ImageCacheMode mode, uint64_t pixel_hash, int64_t nx, int64_t ny, int64_t i);

// The RoPE position of prompt row `row` when the prompt holds `images`
// (sorted by first_row, not overlapping); rows past the prompt (the reply)
// continue as text.
kernels::RopePos RowPosition(std::span<const PromptImage> images, int64_t row);

// The image a row belongs to (index into `images`), or -1.
int64_t ImageAtRow(std::span<const PromptImage> images, int64_t row);

// The images fit the prompt: sorted, not overlapping, inside it, each with
// a grid and an encoder; their rows hold image row tokens and every other
// row a vocabulary id in [0, n_vocab). InvalidArgument naming the problem.
Status ValidatePromptImages(std::span<const int32_t> prompt, std::span<const PromptImage> images,
                            int64_t n_vocab);

}  // namespace mx::engine
