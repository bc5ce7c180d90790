#include "server/image_input.h"

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>

#include "image/image_decode.h"
#include "image/preprocess.h"
#include "server/http_types.h"
#include "server/picture_fetch.h"
#include "vision/projector.h"

namespace mx::server {
namespace {

using jinja::Value;

int Base64Value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

}  // namespace

std::string ShownPictureUrl(const std::string& url) {
  std::string s = url.substr(0, std::min<size_t>(url.find_first_of("?#"), 80));
  return s.size() < url.size() ? s + "..." : s;
}

ImageInputOptions ImageOptions(const ServerOptions& o) {
  ImageInputOptions io;
  io.max_bytes = static_cast<size_t>(o.image_max_bytes);
  io.max_pixels = o.image_max_pixels;
  io.max_images = o.max_images;
  io.url_hosts = o.image_url_hosts;
  io.fetch_timeout_s = o.image_fetch_timeout_s;
  io.mode =
      o.prompt_cache_images_hash ? engine::ImageCacheMode::kHash : engine::ImageCacheMode::kFresh;
  return io;
}

Result<std::string> DecodeDataUrl(const std::string& url) {
  const size_t comma = url.find(',');
  if (url.compare(0, 5, "data:") != 0 || comma == std::string::npos) {
    return Status::InvalidArgument("not a data: URL (expected data:image/...;base64,...)");
  }
  const std::string header = AsciiLower(url.substr(5, comma - 5));
  if (header.size() < 7 || header.compare(header.size() - 7, 7, ";base64") != 0) {
    return Status::InvalidArgument("data: URL '" + header +
                                   "' is not base64 (expected data:image/...;base64,...)");
  }
  std::string out;
  out.reserve((url.size() - comma) / 4 * 3 + 3);
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (size_t i = comma + 1; i < url.size(); ++i) {
    const auto c = static_cast<unsigned char>(url[i]);
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++pad;
      continue;
    }
    const int v = Base64Value(c);
    if (v < 0 || pad > 0) {
      return Status::InvalidArgument("data: URL: byte " + std::to_string(i) + " is not base64" +
                                     (pad > 0 ? " (data after the padding)" : ""));
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (bits >= 6 || pad > 2)
    return Status::InvalidArgument("data: URL: the base64 data is truncated");
  return out;
}

bool LoadImageUrl(const std::string& url, const ImageInputOptions& options, std::string* bytes,
                  ImageError* error) {
  const std::string scheme = AsciiLower(url.substr(0, std::min(url.find(':'), url.size())));
  if (scheme == "data") {
    // Base64 is 4/3 of the bytes: refuse an oversized picture before decoding it.
    const size_t comma = url.find(',');
    if (comma != std::string::npos && (url.size() - comma - 1) / 4 * 3 > options.max_bytes + 3) {
      *error = {413, "picture of about " +
                         std::to_string(((url.size() - comma - 1) / 4 * 3) >> 20) +
                         " MiB: more than the limit of " + std::to_string(options.max_bytes >> 20) +
                         " MiB (MATRICXON_IMAGE_MAX_MB)"};
      return false;
    }
    auto decoded = DecodeDataUrl(url);
    if (!decoded.ok()) {
      *error = {400, decoded.status().message()};
      return false;
    }
    *bytes = std::move(decoded).value();
    return true;
  }
  if (scheme == "http" || scheme == "https") return FetchPicture(url, options, bytes, error);
  *error = {400, "picture URL " + ShownPictureUrl(url) + ": expected a data: URL" +
                     (options.url_hosts.empty() ? std::string()
                                                : " or an http(s) URL of an allowed host")};
  return false;
}

namespace {

// Pictures being checked at once, server-wide (PreparePictures): each
// holds its decoded pixels and canvas for that moment.
constexpr int kConcurrentPictureChecks = 2;

class PictureCheckSlot {
 public:
  PictureCheckSlot() {
    std::unique_lock<std::mutex> lock(shared_.mu);
    shared_.cv.wait(lock, [] { return shared_.used < kConcurrentPictureChecks; });
    ++shared_.used;
  }
  ~PictureCheckSlot() {
    {
      std::lock_guard<std::mutex> lock(shared_.mu);
      --shared_.used;
    }
    shared_.cv.notify_one();
  }
  PictureCheckSlot(const PictureCheckSlot&) = delete;
  PictureCheckSlot& operator=(const PictureCheckSlot&) = delete;

 private:
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    int used = 0;  // guarded by mu
  };
  static Shared shared_;
};
PictureCheckSlot::Shared PictureCheckSlot::shared_;

// Decodes a picture file and lays it on the model's canvas; *pixel_hash
// (optional) gets the decoded picture's hash.
Result<image::PreparedImage> DecodeAndPrepare(const std::string& file, const image::DecodeLimits& limits,
                                              const image::PreprocessParams& pp, uint64_t* pixel_hash) {
  const auto span = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(file.data()), file.size());
  MX_ASSIGN_OR_RETURN(image::RgbImage rgb, image::DecodeImage(span, limits));
  if (pixel_hash != nullptr) *pixel_hash = image::PixelHash(rgb);
  return image::Preprocess(rgb, pp);
}

}  // namespace

std::string ImagePartUrl(const Value& part) {
  for (const char* key : {"image_url", "image"}) {
    const Value* v = part.Field(key);
    if (v == nullptr) continue;
    if (v->is_string()) return v->as_string();
    if (const Value* url = v->Field("url"); url != nullptr && url->is_string())
      return url->as_string();
  }
  return "";
}

bool PreparePictures(const engine::ChatPrompt& prompt, const engine::LoadedModel& model,
                     const std::string& model_name, const ImageInputOptions& options,
                     std::vector<engine::PromptImage>* images, ImageError* error) {
  images->clear();
  const std::vector<const Value*> parts = engine::LoadedModel::ImageParts(prompt.messages);
  if (parts.empty()) return true;
  if (model.projector == nullptr) {
    *error = {400, "model '" + model_name + "' does not take pictures (no vision projector " +
                       model_name + ".mmproj.gguf or mmproj-" + model_name + ".gguf beside it)"};
    return false;
  }
  if (static_cast<int64_t>(parts.size()) > options.max_images) {
    *error = {400, "the request holds " + std::to_string(parts.size()) +
                       " pictures, the limit is " + std::to_string(options.max_images) +
                       " (MATRICXON_MAX_IMAGES)"};
    return false;
  }
  const vision::ProjectorConfig& pc = model.projector->config();
  image::PreprocessParams pp;
  pp.patch_size = pc.patch_size;
  pp.merge = pc.merge;
  pp.mean = pc.image_mean;
  pp.std = pc.image_std;
  image::DecodeLimits limits;
  limits.max_bytes = options.max_bytes;
  limits.max_pixels = options.max_pixels;
  for (size_t k = 0; k < parts.size(); ++k) {
    const std::string what =
        "picture " + std::to_string(k + 1) + " of " + std::to_string(parts.size());
    const std::string url = ImagePartUrl(*parts[k]);
    if (url.empty()) {
      *error = {400, what + ": the part has no image_url.url"};
      return false;
    }
    std::string bytes;
    if (!LoadImageUrl(url, options, &bytes, error)) {
      error->message = what + ": " + error->message;
      return false;
    }
    if (Status st = image::CheckImageBytes(bytes.size(), limits); !st.ok()) {
      *error = {bytes.empty() ? 400 : 413, what + ": " + st.message()};
      return false;
    }
    // Checked now, kept as its file's bytes: the decoded picture (its pixels,
    // then its canvas as floats: tens of MB) lives only while it is checked
    // here, with at most kConcurrentPictureChecks pictures server-wide, and
    // again while the model encodes it. A request's pictures hold no more
    // than the bytes it sent, and a prompt too long for the context is
    // refused without decoding anything again.
    auto file = std::make_shared<const std::string>(std::move(bytes));
    Result<image::PreparedImage> prepared = Status::Internal("not decoded");
    uint64_t pixel_hash = 0;
    {
      PictureCheckSlot slot;
      prepared = DecodeAndPrepare(*file, limits, pp, &pixel_hash);
    }
    if (!prepared.ok()) {
      *error = {400, what + ": " + prepared.status().message()};
      return false;
    }
    engine::PromptImage im;
    const int64_t f = pc.pixel_multiple();
    im.nx = prepared->width / f;
    im.ny = prepared->height / f;
    im.pixel_hash = pixel_hash;
    prepared = Status::Internal("released");  // the pixels go now
    im.encode = [projector = model.projector, file, limits, pp](ThreadPool* pool) -> Result<std::vector<float>> {
      MX_ASSIGN_OR_RETURN(image::PreparedImage pixels, DecodeAndPrepare(*file, limits, pp, nullptr));
      MX_ASSIGN_OR_RETURN(vision::ImageEmbeddings e,
                          projector->Encode(pixels.pixels, pixels.width, pixels.height, pool));
      return std::move(e.data);
    };
    images->push_back(std::move(im));
  }
  return true;
}

}  // namespace mx::server
