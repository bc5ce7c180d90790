#include "engine/loaded_model.h"

#include <algorithm>

#include "core/logging.h"
#include "tokenizer/gguf_vocab.h"

namespace mx::engine {

Result<std::unique_ptr<LoadedModel>> LoadedModel::Load(Env* env, const std::string& path,
                                                       const ModelLoadOptions& options) {
  auto m = std::make_unique<LoadedModel>();
  MX_ASSIGN_OR_RETURN(m->model, models::Model::Load(env, path, options.load));
  MX_ASSIGN_OR_RETURN(m->tokenizer, tokenizer::TokenizerFromGguf(m->model->file()));
  if (m->tokenizer->n_vocab() != m->model->config().n_vocab) {
    return Status::InvalidArgument(path + ": tokenizer has " + std::to_string(m->tokenizer->n_vocab()) +
                                   " tokens, the model's output has " +
                                   std::to_string(m->model->config().n_vocab));
  }
  if (!options.template_override.empty()) {
    MX_ASSIGN_OR_RETURN(m->family, templates::FamilyFromName(options.template_override));
    m->family_detected = true;
  } else {
    std::string jinja;
    if (m->model->file().Find("tokenizer.chat_template") != nullptr) {
      MX_ASSIGN_OR_RETURN(jinja, m->model->file().GetString("tokenizer.chat_template"));
    }
    if (auto family = templates::DetectFamily(jinja)) {
      m->family = *family;
      m->family_detected = true;
    } else {
      MX_LOG(kWarn) << path << ": chat template not recognised, using ChatML";
    }
  }
  return m;
}

Result<std::vector<int32_t>> LoadedModel::EncodeChat(
    const std::vector<templates::ChatMessage>& messages,
    const templates::RenderOptions& options) const {
  MX_ASSIGN_OR_RETURN(std::string text, templates::Render(family, messages, options));
  return tokenizer->Encode(text, /*add_special=*/true, /*parse_special=*/true);
}

std::vector<int64_t> LoadedModel::MessageStarts(std::span<const int32_t> prompt,
                                                bool generation_prompt,
                                                int64_t* reply_start) const {
  if (reply_start != nullptr) *reply_start = 0;
  const templates::MessageMarkers markers = templates::MessageStartMarkers(family);
  std::vector<int32_t> ids;
  for (const std::string& text : markers.texts) {
    std::vector<int32_t> t = tokenizer->Encode(text, /*add_special=*/false, /*parse_special=*/true);
    if (t.size() == 1) ids.push_back(t[0]);
  }
  std::vector<int64_t> out;
  if (ids.empty()) return out;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (std::find(ids.begin(), ids.end(), prompt[i]) != ids.end())
      out.push_back(static_cast<int64_t>(i));
  }
  if (generation_prompt && markers.in_generation_prompt && !out.empty()) {
    if (reply_start != nullptr) *reply_start = out.back();
    out.pop_back();
  }
  return out;
}

}  // namespace mx::engine
