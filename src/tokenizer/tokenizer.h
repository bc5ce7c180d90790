// Tokenizer: byte-level BPE ("gpt2") and SentencePiece-BPE ("llama")
// tokenization exactly as llama.cpp does it (ENGINE-FACTS §4), built from a
// plain VocabData so that it does not depend on the GGUF reader.
//
//   MX_ASSIGN_OR_RETURN(auto tok, Tokenizer::Create(std::move(vocab_data)));
//   std::vector<int32_t> ids = tok->Encode(prompt, /*add_special=*/true,
//                                          /*parse_special=*/true);
//   Utf8StreamDecoder stream;  // per response
//   send(stream.Push(tok->TokenToPiece(next_id)));
//
// Thread-safety: a Tokenizer is immutable after Create(); all const methods
// may be called concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/utf8.h"

namespace mx::tokenizer {

// GGUF tokenizer.ggml.token_type values (llama.cpp llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// What the GGUF tokenizer.* keys hold. The GGUF adapter fills this; tests
// build it by hand.
struct VocabData {
  std::string model;                // tokenizer.ggml.model: "gpt2" (BPE) or "llama" (SPM)
  std::string pre;                  // tokenizer.ggml.pre: "llama-bpe", "qwen2", "gpt-2", ...
  // general.name: llama.cpp sets a few special tokens' whitespace stripping
  // by model name (Phi-3: whitespace after its special tokens is dropped).
  std::string model_name;
  std::vector<std::string> tokens;  // [n_vocab] id -> text
  std::vector<int32_t> types;       // [n_vocab] id -> TokenType; empty = all normal
  std::vector<float> scores;        // [n_vocab] SPM merge scores; empty = all 0
  std::vector<std::string> merges;  // BPE "left right"; rank = index
  // Special token ids; -1 = key absent. Absent ids take llama.cpp's defaults
  // (SPM: bos 1, eos 2, unk 0; BPE: bos 11, eos 11), which are dropped when
  // out of range. A present but out-of-range id is ignored with a warning.
  int32_t bos_id = -1, eos_id = -1, eot_id = -1, eom_id = -1, unk_id = -1, pad_id = -1;
  // GGUF overrides of tokenizer.ggml.add_bos_token / add_eos_token /
  // add_space_prefix; nullopt = the model type's default.
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

class Tokenizer {
 public:
  // Validates `data` and builds the tokenizer. Errors:
  //  * NotSupported: model is not "gpt2"/"llama", or a BPE pre-tokenizer name
  //    we do not implement (an empty `pre` means "default", with a warning).
  //  * InvalidArgument: no tokens, types/scores shorter than tokens, duplicate
  //    token texts, a merge without "left right" form, add_bos/add_eos set
  //    without a BOS/EOS token.
  // Empty token texts are renamed "[EMPTY_<id>]" as llama.cpp does.
  static Result<std::unique_ptr<Tokenizer>> Create(VocabData data);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids of `text` (any bytes; never fails). add_special: prepend BOS /
  // append EOS when the model asks for it (add_bos()/add_eos()).
  // parse_special: split out CONTROL and UNKNOWN tokens written in the text
  // (USER_DEFINED tokens are always split out). BPE: bytes that are not valid
  // UTF-8 are treated as U+FFFD (see NormalizeUtf8Lenient), so for a vocab
  // with all 256 byte tokens Decode(Encode(s)) == NormalizeUtf8Lenient(s).
  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const;
  // Byte range [begin, end) of a text.
  struct Span {
    size_t begin = 0, end = 0;
  };
  // Encode with parse_special, except that no special token is split out
  // where its text overlaps one of `literal` (ranges of text that came from
  // a user, e.g. a chat message's content: "<|im_end|>" typed in a message
  // stays text and cannot end the turn). USER_DEFINED tokens included.
  // True when `text` contains the text of a CONTROL token (what a template
  // writes around messages: "<|im_end|>", "<|start_header_id|>", ...).
  bool ContainsControlText(std::string_view text) const;
  std::vector<int32_t> EncodeWithLiterals(std::string_view text, bool add_special,
                                          std::span<const Span> literal) const;

  // The raw bytes token `id` stands for (llama.cpp token_to_piece with
  // special = true): BPE normal tokens through the inverse byte map, SPM "▁" ->
  // " " and <0xXX> byte tokens -> that byte; CONTROL, UNKNOWN and
  // USER_DEFINED tokens -> their text; UNUSED/UNDEFINED -> "". Out-of-range
  // id -> "". The bytes may be an incomplete UTF-8 sequence.
  std::string TokenToPiece(int32_t id) const;
  // Concatenated TokenToPiece of `ids` (raw bytes, may be invalid UTF-8). No
  // leading-space removal or space clean-up.
  std::string Decode(std::span<const int32_t> ids) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;  // -1 if none
  int32_t eos_id() const;  // -1 if none
  int32_t eot_id() const;  // -1 if none (auto-detected from the text when absent)
  int32_t eom_id() const;  // -1 if none
  int32_t unk_id() const;  // -1 if none
  int32_t pad_id() const;  // -1 if none
  bool add_bos() const;
  bool add_eos() const;
  bool add_space_prefix() const;  // SPM only
  bool is_spm() const;            // model "llama"
  // End-of-generation: eos, eot, eom and tokens whose text is one of
  // <|eot_id|>, <|im_end|>, <|end|>, <end_of_turn>, <|endoftext|>,
  // <|eom_id|>, <|end_of_text|>, <EOT>, _<EOT>, <|return|>, <|call|>,
  // <end_of_utterance>, plus the FIM pad/repo/file-separator tokens
  // (llama.cpp's list; those tokens are also forced to CONTROL type).
  bool IsEog(int32_t id) const;
  const std::vector<int32_t>& eog_ids() const;  // sorted
  bool IsControl(int32_t id) const;
  // Effective type after llama.cpp's overrides; kUndefined for out-of-range ids.
  TokenType token_type(int32_t id) const;
  // Vocabulary text of `id` ("" if out of range). Valid while *this lives.
  std::string_view TokenText(int32_t id) const;
  std::optional<int32_t> FindToken(std::string_view text) const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mx::tokenizer
