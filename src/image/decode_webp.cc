// WebP through libwebp (still pictures) and libwebpdemux's WebPAnimDecoder
// (animations: the first frame, composited onto the canvas). libwebp reports
// errors as return codes and never prints.
//
// stb_image, and so llama.cpp, cannot read WebP at all; the RGB here is what
// libwebp decodes, with alpha dropped like for the other formats.
#include <webp/decode.h>
#include <webp/demux.h>

#include <cstring>
#include <memory>
#include <string>

#include "image/decoders.h"

namespace mx::image::internal {
namespace {

Status StatusFromVp8(VP8StatusCode code) {
  switch (code) {
    case VP8_STATUS_OK:
      return Status::Ok();
    case VP8_STATUS_NOT_ENOUGH_DATA:
      return Truncated(ImageFormat::kWebp);
    case VP8_STATUS_UNSUPPORTED_FEATURE:
      return Status::InvalidArgument("image: WebP uses a feature libwebp does not support");
    case VP8_STATUS_OUT_OF_MEMORY:
      return Status::InvalidArgument("image: WebP decoder ran out of memory");
    case VP8_STATUS_BITSTREAM_ERROR:
      return Corrupt(ImageFormat::kWebp, "bitstream error");
    default:
      return Corrupt(ImageFormat::kWebp, "decoder status " + std::to_string(code));
  }
}

struct AnimDecoderDeleter {
  void operator()(WebPAnimDecoder* dec) const { WebPAnimDecoderDelete(dec); }
};

// First frame of an animation: WebPAnimDecoder renders it onto a canvas that
// starts transparent black; dropping alpha leaves undrawn pixels black.
Result<RgbImage> DecodeFirstFrame(std::span<const uint8_t> bytes, int width, int height) {
  WebPAnimDecoderOptions options;
  if (!WebPAnimDecoderOptionsInit(&options)) {
    return Status::Internal("image: libwebpdemux version mismatch");
  }
  options.color_mode = MODE_RGBA;
  options.use_threads = 0;
  WebPData data = {bytes.data(), bytes.size()};
  std::unique_ptr<WebPAnimDecoder, AnimDecoderDeleter> dec(WebPAnimDecoderNew(&data, &options));
  if (dec == nullptr) {
    return Status::InvalidArgument("image: animated WebP is corrupt or truncated");
  }
  WebPAnimInfo info;
  if (!WebPAnimDecoderGetInfo(dec.get(), &info) ||
      info.canvas_width != static_cast<uint32_t>(width) ||
      info.canvas_height != static_cast<uint32_t>(height)) {
    return Corrupt(ImageFormat::kWebp, "animation canvas does not match the header");
  }
  uint8_t* rgba = nullptr;
  int timestamp_ms = 0;
  if (!WebPAnimDecoderGetNext(dec.get(), &rgba, &timestamp_ms) || rgba == nullptr) {
    return Corrupt(ImageFormat::kWebp, "first animation frame does not decode");
  }
  RgbImage out;
  out.width = width;
  out.height = height;
  const size_t n_pixels = static_cast<size_t>(width) * height;
  out.rgb.resize(n_pixels * 3);
  for (size_t i = 0; i < n_pixels; ++i) std::memcpy(&out.rgb[i * 3], &rgba[i * 4], 3);
  return out;
}

}  // namespace

Result<RgbImage> DecodeWebp(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) return Status::Internal("image: libwebp version mismatch");
  MX_RETURN_IF_ERROR(StatusFromVp8(WebPGetFeatures(bytes.data(), bytes.size(), &config.input)));
  const int width = config.input.width, height = config.input.height;
  MX_RETURN_IF_ERROR(CheckImageDimensions("WebP", width, height, limits));
  if (config.input.has_animation) return DecodeFirstFrame(bytes, width, height);

  RgbImage out;
  out.width = width;
  out.height = height;
  out.rgb.resize(static_cast<size_t>(width) * height * 3);
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = out.rgb.data();
  config.output.u.RGBA.stride = width * 3;
  config.output.u.RGBA.size = out.rgb.size();
  const VP8StatusCode code = WebPDecode(bytes.data(), bytes.size(), &config);
  WebPFreeDecBuffer(&config.output);  // frees nothing for external memory; kept for symmetry
  MX_RETURN_IF_ERROR(StatusFromVp8(code));
  return out;
}

}  // namespace mx::image::internal
