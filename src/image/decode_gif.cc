// GIF through giflib's record-level API, which returns error codes and never
// prints. Only the first image is decoded (DGifSlurp would decode every
// frame): its pixels go through the colour map onto a black logical screen;
// transparent pixels and the screen outside the frame stay black, as with
// stb_image's first frame (llama.cpp).
#include <gif_lib.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "image/decoders.h"

namespace mx::image::internal {
namespace {

struct Reader {
  std::span<const uint8_t> bytes;
  size_t pos = 0;
  bool truncated = false;
};

int ReadFn(GifFileType* gif, GifByteType* out, int n) {
  auto* r = static_cast<Reader*>(gif->UserData);
  if (n <= 0) return 0;
  const size_t k = std::min(static_cast<size_t>(n), r->bytes.size() - r->pos);
  std::memcpy(out, r->bytes.data() + r->pos, k);
  r->pos += k;
  if (k < static_cast<size_t>(n)) r->truncated = true;
  return static_cast<int>(k);
}

struct GifCloser {
  void operator()(GifFileType* gif) const {
    int error = 0;
    DGifCloseFile(gif, &error);
  }
};

Status GifError(const Reader& r, int code) {
  if (r.truncated) return Truncated(ImageFormat::kGif);
  const char* what = GifErrorString(code);
  return Corrupt(ImageFormat::kGif, what != nullptr ? what : "error " + std::to_string(code));
}

// Reads the extension that DGifGetRecordType announced; remembers the
// transparent colour of a graphics control extension.
Status ReadExtension(GifFileType* gif, const Reader& r, int* transparent) {
  int code = 0;
  GifByteType* block = nullptr;
  if (DGifGetExtension(gif, &code, &block) == GIF_ERROR) return GifError(r, gif->Error);
  if (code == GRAPHICS_EXT_FUNC_CODE && block != nullptr) {
    GraphicsControlBlock gcb;
    if (DGifExtensionToGCB(block[0], block + 1, &gcb) == GIF_OK) {
      *transparent = gcb.TransparentColor;  // NO_TRANSPARENT_COLOR (-1) when none
    }
  }
  while (block != nullptr) {
    if (DGifGetExtensionNext(gif, &block) == GIF_ERROR) return GifError(r, gif->Error);
  }
  return Status::Ok();
}

// Decodes the image whose descriptor DGifGetImageDesc just read onto `out`
// (black, screen-sized).
Status DrawFirstImage(GifFileType* gif, const Reader& r, int transparent, RgbImage* out) {
  const GifImageDesc& d = gif->Image;
  const std::string frame = std::to_string(d.Width) + "x" + std::to_string(d.Height) + " at (" +
                            std::to_string(d.Left) + "," + std::to_string(d.Top) + ")";
  if (d.Width <= 0 || d.Height <= 0) {
    return Corrupt(ImageFormat::kGif, "first frame " + frame + " has no pixels");
  }
  if (d.Left < 0 || d.Top < 0 || d.Left + d.Width > out->width || d.Top + d.Height > out->height) {
    return Corrupt(ImageFormat::kGif, "first frame " + frame + " lies outside the " +
                                          std::to_string(out->width) + "x" +
                                          std::to_string(out->height) + " screen");
  }
  const ColorMapObject* map = d.ColorMap != nullptr ? d.ColorMap : gif->SColorMap;
  if (map == nullptr || map->Colors == nullptr) {
    return Corrupt(ImageFormat::kGif, "no colour map for the first frame");
  }

  std::vector<GifPixelType> line(d.Width);
  auto draw_row = [&](int y) -> Status {
    if (DGifGetLine(gif, line.data(), d.Width) == GIF_ERROR) return GifError(r, gif->Error);
    uint8_t* dst = out->rgb.data() + (static_cast<size_t>(d.Top + y) * out->width + d.Left) * 3;
    for (int x = 0; x < d.Width; ++x, dst += 3) {
      const int index = line[x];
      if (index == transparent || index >= map->ColorCount) continue;  // stays black
      dst[0] = map->Colors[index].Red;
      dst[1] = map->Colors[index].Green;
      dst[2] = map->Colors[index].Blue;
    }
    return Status::Ok();
  };
  if (d.Interlace) {
    // Rows arrive in four passes: every 8th row from 0, every 8th from 4,
    // every 4th from 2, every 2nd from 1.
    static constexpr int kStart[] = {0, 4, 2, 1}, kStep[] = {8, 8, 4, 2};
    for (int pass = 0; pass < 4; ++pass) {
      for (int y = kStart[pass]; y < d.Height; y += kStep[pass]) MX_RETURN_IF_ERROR(draw_row(y));
    }
  } else {
    for (int y = 0; y < d.Height; ++y) MX_RETURN_IF_ERROR(draw_row(y));
  }
  return Status::Ok();
}

}  // namespace

Result<RgbImage> DecodeGif(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  Reader r;
  r.bytes = bytes;
  int open_error = 0;
  std::unique_ptr<GifFileType, GifCloser> gif(DGifOpen(&r, ReadFn, &open_error));
  if (gif == nullptr) return GifError(r, open_error);
  MX_RETURN_IF_ERROR(CheckImageDimensions("GIF screen", gif->SWidth, gif->SHeight, limits));

  RgbImage out;
  out.width = gif->SWidth;
  out.height = gif->SHeight;
  int transparent = NO_TRANSPARENT_COLOR;
  for (;;) {
    GifRecordType type = UNDEFINED_RECORD_TYPE;
    if (DGifGetRecordType(gif.get(), &type) == GIF_ERROR) return GifError(r, gif->Error);
    switch (type) {
      case EXTENSION_RECORD_TYPE:
        MX_RETURN_IF_ERROR(ReadExtension(gif.get(), r, &transparent));
        break;
      case IMAGE_DESC_RECORD_TYPE:
        if (DGifGetImageDesc(gif.get()) == GIF_ERROR) return GifError(r, gif->Error);
        out.rgb.assign(static_cast<size_t>(out.width) * out.height * 3, 0);
        MX_RETURN_IF_ERROR(DrawFirstImage(gif.get(), r, transparent, &out));
        return out;
      case TERMINATE_RECORD_TYPE:
        return Corrupt(ImageFormat::kGif, "no image before the trailer");
      default:
        return Corrupt(ImageFormat::kGif, "unknown record type");
    }
  }
}

}  // namespace mx::image::internal
