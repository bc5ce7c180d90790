// JPEG through libjpeg(-turbo). libjpeg reports errors through
// err->error_exit, which must not return: ours formats the message into
// JpegState and longjmps back to the setjmp of the phase that is running
// (ReadHeader, Start, ReadRows). Those functions hold no C++ objects with
// destructors, so the jump skips nothing; all state lives in JpegState, owned
// by the caller.
//
// Not bit-exact with stb_image (which llama.cpp uses): the IDCT, chroma
// upsampling and YCbCr->RGB rounding of the two decoders differ by a level or
// two on some pixels. EXIF orientation is ignored, as stb_image does.
#include <stdio.h>  // jpeglib.h needs FILE and size_t first
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include <csetjmp>
#include <string>

#include "image/decoders.h"

namespace mx::image::internal {
namespace {

// A progressive JPEG may hold any number of scans, each a full pass over the
// coefficients: a small file with thousands of scans costs minutes of CPU.
// libjpeg-turbo's own tools suggest a limit of this order.
constexpr int kMaxScans = 500;

struct JpegState {
  jpeg_decompress_struct cinfo{};
  jpeg_error_mgr err{};
  jpeg_progress_mgr progress{};
  std::jmp_buf jmp;
  bool created = false;
  bool truncated = false;
  bool too_many_scans = false;
  char message[JMSG_LENGTH_MAX] = {};
  uint8_t* out = nullptr;  // [height][width][3], owned by the caller

  ~JpegState() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

JpegState* StateOf(j_common_ptr cinfo) { return static_cast<JpegState*>(cinfo->client_data); }

void ErrorExit(j_common_ptr cinfo) {
  JpegState* s = StateOf(cinfo);
  (*cinfo->err->format_message)(cinfo, s->message);
  std::longjmp(s->jmp, 1);
}

// Warnings (msg_level -1) and trace messages are dropped, except running out
// of data: libjpeg would pad the picture with grey and carry on, we call that
// a truncated file.
void EmitMessage(j_common_ptr cinfo, int msg_level) {
  if (msg_level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    JpegState* s = StateOf(cinfo);
    s->truncated = true;
    std::longjmp(s->jmp, 1);
  }
}

void OutputMessage(j_common_ptr) {}  // never print

void ProgressMonitor(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxScans) {
    JpegState* s = StateOf(cinfo);
    s->too_many_scans = true;
    std::longjmp(s->jmp, 1);
  }
}

bool ReadHeader(JpegState* s, std::span<const uint8_t> bytes, long max_memory) {
  s->cinfo.err = jpeg_std_error(&s->err);
  s->err.error_exit = ErrorExit;
  s->err.emit_message = EmitMessage;
  s->err.output_message = OutputMessage;
  s->cinfo.client_data = s;
  if (setjmp(s->jmp)) return false;
  jpeg_create_decompress(&s->cinfo);
  s->created = true;
  // Without a backing store, libjpeg fails (JERR_NO_BACKING_STORE) instead
  // of allocating more than this for a progressive picture's coefficients.
  s->cinfo.mem->max_memory_to_use = max_memory;
  s->progress.progress_monitor = ProgressMonitor;
  s->cinfo.progress = &s->progress;
  jpeg_mem_src(&s->cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&s->cinfo, TRUE);
  return true;
}

bool Start(JpegState* s) {
  if (setjmp(s->jmp)) return false;
  s->cinfo.out_color_space = JCS_RGB;
  s->cinfo.dct_method = JDCT_ISLOW;
  s->cinfo.do_fancy_upsampling = TRUE;  // stb_image interpolates chroma too
  jpeg_start_decompress(&s->cinfo);
  return true;
}

bool ReadRows(JpegState* s) {
  if (setjmp(s->jmp)) return false;
  const size_t stride = static_cast<size_t>(s->cinfo.output_width) * 3;
  while (s->cinfo.output_scanline < s->cinfo.output_height) {
    JSAMPROW row = s->out + s->cinfo.output_scanline * stride;
    if (jpeg_read_scanlines(&s->cinfo, &row, 1) != 1) return false;
  }
  // No jpeg_finish_decompress: everything after the last row (trailing
  // markers, the EOI) does not change the picture.
  return true;
}

Status Failure(const JpegState& s) {
  if (s.truncated) return Truncated(ImageFormat::kJpeg);
  if (s.too_many_scans) {
    return Corrupt(ImageFormat::kJpeg,
                   "more than " + std::to_string(kMaxScans) + " progressive scans");
  }
  return Corrupt(ImageFormat::kJpeg, s.message[0] != 0 ? s.message : "unknown error");
}

}  // namespace

Result<RgbImage> DecodeJpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  JpegState s;
  // Room for a progressive picture at the pixel limit: 3 full-size
  // components of 16-bit coefficients, plus working buffers.
  const long max_memory = static_cast<long>(limits.max_pixels) * 8 + (64 << 20);
  if (!ReadHeader(&s, bytes, max_memory)) return Failure(s);
  MX_RETURN_IF_ERROR(
      CheckImageDimensions("JPEG", s.cinfo.image_width, s.cinfo.image_height, limits));
  const J_COLOR_SPACE space = s.cinfo.jpeg_color_space;
  if (space == JCS_CMYK || space == JCS_YCCK) {
    return Status::NotSupported(std::string("image: ") + (space == JCS_CMYK ? "CMYK" : "YCCK") +
                                " JPEG is not supported (convert it to RGB)");
  }
  if (s.cinfo.num_components != 1 && s.cinfo.num_components != 3) {
    return Status::InvalidArgument("image: JPEG has " + std::to_string(s.cinfo.num_components) +
                                   " colour components (only grey and colour are supported)");
  }
  if (!Start(&s)) return Failure(s);
  if (s.cinfo.output_width != s.cinfo.image_width ||
      s.cinfo.output_height != s.cinfo.image_height || s.cinfo.output_components != 3) {
    return Status::Internal("image: libjpeg did not convert the JPEG to RGB");
  }

  RgbImage out;
  out.width = s.cinfo.output_width;
  out.height = s.cinfo.output_height;
  out.rgb.resize(static_cast<size_t>(out.width) * out.height * 3);
  s.out = out.rgb.data();
  if (!ReadRows(&s)) return Failure(s);
  return out;
}

}  // namespace mx::image::internal
