// BPE pre-tokenizer: splits a text fragment into words with the regex set of
// a llama.cpp pre-tokenizer type (ENGINE-FACTS §4.4), using PCRE2 (UTF + UCP,
// compiled and JIT-compiled once).
//
// Splitting semantics (llama.cpp unicode_regex_split): the regexes run in
// order; each one re-splits every piece produced by the previous one, and
// within a piece every match and every unmatched gap between matches becomes a
// piece (nothing is dropped). `\s` is spelled out as llama.cpp's whitespace set
// (U+0009-000D, 0020, 0085, 00A0, 1680, 2000-200A, 2028, 2029, 202F, 205F,
// 3000); \p{L}, \p{M}, \p{N}, \p{P} come from PCRE2's Unicode tables.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace mx::tokenizer::internal {

// The regex sets we implement (llama.cpp LLAMA_VOCAB_PRE_TYPE_*).
enum class PreType {
  kDefault,    // [\p{P}$+<=>^~|]+ , GPT2 , \p{N}+ , [0-9][0-9][0-9]
  kLlama3,     // Llama-3 pattern, \p{N}{1,3}
  kQwen2,      // Llama-3 pattern with single digits
  kQwen35,     // kQwen2 with combining marks (\p{M}) in the letter runs, not in punctuation runs
  kGpt2,       // 's|'t|... ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
  kStarcoder,  // \p{N} , GPT2
  kFalcon,     // [\p{P}$+<=>^~|`]+ , GPT2 , [0-9][0-9][0-9]
  kDeepseekLlm,    // [\r\n] , \s?letters , \s?ASCII/CJK punctuation , \s+$ , CJK/Hangul , \p{N}+
  kDeepseekCoder,  // [\r\n] , \s?\p{L}+ , \s?\p{P}+ , CJK/Hangul , \p{N}
  kDeepseek3,      // \p{N}{1,3} , CJK/kana , Llama-3-like with marks in words
  kTekken,         // words split at case changes, single digits (Mistral tekken)
  kGpt4o,          // kTekken with contractions and \p{N}{1,3} (gpt-4o, llama4)
  kPoro,           // ' ?[^(\s|.,!?…。，、।۔،)]+' (poro, bloom, gpt3-finnish)
  kViking,         // kPoro , \p{N}
};

// What a tokenizer.ggml.pre value implies besides the regexes.
struct PreConfig {
  PreType type;
  bool ignore_merges;  // a word that is itself a vocab entry skips the merges
  bool add_bos;        // llama.cpp's add_bos default for this pre type
};

// Looks up a non-empty tokenizer.ggml.pre name; nullopt if we do not
// implement it.
std::optional<PreConfig> LookupPreType(std::string_view pre);
const char* PreTypeName(PreType type);

class PreTokenizer {
 public:
  // Compiles the regexes of `type`. Fails with Internal if PCRE2 rejects one
  // (a bug, not an input error).
  static Result<std::unique_ptr<PreTokenizer>> Create(PreType type);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Splits `text` into words: *ends receives the end offset (in bytes) of each
  // word, in order; the last one is text.size(). Empty text gives no words.
  // REQUIRES: `text` is well-formed UTF-8 (see NormalizeUtf8Lenient).
  // Thread-safe; never fails (a PCRE2 match error leaves the rest of the
  // piece as one word).
  void Split(std::string_view text, std::vector<size_t>* ends) const;

 private:
  struct Regex;
  PreTokenizer() = default;
  std::vector<std::unique_ptr<Regex>> regexes_;
};

}  // namespace mx::tokenizer::internal
