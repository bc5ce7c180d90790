// LoadedModel's chats with pictures (loaded_model.h EncodeChatWithImages):
// picture parts become a marker text the template prints in their place;
// the rendered text is split there and each picture's rows go in between.
#include <algorithm>

#include "engine/loaded_model.h"
#include "templates/jinja/json.h"

namespace mx::engine {
namespace {

using jinja::Value;

bool IsImagePart(const Value& part) {
  const Value* type = part.Field("type");
  if (type == nullptr || !type->is_string()) return false;
  const std::string& t = type->as_string();
  return t == "image_url" || t == "input_image" || t == "image";
}

// A copy of `dict` with `key` set to `value` (order kept).
Value With(const Value& dict, std::string_view key, Value value) {
  std::vector<std::pair<std::string, Value>> fields;
  bool set = false;
  for (const auto& [k, v] : dict.as_dict().items()) {
    if (!k.is_string()) continue;
    if (k.as_string() == key) {
      fields.emplace_back(k.as_string(), value);
      set = true;
    } else {
      fields.emplace_back(k.as_string(), v);
    }
  }
  if (!set) fields.emplace_back(std::string(key), std::move(value));
  return Value::MakeDict(std::move(fields));
}

}  // namespace

std::vector<const Value*> LoadedModel::ImageParts(const Value& messages) {
  std::vector<const Value*> out;
  if (!messages.is_sequence()) return out;
  for (const Value& m : messages.as_list()) {
    const Value* content = m.Field("content");
    if (content == nullptr || !content->is_sequence()) continue;
    for (const Value& part : content->as_list()) {
      if (IsImagePart(part)) out.push_back(&part);
    }
  }
  return out;
}

Result<LoadedModel::EncodedChat> LoadedModel::EncodeChatWithImages(const ChatPrompt& prompt,
                                                                   std::vector<PromptImage> images,
                                                                   ImageCacheMode mode) const {
  if (images.empty()) {
    MX_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, EncodeChat(prompt));
    return EncodedChat{std::move(tokens), {}};
  }
  const std::vector<const Value*> parts = ImageParts(prompt.messages);
  if (parts.size() != images.size()) {
    return Status::InvalidArgument("the messages hold " + std::to_string(parts.size()) +
                                   " pictures, " + std::to_string(images.size()) + " were given");
  }
  // A marker no message holds: every picture part becomes a text part of it.
  std::string marker = "<__mx_media__>";
  if (auto dump = jinja::ToJson(prompt.messages); dump.ok()) {
    while (dump->find(marker) != std::string::npos) marker.insert(marker.size() - 2, "_");
  }
  ChatPrompt marked = prompt;
  jinja::ValueList messages;
  for (const Value& m : prompt.messages.as_list()) {
    const Value* content = m.Field("content");
    if (content == nullptr || !content->is_sequence()) {
      messages.push_back(m);
      continue;
    }
    jinja::ValueList list;
    for (const Value& part : content->as_list()) {
      if (!IsImagePart(part)) {
        list.push_back(part);
        continue;
      }
      list.push_back(
          Value::MakeDict({{"type", Value::String("text")}, {"text", Value::String(marker)}}));
    }
    messages.push_back(With(m, "content", Value::List(std::move(list))));
  }
  marked.messages = Value::List(std::move(messages));
  MX_ASSIGN_OR_RETURN(RenderedChat r, RenderForTokens(marked));

  // Split at the markers: pieces[k] is the text before picture k.
  std::vector<size_t> cuts;
  for (size_t at = r.text.find(marker); at != std::string::npos;
       at = r.text.find(marker, at + marker.size())) {
    cuts.push_back(at);
  }
  if (cuts.size() != images.size()) {
    return Status::InvalidArgument("the chat template printed " + std::to_string(cuts.size()) +
                                   " of the " + std::to_string(images.size()) + " pictures");
  }
  const std::vector<int32_t> begin =
      tokenizer->Encode(image_begin_text, /*add_special=*/false, /*parse_special=*/true);
  const std::vector<int32_t> end =
      tokenizer->Encode(image_end_text, /*add_special=*/false, /*parse_special=*/true);
  EncodedChat out;
  // The literal ranges that fall in [from, to), relative to from.
  auto literal_in = [&](size_t from, size_t to) {
    std::vector<tokenizer::Tokenizer::Span> spans;
    for (const auto& s : r.literal) {
      const size_t b = std::max(s.begin, from), e = std::min(s.end, to);
      if (b < e) spans.push_back({b - from, e - from});
    }
    return spans;
  };
  size_t from = 0;
  for (size_t k = 0; k <= images.size(); ++k) {
    const size_t to = k < images.size() ? cuts[k] : r.text.size();
    const std::string_view piece(r.text.data() + from, to - from);
    const auto spans = literal_in(from, to);
    if (k == 0) {
      out.tokens = EncodePrompt(piece, spans);
    } else {
      const std::vector<int32_t> t =
          tokenizer->EncodeWithLiterals(piece, /*add_special=*/false, spans);
      out.tokens.insert(out.tokens.end(), t.begin(), t.end());
    }
    if (k == images.size()) break;
    PromptImage& im = images[k];
    out.tokens.insert(out.tokens.end(), begin.begin(), begin.end());
    im.first_row = static_cast<int64_t>(out.tokens.size());
    for (int64_t i = 0; i < im.n_rows(); ++i) {
      out.tokens.push_back(ImageRowToken(mode, im.pixel_hash, im.nx, im.ny, i));
    }
    out.tokens.insert(out.tokens.end(), end.begin(), end.end());
    from = to + marker.size();
  }
  out.images = std::move(images);
  return out;
}

}  // namespace mx::engine
