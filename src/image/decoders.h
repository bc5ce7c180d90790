// Internal to src/image: one decoder per format, called by DecodeImage after
// the byte-size and magic checks. Each checks the declared size with
// CheckImageDimensions before it allocates pixels, and returns
// InvalidArgument ("image: ...") for anything wrong with the bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"
#include "image/image_decode.h"

namespace mx::image::internal {

Result<RgbImage> DecodePng(std::span<const uint8_t> bytes, const DecodeLimits& limits);
Result<RgbImage> DecodeJpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits);
Result<RgbImage> DecodeWebp(std::span<const uint8_t> bytes, const DecodeLimits& limits);
Result<RgbImage> DecodeGif(std::span<const uint8_t> bytes, const DecodeLimits& limits);

// "image: <format> is truncated".
Status Truncated(ImageFormat format);
// "image: <format> is corrupt: <detail>".
Status Corrupt(ImageFormat format, const std::string& detail);

}  // namespace mx::image::internal
