// Decoding of untrusted picture bytes (PNG, JPEG, WebP, GIF) into 8-bit RGB,
// the way llama.cpp's libmtmd reads an image with stb_image forced to three
// channels: an alpha channel is dropped (not composited), grey is replicated
// into R, G and B, 16-bit samples keep their high byte, no gamma or colour
// management is applied and EXIF orientation is ignored.
//
// Decoding uses the system libraries (libpng, libjpeg-turbo, libwebp +
// libwebpdemux, giflib). Their errors are caught (longjmp error managers,
// return codes) and their warnings are silenced; nothing here aborts or
// writes to stderr on bad input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace mx::image {

// A decoded picture. rgb holds height rows of width pixels of 3 bytes (R, G,
// B), top row first: rgb.size() == width * height * 3.
struct RgbImage {
  int64_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // [height][width][3]
};

// What an untrusted picture may be. All are checked before anything the size
// of the picture is allocated.
struct DecodeLimits {
  size_t max_bytes = 20 << 20;    // size of the encoded file
  int64_t max_pixels = 32 << 20;  // width * height of the picture (GIF: logical screen)
  double max_aspect = 200;        // max(width, height) / min(width, height)
};

enum class ImageFormat { kPng, kJpeg, kWebp, kGif };

// "PNG", "JPEG", "WebP", "GIF".
const char* ImageFormatName(ImageFormat format);

// Recognises the format from the first bytes (never from a file name or MIME
// type). InvalidArgument when the bytes start with none of the four magics
// ("image: not a PNG, JPEG, WebP or GIF file (first bytes 3c 68 74 6d)"), or
// are a proper prefix of one ("image: PNG is truncated").
Result<ImageFormat> SniffImageFormat(std::span<const uint8_t> bytes);

// The byte-size check on its own, so that a caller can tell "too large a
// file" (HTTP 413) from other bad pictures (400) before decoding:
// InvalidArgument "image: 25 MB is more than the limit of 20 MB" when
// n > limits.max_bytes, "image: empty input (0 bytes)" when n == 0.
Status CheckImageBytes(size_t n, const DecodeLimits& limits);

// The dimension checks on their own (used by every decoder on the size the
// file declares, before pixels are decoded). InvalidArgument for a zero side,
// more than max_pixels pixels or an aspect ratio above max_aspect.
// `what` names the picture in the message ("PNG", "GIF screen", ...).
Status CheckImageDimensions(const char* what, int64_t width, int64_t height,
                            const DecodeLimits& limits);

// Decodes the first frame of a PNG, JPEG, WebP or GIF picture to RGB.
//
// Order of checks: CheckImageBytes, the magic bytes, the size the file
// declares (CheckImageDimensions; a decompression bomb is refused here,
// before any pixel buffer exists), then the pixel data. Animated WebP and GIF
// give their first frame composited onto the canvas (undrawn or transparent
// pixels are black).
//
// Errors: InvalidArgument with a message starting "image: " for every bad,
// truncated or oversized input; NotSupported for CMYK/YCCK JPEGs. The result
// is owned by the caller. Thread-safe (no shared state).
Result<RgbImage> DecodeImage(std::span<const uint8_t> bytes, const DecodeLimits& limits);

}  // namespace mx::image
