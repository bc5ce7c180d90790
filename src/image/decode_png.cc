// PNG through libpng's low-level API. libpng reports errors by calling the
// error callback, which must not return: ours records the message and
// longjmps back to the setjmp in ReadHeader / SetUpTransforms / ReadPixels.
// Those functions hold no C++ objects with destructors, so nothing is skipped
// by the jump; all state lives in PngState, owned by the caller.
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "image/decoders.h"

namespace mx::image::internal {
namespace {

// Ancillary chunks that do not change the RGB bytes stb_image produces (no
// gamma, colour management or transparency is applied): skipped unparsed.
constexpr png_byte kIgnoredChunks[] =
    "bKGD\0cHRM\0eXIf\0gAMA\0hIST\0iCCP\0iTXt\0oFFs\0pCAL\0pHYs\0sBIT\0sCAL\0sPLT\0sRGB\0"
    "tEXt\0tIME\0tRNS\0zTXt";
constexpr int kNumIgnoredChunks = 18;
static_assert(sizeof(kIgnoredChunks) == 5 * kNumIgnoredChunks, "4 letters + NUL each");

struct PngState {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
  bool truncated = false;
  char error[256] = {};  // libpng's message of the last error (no allocation on that path)
  png_structp png = nullptr;
  png_infop info = nullptr;
  png_uint_32 width = 0, height = 0;
  std::vector<png_bytep> rows;  // [height], into the output image

  ~PngState() {
    if (png != nullptr) png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
  }
};

void ErrorFn(png_structp png, png_const_charp message) {
  auto* state = static_cast<PngState*>(png_get_error_ptr(png));
  std::snprintf(state->error, sizeof(state->error), "%s",
                message != nullptr ? message : "unknown error");
  png_longjmp(png, 1);
}

void WarningFn(png_structp, png_const_charp) {}  // warnings are ignored, never printed

void ReadFn(png_structp png, png_bytep out, png_size_t n) {
  auto* state = static_cast<PngState*>(png_get_io_ptr(png));
  if (n > state->bytes.size() - state->pos) {
    state->truncated = true;
    png_error(png, "truncated");
  }
  std::memcpy(out, state->bytes.data() + state->pos, n);
  state->pos += n;
}

// Reads the chunks up to the first IDAT (IHDR gives the size). Returns false
// after a libpng error. Nothing of the picture's size is allocated yet.
bool ReadHeader(PngState* s) {
  if (setjmp(png_jmpbuf(s->png))) return false;
  png_set_read_fn(s->png, s, ReadFn);
  // Our own limits apply (CheckImageDimensions); libpng's defaults
  // (1 000 000 per side) would only give a less useful message first.
  png_set_user_limits(s->png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
  png_set_chunk_cache_max(s->png, 256);
  png_set_chunk_malloc_max(s->png, 8 << 20);
  png_set_keep_unknown_chunks(s->png, PNG_HANDLE_CHUNK_NEVER, kIgnoredChunks, kNumIgnoredChunks);
  png_read_info(s->png, s->info);

  int bit_depth = 0, color_type = 0;
  png_get_IHDR(s->png, s->info, &s->width, &s->height, &bit_depth, &color_type, nullptr, nullptr,
               nullptr);
  return true;
}

// Sets up the transformations to 8-bit RGB. png_read_update_info allocates
// row buffers of the picture's width (and clears them), so this runs only
// after the size check.
bool SetUpTransforms(PngState* s) {
  if (setjmp(png_jmpbuf(s->png))) return false;
  const int bit_depth = png_get_bit_depth(s->png, s->info);
  const int color_type = png_get_color_type(s->png, s->info);
  // stb_image semantics: palette -> RGB, 1/2/4-bit grey scaled to 8 bits,
  // 16-bit -> high byte, grey replicated, alpha dropped.
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(s->png);
  if ((color_type & PNG_COLOR_MASK_COLOR) == 0 && bit_depth < 8) {
    png_set_expand_gray_1_2_4_to_8(s->png);
  }
  if (bit_depth == 16) png_set_strip_16(s->png);
  if ((color_type & PNG_COLOR_MASK_COLOR) == 0) png_set_gray_to_rgb(s->png);
  if ((color_type & PNG_COLOR_MASK_ALPHA) != 0) png_set_strip_alpha(s->png);
  png_set_interlace_handling(s->png);
  png_read_update_info(s->png, s->info);
  return true;
}

// Decodes all rows into s->rows and reads on to IEND (so that a file cut
// after its image data is still reported as truncated).
bool ReadPixels(PngState* s) {
  if (setjmp(png_jmpbuf(s->png))) return false;
  png_read_image(s->png, s->rows.data());
  png_read_end(s->png, nullptr);
  return true;
}

Status Failure(const PngState& s) {
  if (s.truncated) return Truncated(ImageFormat::kPng);
  return Corrupt(ImageFormat::kPng, s.error);
}

}  // namespace

Result<RgbImage> DecodePng(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  // The size straight from IHDR (signature, length, "IHDR", width, height,
  // all big-endian), so that a zero side gets a clearer message than
  // libpng's "Invalid IHDR data". libpng checks the chunk properly below.
  if (bytes.size() >= 24 && std::memcmp(bytes.data() + 12, "IHDR", 4) == 0) {
    auto be32 = [&](size_t at) {
      return uint32_t{bytes[at]} << 24 | uint32_t{bytes[at + 1]} << 16 |
             uint32_t{bytes[at + 2]} << 8 | uint32_t{bytes[at + 3]};
    };
    MX_RETURN_IF_ERROR(CheckImageDimensions("PNG", be32(16), be32(20), limits));
  }
  PngState s;
  s.bytes = bytes;
  s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, ErrorFn, WarningFn);
  if (s.png == nullptr) return Status::Internal("image: libpng could not start");
  s.info = png_create_info_struct(s.png);
  if (s.info == nullptr) return Status::Internal("image: libpng could not start");

  if (!ReadHeader(&s)) return Failure(s);
  MX_RETURN_IF_ERROR(CheckImageDimensions("PNG", s.width, s.height, limits));
  if (!SetUpTransforms(&s)) return Failure(s);
  const png_size_t row_bytes = png_get_rowbytes(s.png, s.info);
  if (png_get_bit_depth(s.png, s.info) != 8 || png_get_channels(s.png, s.info) != 3 ||
      row_bytes != static_cast<png_size_t>(s.width) * 3) {
    return Status::Internal("image: libpng did not convert the PNG to 8-bit RGB");
  }

  RgbImage out;
  out.width = s.width;
  out.height = s.height;
  out.rgb.resize(row_bytes * s.height);
  s.rows.resize(s.height);
  for (png_uint_32 y = 0; y < s.height; ++y) s.rows[y] = out.rgb.data() + y * row_bytes;
  if (!ReadPixels(&s)) return Failure(s);
  return out;
}

}  // namespace mx::image::internal
