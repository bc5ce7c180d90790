#include "tokenizer/pre_tokenizer.h"

#include <array>
#include <string>
#include <utility>

#include "core/logging.h"

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

namespace mx::tokenizer::internal {
namespace {

// llama.cpp's whitespace set (unicode-data: White_Space), as the body of a
// character class. Used instead of \s, whose PCRE2 UCP meaning also covers
// U+180E.
#define MX_WS "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

// Contractions spelled without (?i): under UCP caseless matching PCRE2 would
// also fold U+017F and U+212A, which llama.cpp does not.
#define MX_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

// Llama-3 split regex with two parameters: DIGITS, the digit run, and WORD,
// the body of the character class whose runs make a word. WORD is also left
// out of the punctuation runs. The optional character before a word is
// [^\r\n\p{L}\p{N}] in every variant (qwen35's regex adds \p{M} to the word
// and punctuation classes only).
#define MX_LLAMA3(DIGITS, WORD)                                                                  \
  MX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[" WORD "]+|" DIGITS "| ?[^" MX_WS WORD                \
                  "\\p{N}]+[\\r\\n]*|[" MX_WS "]*[\\r\\n]+|[" MX_WS "]+(?![^" MX_WS "])|[" MX_WS \
                  "]+"

// Letters only (llama3, qwen2), or letters with combining marks (qwen35), so
// that a mark stays in the word of its base letter instead of starting a
// punctuation run.
#define MX_LETTERS "\\p{L}"
#define MX_LETTERS_AND_MARKS "\\p{L}\\p{M}"

constexpr const char* kLlama3 = MX_LLAMA3("\\p{N}{1,3}", MX_LETTERS);
constexpr const char* kQwen2 = MX_LLAMA3("\\p{N}", MX_LETTERS);
constexpr const char* kQwen35 = MX_LLAMA3("\\p{N}", MX_LETTERS_AND_MARKS);
constexpr const char* kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" MX_WS
                              "\\p{L}\\p{N}]+|[" MX_WS "]+(?![^" MX_WS "])";
constexpr const char* kDefaultPunct = "[\\p{P}\\$\\+<=>\\^~\\|]+";
constexpr const char* kFalconPunct = "[\\p{P}\\$\\+<=>\\^~\\|`]+";
constexpr const char* kDigitRun = "\\p{N}+";
constexpr const char* kDigit = "\\p{N}";
constexpr const char* kThreeAsciiDigits = "[0-9][0-9][0-9]";

#undef MX_LETTERS_AND_MARKS
#undef MX_LETTERS
#undef MX_LLAMA3
#undef MX_CONTRACTIONS
#undef MX_WS

std::vector<const char*> PatternsFor(PreType type) {
  switch (type) {
    case PreType::kLlama3: return {kLlama3};
    case PreType::kQwen2: return {kQwen2};
    case PreType::kQwen35: return {kQwen35};
    case PreType::kGpt2: return {kGpt2};
    case PreType::kStarcoder: return {kDigit, kGpt2};
    case PreType::kFalcon: return {kFalconPunct, kGpt2, kThreeAsciiDigits};
    case PreType::kDefault: break;
  }
  return {kDefaultPunct, kGpt2, kDigitRun, kThreeAsciiDigits};
}

struct NameEntry {
  const char* name;
  PreConfig config;
};

// tokenizer.ggml.pre values whose llama.cpp regex set we implement
// (src/llama-vocab.cpp at the reference commit).
constexpr PreConfig kLlama3Cfg{PreType::kLlama3, /*ignore_merges=*/true, /*add_bos=*/true};
constexpr PreConfig kLlama3RegexOnly{PreType::kLlama3, false, false};
constexpr PreConfig kQwen2Cfg{PreType::kQwen2, false, false};
constexpr PreConfig kQwen35Cfg{PreType::kQwen35, false, false};
constexpr PreConfig kGpt2Cfg{PreType::kGpt2, false, false};
constexpr PreConfig kStarcoderCfg{PreType::kStarcoder, false, false};
constexpr PreConfig kFalconCfg{PreType::kFalcon, false, false};
constexpr PreConfig kDefaultCfg{PreType::kDefault, false, false};

constexpr std::array kNames = {
    NameEntry{"default", kDefaultCfg},
    NameEntry{"llama3", kLlama3Cfg},
    NameEntry{"llama-v3", kLlama3Cfg},
    NameEntry{"llama-bpe", kLlama3Cfg},
    NameEntry{"falcon3", kLlama3Cfg},
    NameEntry{"falcon-h1", kLlama3Cfg},
    NameEntry{"pixtral", kLlama3Cfg},
    NameEntry{"midm-2.0", kLlama3Cfg},
    NameEntry{"lfm2", kLlama3Cfg},
    NameEntry{"jina-v5-nano", kLlama3Cfg},
    NameEntry{"dbrx", kLlama3RegexOnly},
    NameEntry{"smaug-bpe", kLlama3RegexOnly},
    NameEntry{"qwen2", kQwen2Cfg},
    NameEntry{"deepseek-r1-qwen", kQwen2Cfg},
    NameEntry{"megrez", kQwen2Cfg},
    NameEntry{"stablelm2", kQwen2Cfg},
    NameEntry{"hunyuan", kQwen2Cfg},
    NameEntry{"grok-2", kQwen2Cfg},
    NameEntry{"solar-open", kQwen2Cfg},
    NameEntry{"kormo", kQwen2Cfg},
    NameEntry{"f2llmv2", kQwen2Cfg},
    NameEntry{"qwen35", kQwen35Cfg},
    NameEntry{"gpt-2", kGpt2Cfg},
    NameEntry{"phi-2", kGpt2Cfg},
    NameEntry{"jina-es", kGpt2Cfg},
    NameEntry{"jina-de", kGpt2Cfg},
    NameEntry{"gigachat", kGpt2Cfg},
    NameEntry{"jina-v2-es", kGpt2Cfg},
    NameEntry{"jina-v2-de", kGpt2Cfg},
    NameEntry{"jina-v1-en", kGpt2Cfg},
    NameEntry{"jina-v2-code", kGpt2Cfg},
    NameEntry{"roberta-bpe", kGpt2Cfg},
    NameEntry{"a.x-4.0", kGpt2Cfg},
    NameEntry{"mellum", kGpt2Cfg},
    NameEntry{"exaone4", kGpt2Cfg},
    NameEntry{"mpt", kGpt2Cfg},
    NameEntry{"olmo", kGpt2Cfg},
    NameEntry{"jais", kGpt2Cfg},
    NameEntry{"trillion", kGpt2Cfg},
    NameEntry{"granite-docling", kGpt2Cfg},
    NameEntry{"modern-bert", kGpt2Cfg},
    NameEntry{"starcoder", kStarcoderCfg},
    NameEntry{"refact", kStarcoderCfg},
    NameEntry{"command-r", kStarcoderCfg},
    NameEntry{"smollm", kStarcoderCfg},
    NameEntry{"codeshell", kStarcoderCfg},
    NameEntry{"exaone", kStarcoderCfg},
    NameEntry{"minerva-7b", kStarcoderCfg},
    NameEntry{"mellum2", kStarcoderCfg},
    NameEntry{"falcon", kFalconCfg},
};

}  // namespace

std::optional<PreConfig> LookupPreType(std::string_view pre) {
  for (const NameEntry& e : kNames) {
    if (pre == e.name) return e.config;
  }
  return std::nullopt;
}

const char* PreTypeName(PreType type) {
  switch (type) {
    case PreType::kDefault: return "default";
    case PreType::kLlama3: return "llama3";
    case PreType::kQwen2: return "qwen2";
    case PreType::kQwen35: return "qwen35";
    case PreType::kGpt2: return "gpt2";
    case PreType::kStarcoder: return "starcoder";
    case PreType::kFalcon: return "falcon";
  }
  return "?";
}

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() { pcre2_code_free(code); }

  // Splits text[begin, end) by this regex, appending absolute word ends.
  void SplitPiece(std::string_view text, size_t begin, size_t end, pcre2_match_data* md,
                  std::vector<size_t>* ends) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + begin);
    const size_t len = end - begin;
    size_t pos = 0;       // where the next search starts
    size_t emitted = 0;   // end of the last emitted piece
    while (pos < len) {
      int rc = pcre2_match(code, subject, len, pos, PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
        // JIT stack or other resource limit: retry with the interpreter.
        rc = pcre2_match(code, subject, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                         nullptr);
      }
      if (rc < 0) {
        if (rc != PCRE2_ERROR_NOMATCH) {
          MX_LOG(kWarn) << "pre-tokenizer: PCRE2 match error " << rc << " at byte "
                        << begin + pos << "; keeping the rest of the piece as one word";
        }
        break;
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const size_t match_begin = ov[0];
      const size_t match_end = ov[1];
      if (match_begin > emitted) ends->push_back(begin + match_begin);  // unmatched gap
      if (match_end > match_begin) {
        ends->push_back(begin + match_end);
        emitted = match_end;
        pos = match_end;
      } else {
        // Empty match (none of our patterns can produce one): step one character;
        // the text stepped over stays part of the next gap.
        pos = match_end + 1;
        while (pos < len && (subject[pos] & 0xC0) == 0x80) ++pos;
      }
    }
    if (emitted < len) ends->push_back(end);
  }
};

PreTokenizer::~PreTokenizer() = default;

Result<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(PreType type) {
  std::unique_ptr<PreTokenizer> pre(new PreTokenizer());
  for (const char* pattern : PatternsFor(type)) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_UCP, &error, &error_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      return Status::Internal(std::string("pre-tokenizer '") + PreTypeName(type) +
                              "': PCRE2 rejected pattern at offset " +
                              std::to_string(error_offset) + ": " +
                              reinterpret_cast<const char*>(message));
    }
    // JIT is an optimisation only; pcre2_match falls back to the interpreter.
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    auto regex = std::make_unique<Regex>();
    regex->code = code;
    pre->regexes_.push_back(std::move(regex));
  }
  return pre;
}

void PreTokenizer::Split(std::string_view text, std::vector<size_t>* ends) const {
  ends->clear();
  if (text.empty()) return;
  ends->push_back(text.size());
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  if (md == nullptr) return;  // out of memory: the whole text stays one word
  std::vector<size_t> next;
  for (const auto& regex : regexes_) {
    next.clear();
    next.reserve(text.size() / 3 + 1);
    size_t begin = 0;
    for (size_t end : *ends) {
      regex->SplitPiece(text, begin, end, md, &next);
      begin = end;
    }
    ends->swap(next);
  }
  pcre2_match_data_free(md);
}

}  // namespace mx::tokenizer::internal
