// Builds a Tokenizer from a GGUF file's tokenizer.* metadata
// (ENGINE-FACTS §1.5, §4.1).
#pragma once

#include <memory>

#include "core/status.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace mx::tokenizer {

// Reads tokenizer.ggml.{model, pre, tokens, token_type, scores, merges,
// *_token_id, add_*} into VocabData. Errors name the key.
Result<VocabData> VocabFromGguf(const gguf::GgufFile& file);
// VocabFromGguf + Tokenizer::Create.
Result<std::unique_ptr<Tokenizer>> TokenizerFromGguf(const gguf::GgufFile& file);

}  // namespace mx::tokenizer
