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

// DeepSeek (llama.cpp's regex sets, applied one after another). deepseek-llm
// names its letters as explicit ranges (cased letters only: Latin, Greek,
// Cyrillic, Armenian, Georgian, Cherokee, ...), and CJK / Hangul runs apart.
#define MX_DS_CJK "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
constexpr const char* kNewline = "[\\r\\n]";
constexpr const char* kDsLlmLetters = "[" MX_WS "]?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+";
constexpr const char* kDsLlmPunct =
    "[" MX_WS "]?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+";
constexpr const char* kTrailingSpace = "[" MX_WS "]+\\z";
constexpr const char* kDsCjk = MX_DS_CJK;
constexpr const char* kDsCoderLetters = "[" MX_WS "]?\\p{L}+";
constexpr const char* kDsCoderPunct = "[" MX_WS "]?\\p{P}+";
// deepseek-v3: digits in threes, CJK and kana runs, then a Llama-3-like split
// where a word may follow one ASCII punctuation mark and marks join words.
constexpr const char* kDs3Digits = "\\p{N}{1,3}";
constexpr const char* kDs3Cjk = "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+";
constexpr const char* kDs3Main =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\\r\\n]*|[" MX_WS "]*[\\r\\n]+|[" MX_WS "]+(?![^" MX_WS "])|[" MX_WS "]+";
#undef MX_DS_CJK

// tekken (Mistral) and gpt-4o (also llama4): words split at case changes
// ("CamelCase" -> "Camel", "Case"), as llama.cpp rewrites their
// tokenizer.json regexes: a letter counts as upper case when it is not
// ASCII a-z, as lower case when it is not ASCII A-Z.
constexpr const char* kTekken =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^" MX_WS "\\p{L}\\p{N}]+[\\r\\n/]*|[" MX_WS "]*[\\r\\n]+|[" MX_WS "]+(?![^" MX_WS "])|[" MX_WS "]+";
constexpr const char* kGpt4o =
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^" MX_WS "\\p{L}\\p{N}]+[\\r\\n/]*|[" MX_WS "]*[\\r\\n]+|[" MX_WS "]+(?![^" MX_WS "])|[" MX_WS "]+";
// poro, bloom, gpt3-finnish (and viking, which then splits digits): runs of
// anything but whitespace and sentence punctuation, with one leading space.
constexpr const char* kPoro = " ?[^(" MX_WS "|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+";
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
    case PreType::kDeepseekLlm:
      return {kNewline, kDsLlmLetters, kDsLlmPunct, kTrailingSpace, kDsCjk, kDigitRun};
    case PreType::kDeepseekCoder:
      return {kNewline, kDsCoderLetters, kDsCoderPunct, kDsCjk, kDigit};
    case PreType::kDeepseek3: return {kDs3Digits, kDs3Cjk, kDs3Main};
    case PreType::kTekken: return {kTekken};
    case PreType::kGpt4o: return {kGpt4o};
    case PreType::kPoro: return {kPoro};
    case PreType::kViking: return {kPoro, kDigit};
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
constexpr PreConfig kDeepseekLlmCfg{PreType::kDeepseekLlm, false, false};
constexpr PreConfig kDeepseekCoderCfg{PreType::kDeepseekCoder, false, false};
constexpr PreConfig kDeepseek3Cfg{PreType::kDeepseek3, false, false};
constexpr PreConfig kTekkenCfg{PreType::kTekken, /*ignore_merges=*/true, /*add_bos=*/true};
constexpr PreConfig kGpt4oCfg{PreType::kGpt4o, false, false};
constexpr PreConfig kPoroCfg{PreType::kPoro, false, false};
constexpr PreConfig kVikingCfg{PreType::kViking, false, false};

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
    NameEntry{"deepseek-llm", kDeepseekLlmCfg},
    NameEntry{"deepseek-coder", kDeepseekCoderCfg},
    NameEntry{"deepseek-v3", kDeepseek3Cfg},
    NameEntry{"hunyuan-dense", kDeepseek3Cfg},
    NameEntry{"joyai-llm", kDeepseek3Cfg},
    NameEntry{"chatglm-bpe", kLlama3RegexOnly},
    NameEntry{"glm4", kLlama3RegexOnly},
    NameEntry{"tekken", kTekkenCfg},
    NameEntry{"gpt-4o", kGpt4oCfg},
    NameEntry{"llama4", kGpt4oCfg},
    NameEntry{"minimax-m2", kGpt4oCfg},
    NameEntry{"kanana2", kGpt4oCfg},
    NameEntry{"poro-chat", kPoroCfg},
    NameEntry{"bloom", kPoroCfg},
    NameEntry{"gpt3-finnish", kPoroCfg},
    NameEntry{"viking", kVikingCfg},
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
    case PreType::kDeepseekLlm: return "deepseek-llm";
    case PreType::kDeepseekCoder: return "deepseek-coder";
    case PreType::kDeepseek3: return "deepseek-v3";
    case PreType::kTekken: return "tekken";
    case PreType::kGpt4o: return "gpt-4o";
    case PreType::kPoro: return "poro";
    case PreType::kViking: return "viking";
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
