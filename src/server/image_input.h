// Pictures in chat requests (SPEC §11, docs/vision.md): where their bytes
// come from (data: URLs; http(s) URLs only for allowed hosts), the limits,
// decoding and preprocessing on the request's thread, and the encoder the
// model's compute loop runs when the picture's rows are read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/loaded_model.h"
#include "engine/prompt_images.h"
#include "server/options.h"

namespace mx::server {

struct ImageInputOptions {
  size_t max_bytes = size_t{8} << 20;  // one picture's file
  int64_t max_pixels = int64_t{50} << 20;
  int max_images = 8;                  // per request
  std::vector<std::string> url_hosts;  // hosts http(s) URLs may name (lowercase); empty: none
  int64_t fetch_timeout_s = 10;
  engine::ImageCacheMode mode = engine::ImageCacheMode::kFresh;
};

// The server's picture settings.
ImageInputOptions ImageOptions(const ServerOptions& o);

// A picture URL as errors show it: at most its first 80 bytes (never all of
// a data: URL), never its query string.
std::string ShownPictureUrl(const std::string& url);

// A failure with the HTTP code it answers with: 413 for a picture over the
// byte limit, 400 for everything else the client sent.
struct ImageError {
  int http = 400;
  std::string message;
};

// The bytes of a `data:` URL (base64; the media type is not trusted, the
// bytes are sniffed later). InvalidArgument naming the problem.
Result<std::string> DecodeDataUrl(const std::string& url);

// The bytes a picture URL names: a data: URL, or an http(s) URL whose host
// is allowed (fetched without following redirects, within the timeout and
// byte limit). Every other URL is refused, saying how to allow it.
bool LoadImageUrl(const std::string& url, const ImageInputOptions& options, std::string* bytes,
                  ImageError* error);

// The URL of a picture part: image_url.url, or image_url / image as a
// string. "" when the part names none.
std::string ImagePartUrl(const jinja::Value& part);

// The chat's pictures for `model`, in the order their parts appear: loaded,
// decoded, checked against the limits and preprocessed for the model's
// projector, each with its pixel hash and an encoder (which keeps the
// projector and the prepared pixels alive). False with *error when a
// picture is refused, the model takes none, or there are too many.
bool PreparePictures(const engine::ChatPrompt& prompt, const engine::LoadedModel& model,
                     const std::string& model_name, const ImageInputOptions& options,
                     std::vector<engine::PromptImage>* images, ImageError* error);

}  // namespace mx::server
