// libFuzzer entry point for the tokenizer (tests/fuzz/README.md): the input's
// first byte picks a vocabulary (the reference models' BPE tokenizers:
// llama-bpe with BOS, qwen2 without), the rest is text. Encodes it with and
// without special tokens, then checks what /tokenize and every reply build on:
// every id is in range, every piece is what Decode concatenates, and the
// byte-level vocabularies give the text back (lenient UTF-8: invalid bytes
// read as U+FFFD).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/env.h"
#include "gguf/gguf_file.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

const mx::tokenizer::Tokenizer* Load(const char* name) {
  const std::string path = std::string(MATRICXON_REF_DIR) + "/models/" + name + ".gguf";
  auto file = mx::gguf::GgufFile::Open(mx::Env::Default(), path);
  if (!file.ok()) std::abort();
  auto tok = mx::tokenizer::TokenizerFromGguf(**file);
  if (!tok.ok()) std::abort();
  return tok.value().release();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const mx::tokenizer::Tokenizer* kVocabs[] = {Load("tiny-llama"), Load("tiny-qwen3")};
  if (size == 0) return 0;
  const mx::tokenizer::Tokenizer& tok = *kVocabs[data[0] % 2];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  for (const bool special : {false, true}) {
    const std::vector<int32_t> ids = tok.Encode(text, /*add_special=*/false, special);
    std::string pieces;
    for (int32_t id : ids) {
      if (id < 0 || id >= tok.n_vocab()) std::abort();
      pieces += tok.TokenToPiece(id);
    }
    if (pieces != tok.Decode(ids)) std::abort();
    if (!special && pieces != mx::tokenizer::NormalizeUtf8Lenient(text)) std::abort();
  }
  return 0;
}
