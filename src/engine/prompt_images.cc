#include "engine/prompt_images.h"

#include <algorithm>

namespace mx::engine {
namespace {

uint64_t Mix(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

}  // namespace

Result<ImageCacheMode> ParseImageCacheMode(const std::string& s) {
  if (s == "fresh") return ImageCacheMode::kFresh;
  if (s == "hash") return ImageCacheMode::kHash;
  return Status::InvalidArgument("image cache mode '" + s + "' is not one of fresh, hash");
}

int32_t ImageRowToken(ImageCacheMode mode, uint64_t pixel_hash, int64_t nx, int64_t ny, int64_t i) {
  if (mode == ImageCacheMode::kFresh) return kImagePlaceholderToken;
  uint64_t h = Mix(pixel_hash ^ Mix(static_cast<uint64_t>(nx) << 32 ^ static_cast<uint64_t>(ny)));
  h = Mix(h + static_cast<uint64_t>(i));
  // -1 .. -(2^31 - 1): 31 bits of hash, never the placeholder (INT32_MIN).
  return -1 - static_cast<int32_t>((h >> 33) % 0x7fffffffULL);
}

int64_t ImageAtRow(std::span<const PromptImage> images, int64_t row) {
  auto it = std::upper_bound(images.begin(), images.end(), row,
                             [](int64_t r, const PromptImage& im) { return r < im.first_row; });
  if (it == images.begin()) return -1;
  --it;
  return row < it->end_row() ? it - images.begin() : -1;
}

kernels::RopePos RowPosition(std::span<const PromptImage> images, int64_t row) {
  // Every picture before `row` holds n_rows() rows but only n_pos()
  // positions.
  int64_t behind = 0;
  for (const PromptImage& im : images) {
    if (row < im.first_row) break;
    if (row < im.end_row()) {
      const int64_t p0 = im.first_row - behind, i = row - im.first_row;
      return {p0, p0 + i / im.nx, p0 + i % im.nx, 0};
    }
    behind += im.n_rows() - im.n_pos();
  }
  return kernels::RopePos::Text(row - behind);
}

Status ValidatePromptImages(std::span<const int32_t> prompt, std::span<const PromptImage> images,
                            int64_t n_vocab) {
  const auto n = static_cast<int64_t>(prompt.size());
  int64_t at = 0;
  for (size_t k = 0; k < images.size(); ++k) {
    const PromptImage& im = images[k];
    const std::string what =
        "image " + std::to_string(k + 1) + " of " + std::to_string(images.size());
    if (im.nx < 1 || im.ny < 1) return Status::InvalidArgument(what + " has an empty grid");
    if (!im.encode) return Status::InvalidArgument(what + " has no encoder");
    if (im.first_row < at || im.end_row() > n) {
      return Status::InvalidArgument(
          what + ": rows [" + std::to_string(im.first_row) + ", " + std::to_string(im.end_row()) +
          ") overlap another image or leave the " + std::to_string(n) + "-row prompt");
    }
    for (int64_t r = at; r < im.first_row; ++r) {
      if (prompt[static_cast<size_t>(r)] < 0 || prompt[static_cast<size_t>(r)] >= n_vocab) {
        return Status::InvalidArgument(
            "token id " + std::to_string(prompt[static_cast<size_t>(r)]) +
            " is outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
      }
    }
    for (int64_t r = im.first_row; r < im.end_row(); ++r) {
      if (!IsImageRowToken(prompt[static_cast<size_t>(r)])) {
        return Status::InvalidArgument(what + ": row " + std::to_string(r) + " holds a text token");
      }
    }
    at = im.end_row();
  }
  for (int64_t r = at; r < n; ++r) {
    if (prompt[static_cast<size_t>(r)] < 0 || prompt[static_cast<size_t>(r)] >= n_vocab) {
      return Status::InvalidArgument("token id " + std::to_string(prompt[static_cast<size_t>(r)]) +
                                     " is outside the vocabulary [0, " + std::to_string(n_vocab) +
                                     ")");
    }
  }
  return Status::Ok();
}

}  // namespace mx::engine
