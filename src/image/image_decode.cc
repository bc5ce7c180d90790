// Format sniffing, the limit checks and the dispatch to one decoder per format
// (decode_png.cc, decode_jpeg.cc, decode_webp.cc, decode_gif.cc).
#include "image/image_decode.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "image/decoders.h"

namespace mx::image {
namespace {

constexpr uint8_t kPngMagic[] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
constexpr uint8_t kJpegMagic[] = {0xff, 0xd8, 0xff};
constexpr uint8_t kGif87Magic[] = {'G', 'I', 'F', '8', '7', 'a'};
constexpr uint8_t kGif89Magic[] = {'G', 'I', 'F', '8', '9', 'a'};

// How `bytes` relate to a magic: the whole magic is there, the bytes are a
// proper prefix of it, or they differ.
enum class Match { kFull, kPrefix, kNo };

Match MatchMagic(std::span<const uint8_t> bytes, std::span<const uint8_t> magic) {
  const size_t n = std::min(bytes.size(), magic.size());
  if (std::memcmp(bytes.data(), magic.data(), n) != 0) return Match::kNo;
  return n == magic.size() ? Match::kFull : Match::kPrefix;
}

// WebP: "RIFF" <u32 size> "WEBP".
Match MatchWebp(std::span<const uint8_t> bytes) {
  const uint8_t riff[] = {'R', 'I', 'F', 'F'};
  const uint8_t webp[] = {'W', 'E', 'B', 'P'};
  Match m = MatchMagic(bytes, riff);
  if (m != Match::kFull) return m;
  if (bytes.size() <= 8) return Match::kPrefix;
  m = MatchMagic(bytes.subspan(8), webp);
  return m;
}

std::string FirstBytesHex(std::span<const uint8_t> bytes) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < bytes.size() && i < 4; ++i) {
    std::snprintf(buf, sizeof(buf), "%s%02x", i == 0 ? "" : " ", bytes[i]);
    out += buf;
  }
  return out;
}

// "25 MB" for whole megabytes (MiB), "20971521 bytes (20.0 MB)" from one
// megabyte on, "200 bytes" below.
std::string DescribeBytes(size_t n) {
  char buf[64];
  if (n >= (1u << 20) && n % (1u << 20) == 0) {
    std::snprintf(buf, sizeof(buf), "%zu MB", n >> 20);
  } else if (n >= (1u << 20)) {
    std::snprintf(buf, sizeof(buf), "%zu bytes (%.1f MB)", n, static_cast<double>(n) / (1 << 20));
  } else {
    std::snprintf(buf, sizeof(buf), "%zu bytes", n);
  }
  return buf;
}

}  // namespace

const char* ImageFormatName(ImageFormat format) {
  switch (format) {
    case ImageFormat::kPng:
      return "PNG";
    case ImageFormat::kJpeg:
      return "JPEG";
    case ImageFormat::kWebp:
      return "WebP";
    case ImageFormat::kGif:
      return "GIF";
  }
  return "unknown format";
}

Result<ImageFormat> SniffImageFormat(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return Status::InvalidArgument("image: empty input (0 bytes)");
  struct Candidate {
    ImageFormat format;
    Match match;
  };
  const Candidate candidates[] = {
      {ImageFormat::kPng, MatchMagic(bytes, kPngMagic)},
      {ImageFormat::kJpeg, MatchMagic(bytes, kJpegMagic)},
      {ImageFormat::kWebp, MatchWebp(bytes)},
      // The better of the two matches (kFull < kPrefix < kNo).
      {ImageFormat::kGif, std::min(MatchMagic(bytes, kGif87Magic), MatchMagic(bytes, kGif89Magic))},
  };
  for (const Candidate& c : candidates) {
    if (c.match == Match::kFull) return c.format;
  }
  for (const Candidate& c : candidates) {
    if (c.match == Match::kPrefix) return internal::Truncated(c.format);
  }
  return Status::InvalidArgument("image: not a PNG, JPEG, WebP or GIF file (first bytes " +
                                 FirstBytesHex(bytes) + ")");
}

Status CheckImageBytes(size_t n, const DecodeLimits& limits) {
  if (n == 0) return Status::InvalidArgument("image: empty input (0 bytes)");
  if (n <= limits.max_bytes) return Status::Ok();
  return Status::InvalidArgument("image: " + DescribeBytes(n) + " is more than the limit of " +
                                 DescribeBytes(limits.max_bytes));
}

Status CheckImageDimensions(const char* what, int64_t width, int64_t height,
                            const DecodeLimits& limits) {
  const std::string size = std::to_string(width) + "x" + std::to_string(height) + " pixels";
  if (width <= 0 || height <= 0) {
    return Status::InvalidArgument(std::string("image: ") + what + " has no pixels (" + size + ")");
  }
  // Each side fits in 32 bits in every supported format, so the product
  // cannot overflow; the guard keeps the function safe for any caller.
  if (width > (int64_t{1} << 31) || height > (int64_t{1} << 31) ||
      width * height > limits.max_pixels) {
    return Status::InvalidArgument("image: " + size + " is more than the limit of " +
                                   std::to_string(limits.max_pixels) + " pixels");
  }
  const double aspect =
      static_cast<double>(std::max(width, height)) / static_cast<double>(std::min(width, height));
  if (aspect > limits.max_aspect) {
    char buf[96];
    std::snprintf(buf, sizeof(buf), ": aspect ratio %g is above the limit %g", aspect,
                  limits.max_aspect);
    return Status::InvalidArgument("image: " + size + buf);
  }
  return Status::Ok();
}

Result<RgbImage> DecodeImage(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  MX_RETURN_IF_ERROR(CheckImageBytes(bytes.size(), limits));
  MX_ASSIGN_OR_RETURN(ImageFormat format, SniffImageFormat(bytes));
  switch (format) {
    case ImageFormat::kPng:
      return internal::DecodePng(bytes, limits);
    case ImageFormat::kJpeg:
      return internal::DecodeJpeg(bytes, limits);
    case ImageFormat::kWebp:
      return internal::DecodeWebp(bytes, limits);
    case ImageFormat::kGif:
      return internal::DecodeGif(bytes, limits);
  }
  return Status::Internal("image: unknown format");
}

namespace internal {

Status Truncated(ImageFormat format) {
  return Status::InvalidArgument(std::string("image: ") + ImageFormatName(format) +
                                 " is truncated");
}

Status Corrupt(ImageFormat format, const std::string& detail) {
  return Status::InvalidArgument(std::string("image: ") + ImageFormatName(format) +
                                 " is corrupt: " + detail);
}

}  // namespace internal
}  // namespace mx::image
