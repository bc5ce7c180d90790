// LoadedModel: what serving one GGUF file needs, loaded together: the
// weights (models::Model), the tokenizer, and the chat template family.
// Shared by `matricxon chat` and the server's model manager.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "models/model.h"
#include "templates/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace mx::engine {

struct ModelLoadOptions {
  models::LoadOptions load;
  // Forces a template family by name ("chatml", "llama3", ...); empty:
  // recognise it from tokenizer.chat_template, ChatML when unrecognised.
  std::string template_override;
};

struct LoadedModel {
  std::unique_ptr<models::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  templates::TemplateFamily family = templates::TemplateFamily::kChatml;
  bool family_detected = false;  // false: fell back to ChatML

  static Result<std::unique_ptr<LoadedModel>> Load(Env* env, const std::string& path,
                                                   const ModelLoadOptions& options);

  // Renders `messages` with the model's template and tokenizes the result
  // (special tokens parsed, BOS added when the model asks for it).
  Result<std::vector<int32_t>> EncodeChat(const std::vector<templates::ChatMessage>& messages,
                                          const templates::RenderOptions& options) const;
  // Where the messages of a prompt made by EncodeChat begin (token
  // positions, ascending): the positions of the family's message markers
  // (templates::MessageStartMarkers), without the generation prompt's own
  // when `generation_prompt` (its position goes to *reply_start when given,
  // 0 when the family's generation prompt has no marker). Empty when the vocabulary has no single token
  // for the markers. A marker typed inside a message counts as a start too;
  // the positions only guide where hybrid models keep snapshots, never what
  // a reply is.
  std::vector<int64_t> MessageStarts(std::span<const int32_t> prompt,
                                     bool generation_prompt = true,
                                     int64_t* reply_start = nullptr) const;
};

}  // namespace mx::engine
