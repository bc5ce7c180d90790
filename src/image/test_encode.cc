// Test-only encoders; see test_encode.h.
#include "image/test_encode.h"

#include <png.h>
#include <stdio.h>
// clang-format off
#include <jpeglib.h>
// clang-format on
#include <gif_lib.h>
#include <webp/encode.h>
#include <webp/mux.h>

#include <algorithm>
#include <csetjmp>
#include <cstdlib>
#include <cstring>

namespace mx::image::testing {
namespace {

// --- PNG

struct PngWriter {
  Bytes out;
  png_structp png = nullptr;
  png_infop info = nullptr;
  std::vector<png_bytep> rows;
  ~PngWriter() {
    if (png != nullptr) png_destroy_write_struct(&png, info != nullptr ? &info : nullptr);
  }
};

void PngWrite(png_structp png, png_bytep data, png_size_t n) {
  auto* w = static_cast<PngWriter*>(png_get_io_ptr(png));
  w->out.insert(w->out.end(), data, data + n);
}
void PngFlush(png_structp) {}
void PngError(png_structp png, png_const_charp) { png_longjmp(png, 1); }
void PngWarning(png_structp, png_const_charp) {}

int PngChannels(int color_type) {
  switch (color_type) {
    case PNG_COLOR_TYPE_GRAY:
    case PNG_COLOR_TYPE_PALETTE:
      return 1;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      return 2;
    case PNG_COLOR_TYPE_RGB:
      return 3;
    default:
      return 4;
  }
}

bool WritePng(PngWriter* w, const PngSpec& s, std::vector<png_color>* palette) {
  if (setjmp(png_jmpbuf(w->png))) return false;
  png_set_write_fn(w->png, w, PngWrite, PngFlush);
  png_set_IHDR(w->png, w->info, s.width, s.height, s.bit_depth, s.color_type,
               s.interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!palette->empty()) {
    png_set_PLTE(w->png, w->info, palette->data(), static_cast<int>(palette->size()));
  }
  if (!s.trns.empty()) {
    png_set_tRNS(w->png, w->info, s.trns.data(), static_cast<int>(s.trns.size()), nullptr);
  }
  png_write_info(w->png, w->info);
  if (s.bit_depth < 8) png_set_packing(w->png);
  png_write_image(w->png, w->rows.data());
  png_write_end(w->png, nullptr);
  return true;
}

// --- JPEG

struct JpegWriter {
  jpeg_compress_struct cinfo{};
  jpeg_error_mgr err{};
  std::jmp_buf jmp;
  bool created = false;
  unsigned char* mem = nullptr;
  unsigned long size = 0;
  ~JpegWriter() {
    if (created) jpeg_destroy_compress(&cinfo);
    free(mem);
  }
};

void JpegErrorExit(j_common_ptr cinfo) {
  std::longjmp(static_cast<JpegWriter*>(cinfo->client_data)->jmp, 1);
}
void JpegOutput(j_common_ptr) {}

bool WriteJpeg(JpegWriter* w, const RgbImage& img, const JpegSpec& s,
               const std::vector<uint8_t>& samples, int components) {
  w->cinfo.err = jpeg_std_error(&w->err);
  w->err.error_exit = JpegErrorExit;
  w->err.output_message = JpegOutput;
  w->cinfo.client_data = w;
  if (setjmp(w->jmp)) return false;
  jpeg_create_compress(&w->cinfo);
  w->created = true;
  jpeg_mem_dest(&w->cinfo, &w->mem, &w->size);
  w->cinfo.image_width = static_cast<JDIMENSION>(img.width);
  w->cinfo.image_height = static_cast<JDIMENSION>(img.height);
  w->cinfo.input_components = components;
  w->cinfo.in_color_space = s.cmyk ? JCS_CMYK : s.grey ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&w->cinfo);
  jpeg_set_quality(&w->cinfo, s.quality, TRUE);
  if (!s.subsample && !s.grey) {
    for (int c = 0; c < w->cinfo.num_components; ++c) {
      w->cinfo.comp_info[c].h_samp_factor = 1;
      w->cinfo.comp_info[c].v_samp_factor = 1;
    }
  }
  if (s.progressive) jpeg_simple_progression(&w->cinfo);
  jpeg_start_compress(&w->cinfo, TRUE);
  const size_t stride = static_cast<size_t>(img.width) * components;
  while (w->cinfo.next_scanline < w->cinfo.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(samples.data()) + w->cinfo.next_scanline * stride;
    jpeg_write_scanlines(&w->cinfo, &row, 1);
  }
  jpeg_finish_compress(&w->cinfo);
  return true;
}

// --- GIF

int GifWrite(GifFileType* gif, const GifByteType* data, int n) {
  auto* out = static_cast<Bytes*>(gif->UserData);
  out->insert(out->end(), data, data + n);
  return n;
}

Bytes WebpFromPicture(WebPPicture* pic, const WebPConfig& config) {
  WebPMemoryWriter writer;
  WebPMemoryWriterInit(&writer);
  pic->writer = WebPMemoryWrite;
  pic->custom_ptr = &writer;
  Bytes out;
  if (WebPEncode(&config, pic)) out.assign(writer.mem, writer.mem + writer.size);
  WebPMemoryWriterClear(&writer);
  WebPPictureFree(pic);
  return out;
}

}  // namespace

Bytes EncodePng(const PngSpec& s) {
  PngWriter w;
  w.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, PngError, PngWarning);
  if (w.png == nullptr) return {};
  w.info = png_create_info_struct(w.png);
  if (w.info == nullptr) return {};
  const size_t sample_bytes = s.bit_depth == 16 ? 2 : 1;
  const size_t row_bytes = static_cast<size_t>(s.width) * PngChannels(s.color_type) * sample_bytes;
  if (s.samples.size() != row_bytes * s.height) return {};
  std::vector<png_color> palette;
  for (const Rgb& c : s.palette) palette.push_back({c[0], c[1], c[2]});
  for (int y = 0; y < s.height; ++y) {
    w.rows.push_back(const_cast<png_bytep>(s.samples.data() + y * row_bytes));
  }
  if (!WritePng(&w, s, &palette)) return {};
  return std::move(w.out);
}

Bytes EncodePngRgb(const RgbImage& img) {
  PngSpec s;
  s.width = static_cast<int>(img.width);
  s.height = static_cast<int>(img.height);
  s.color_type = PNG_COLOR_TYPE_RGB;
  s.samples = img.rgb;
  return EncodePng(s);
}

Bytes EncodeJpeg(const RgbImage& img, const JpegSpec& s) {
  const size_t n = static_cast<size_t>(img.width) * img.height;
  std::vector<uint8_t> samples;
  int components = 3;
  if (s.grey) {
    components = 1;
    for (size_t i = 0; i < n; ++i) samples.push_back(img.rgb[i * 3]);
  } else if (s.cmyk) {
    components = 4;
    for (size_t i = 0; i < n; ++i) {
      samples.insert(samples.end(), &img.rgb[i * 3], &img.rgb[i * 3] + 3);
      samples.push_back(static_cast<uint8_t>(255 - img.rgb[i * 3 + 1]));
    }
  } else {
    samples = img.rgb;
  }
  JpegWriter w;
  if (!WriteJpeg(&w, img, s, samples, components)) return {};
  return Bytes(w.mem, w.mem + w.size);
}

Bytes EncodeWebpLossless(const RgbImage& img) {
  uint8_t* mem = nullptr;
  const size_t n =
      WebPEncodeLosslessRGB(img.rgb.data(), static_cast<int>(img.width),
                            static_cast<int>(img.height), static_cast<int>(img.width) * 3, &mem);
  Bytes out(mem, mem + n);
  WebPFree(mem);
  return out;
}

Bytes EncodeWebpLosslessRgba(int width, int height, const std::vector<uint8_t>& rgba) {
  WebPConfig config;
  WebPPicture pic;
  if (!WebPConfigInit(&config) || !WebPPictureInit(&pic)) return {};
  config.lossless = 1;
  config.exact = 1;
  pic.use_argb = 1;
  pic.width = width;
  pic.height = height;
  if (!WebPPictureImportRGBA(&pic, rgba.data(), width * 4)) return {};
  return WebpFromPicture(&pic, config);
}

Bytes EncodeWebpLossy(const RgbImage& img, float quality) {
  uint8_t* mem = nullptr;
  const size_t n =
      WebPEncodeRGB(img.rgb.data(), static_cast<int>(img.width), static_cast<int>(img.height),
                    static_cast<int>(img.width) * 3, quality, &mem);
  Bytes out(mem, mem + n);
  WebPFree(mem);
  return out;
}

Bytes EncodeWebpAnimation(const std::vector<RgbImage>& frames) {
  if (frames.empty()) return {};
  const int width = static_cast<int>(frames[0].width), height = static_cast<int>(frames[0].height);
  WebPAnimEncoderOptions options;
  WebPConfig config;
  if (!WebPAnimEncoderOptionsInit(&options) || !WebPConfigInit(&config)) return {};
  options.allow_mixed = 0;
  config.lossless = 1;
  config.exact = 1;
  WebPAnimEncoder* enc = WebPAnimEncoderNew(width, height, &options);
  if (enc == nullptr) return {};
  bool ok = true;
  int timestamp_ms = 0;
  for (const RgbImage& frame : frames) {
    WebPPicture pic;
    ok = ok && WebPPictureInit(&pic);
    pic.use_argb = 1;
    pic.width = width;
    pic.height = height;
    ok = ok && WebPPictureImportRGB(&pic, frame.rgb.data(), width * 3) &&
         WebPAnimEncoderAdd(enc, &pic, timestamp_ms, &config);
    WebPPictureFree(&pic);
    timestamp_ms += 100;
  }
  ok = ok && WebPAnimEncoderAdd(enc, nullptr, timestamp_ms, nullptr);
  WebPData data;
  WebPDataInit(&data);
  ok = ok && WebPAnimEncoderAssemble(enc, &data);
  Bytes out;
  if (ok) out.assign(data.bytes, data.bytes + data.size);
  WebPDataClear(&data);
  WebPAnimEncoderDelete(enc);
  return out;
}

Bytes EncodeGif(const GifSpec& s) {
  Bytes out;
  int error = 0;
  GifFileType* gif = EGifOpen(&out, GifWrite, &error);
  if (gif == nullptr) return {};
  int n_colors = 2;
  while (n_colors < static_cast<int>(s.colors.size())) n_colors *= 2;
  std::vector<GifColorType> colors(n_colors, GifColorType{0, 0, 0});
  for (size_t i = 0; i < s.colors.size(); ++i) {
    colors[i] = GifColorType{s.colors[i][0], s.colors[i][1], s.colors[i][2]};
  }
  ColorMapObject* map = GifMakeMapObject(n_colors, colors.data());
  bool ok = map != nullptr;
  EGifSetGifVersion(gif, true);
  ok = ok &&
       EGifPutScreenDesc(gif, s.screen_w, s.screen_h, 8, 0, s.local_map ? nullptr : map) == GIF_OK;
  for (int frame = 0; frame < (s.second_frame ? 2 : 1) && ok; ++frame) {
    GraphicsControlBlock gcb{};
    gcb.DisposalMode = DISPOSAL_UNSPECIFIED;
    gcb.DelayTime = 10;
    gcb.TransparentColor = s.transparent;
    GifByteType ext[4];
    const size_t ext_len = EGifGCBToExtension(&gcb, ext);
    ok = EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, static_cast<int>(ext_len), ext) == GIF_OK &&
         EGifPutImageDesc(gif, s.left, s.top, s.frame_w, s.frame_h, s.interlace,
                          s.local_map ? map : nullptr) == GIF_OK;
    std::vector<GifPixelType> line(s.frame_w);
    auto put_row = [&](int y) {
      for (int x = 0; x < s.frame_w; ++x) line[x] = frame == 0 ? s.indices[y * s.frame_w + x] : 0;
      return EGifPutLine(gif, line.data(), s.frame_w) == GIF_OK;
    };
    if (s.interlace) {
      static constexpr int kStart[] = {0, 4, 2, 1}, kStep[] = {8, 8, 4, 2};
      for (int pass = 0; pass < 4 && ok; ++pass) {
        for (int y = kStart[pass]; y < s.frame_h && ok; y += kStep[pass]) ok = put_row(y);
      }
    } else {
      for (int y = 0; y < s.frame_h && ok; ++y) ok = put_row(y);
    }
  }
  GifFreeMapObject(map);
  ok = EGifCloseFile(gif, &error) == GIF_OK && ok;
  return ok ? out : Bytes{};
}

RgbImage TestPicture(int width, int height) {
  RgbImage img;
  img.width = width;
  img.height = height;
  img.rgb.resize(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      uint8_t* p = &img.rgb[(static_cast<size_t>(y) * width + x) * 3];
      p[0] = static_cast<uint8_t>(x * 255 / std::max(1, width - 1));
      p[1] = static_cast<uint8_t>(y * 255 / std::max(1, height - 1));
      p[2] = static_cast<uint8_t>(((x / 4 + y / 4) % 2) * 200 + 20);
      if (x > width / 3 && x < 2 * width / 3 && y > height / 3 && y < 2 * height / 3) {
        p[0] = 250, p[1] = 30, p[2] = 40;
      }
    }
  }
  return img;
}

}  // namespace mx::image::testing
