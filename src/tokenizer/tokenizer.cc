#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <array>
#include <limits>
#include <utility>

#include "core/logging.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_map.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/spm.h"
#include "tokenizer/token_index.h"

namespace mx::tokenizer {

using internal::BpeWordEncoder;
using internal::ByteMap;
using internal::MergeRanks;
using internal::PreConfig;
using internal::PreTokenizer;
using internal::PreType;
using internal::SpmEncoder;
using internal::SpmModel;
using internal::TokenIndex;

namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 "▁"

// Token texts llama.cpp recognises when the GGUF does not name the token
// (llama-vocab.cpp "auto-detect special tokens by text"). Each detected token
// is forced to CONTROL. Where llama.cpp takes whichever its hash map yields
// first, we take the first text of the list that exists.
constexpr std::array<std::string_view, 10> kEotTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>",  "<end_of_turn>",      "<|endoftext|>",
    "<|end_of_text|>", "<EOT>", "_<EOT>", "<\xEF\xBD\x9C""end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<end_of_utterance>"};
constexpr std::array<std::string_view, 1> kEomTexts = {"<|eom_id|>"};
constexpr std::array<std::string_view, 8> kFimPreTexts = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C""fim\xE2\x96\x81""begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"};
constexpr std::array<std::string_view, 8> kFimSufTexts = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C""fim\xE2\x96\x81hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"};
constexpr std::array<std::string_view, 8> kFimMidTexts = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C""fim\xE2\x96\x81""end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"};
constexpr std::array<std::string_view, 4> kFimPadTexts = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>",
                                                          "<PAD>"};
constexpr std::array<std::string_view, 5> kFimRepTexts = {"<|fim_repo|>", "<|repo_name|>",
                                                          "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::array<std::string_view, 1> kFimSepTexts = {"<|file_sep|>"};
// Always end-of-generation (and forced to CONTROL).
constexpr std::array<std::string_view, 12> kEogTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>",  "<|return|>",      "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>"};
// gpt-oss: always rendered, split out even without parse_special.
constexpr std::array<std::string_view, 4> kForcedUserDefined = {"<|channel|>", "<|message|>",
                                                                "<|start|>", "<|constrain|>"};

bool IsSpecialType(TokenType t) {
  return t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown;
}

TokenType TypeFromInt(int32_t v) {
  return (v >= 0 && v <= 6) ? static_cast<TokenType>(v) : TokenType::kUndefined;
}

// Byte of an SPM "<0xXX>" token as llama.cpp's token_to_byte: strtol over the
// (at most two) characters at offset 3; non-hex stops the parse. nullopt when
// the text is too short to have offset 3 (llama.cpp would throw).
std::optional<char> ParseByteToken(std::string_view text) {
  if (text.size() < 3) return std::nullopt;
  int value = 0;
  for (size_t i = 3; i < std::min<size_t>(text.size(), 5); ++i) {
    const char c = text[i];
    int digit;
    if (c >= '0' && c <= '9') digit = c - '0';
    else if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    else break;
    value = value * 16 + digit;
  }
  return static_cast<char>(value);
}

// Replaces every " " in `text` by "▁", appending to *out.
void AppendEscapedSpaces(std::string_view text, std::string* out) {
  size_t start = 0;
  for (size_t pos; (pos = text.find(' ', start)) != std::string_view::npos; start = pos + 1) {
    out->append(text.substr(start, pos - start));
    out->append(kSpmSpace);
  }
  out->append(text.substr(start));
}

}  // namespace

struct Tokenizer::Impl {
  bool spm = false;
  PreConfig pre_config{PreType::kDefault, false, false};
  std::vector<std::string> texts;   // [n_vocab]
  std::vector<TokenType> types;     // [n_vocab] after llama.cpp's overrides
  std::vector<float> scores;        // [n_vocab]
  std::vector<std::string> merges;  // BPE only; MergeRanks keys point here
  TokenIndex index;
  MergeRanks ranks;
  std::unique_ptr<PreTokenizer> pre;
  SpmModel spm_model;
  std::vector<int32_t> special_order;  // CONTROL/USER_DEFINED/UNKNOWN, longest text first
  // [n_vocab] llama.cpp's LSTRIP / RSTRIP token attributes: a matched special
  // token swallows the whitespace before / after it (kLstrip | kRstrip bits).
  std::vector<uint8_t> strip;
  static constexpr uint8_t kLstrip = 1, kRstrip = 2;
  void SetStripAttributes(const VocabData& data);
  std::vector<std::string> pieces;     // [n_vocab] TokenToPiece cache
  std::vector<int32_t> eog_ids;        // sorted
  int32_t bos = -1, eos = -1, eot = -1, eom = -1, unk = -1, pad = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false;

  int32_t n_vocab() const { return static_cast<int32_t>(texts.size()); }
  bool InRange(int32_t id) const { return id >= 0 && id < n_vocab(); }

  // A piece of the input: a special token (token >= 0) or raw text.
  struct Fragment {
    int32_t token;
    size_t offset;
    size_t length;
  };
  void PartitionSpecial(std::string_view text, bool parse_special,
                        std::vector<Fragment>* fragments,
                        std::span<const Tokenizer::Span> literal = {}) const;
  std::vector<int32_t> EncodeFragments(std::string_view text, bool add_special,
                                       const std::vector<Fragment>& fragments) const;
  void EncodeBpeText(std::string_view raw, BpeWordEncoder* encoder,
                     std::vector<int32_t>* out) const;
  std::string ComputePiece(int32_t id) const;
  // First id among `candidates` texts, or -1.
  template <size_t N>
  int32_t FindFirst(const std::array<std::string_view, N>& candidates) const {
    for (std::string_view text : candidates) {
      const int32_t id = index.Find(text);
      if (id >= 0) return id;
    }
    return -1;
  }
  Status ApplySpecialTokens(const VocabData& data);
  void DetectSpecialTokensByText();
};

// --- construction ----------------------------------------------------------

Status Tokenizer::Impl::ApplySpecialTokens(const VocabData& data) {
  // llama.cpp defaults, dropped when out of range.
  auto in_range_or_null = [&](int32_t id) { return InRange(id) ? id : -1; };
  bos = in_range_or_null(spm ? 1 : 11);
  eos = in_range_or_null(spm ? 2 : 11);
  unk = spm ? in_range_or_null(0) : -1;
  struct Override {
    const char* name;
    int32_t given;
    int32_t* slot;
  };
  const Override overrides[] = {{"bos", data.bos_id, &bos}, {"eos", data.eos_id, &eos},
                                {"eot", data.eot_id, &eot}, {"eom", data.eom_id, &eom},
                                {"unk", data.unk_id, &unk}, {"pad", data.pad_id, &pad}};
  for (const Override& o : overrides) {
    if (o.given == -1) continue;
    if (!InRange(o.given)) {
      MX_LOG(kWarn) << "tokenizer: " << o.name << " token id " << o.given
                    << " is outside the vocabulary [0, " << n_vocab() << "); using "
                    << *o.slot;
      continue;
    }
    *o.slot = o.given;
  }
  if (add_bos && bos < 0) {
    return Status::InvalidArgument("tokenizer: add_bos_token is true but there is no BOS token");
  }
  if (add_eos && eos < 0) {
    return Status::InvalidArgument("tokenizer: add_eos_token is true but there is no EOS token");
  }
  return Status::Ok();
}

void Tokenizer::Impl::DetectSpecialTokensByText() {
  auto force_control = [&](int32_t id) {
    if (id >= 0 && types[id] != TokenType::kControl) {
      MX_LOG(kDebug) << "tokenizer: control-looking token " << id << " '" << texts[id]
                     << "' was not control-type; overriding";
      types[id] = TokenType::kControl;
    }
  };
  if (eot < 0) eot = FindFirst(kEotTexts);
  force_control(eot);
  if (eom < 0) eom = FindFirst(kEomTexts);
  force_control(eom);
  for (int32_t id : {FindFirst(kFimPreTexts), FindFirst(kFimSufTexts), FindFirst(kFimMidTexts)}) {
    force_control(id);
  }
  std::vector<int32_t> eog;
  for (int32_t id : {FindFirst(kFimPadTexts), FindFirst(kFimRepTexts), FindFirst(kFimSepTexts)}) {
    force_control(id);
    if (id >= 0) eog.push_back(id);
  }
  for (std::string_view text : kEogTexts) {
    const int32_t id = index.Find(text);
    if (id < 0) continue;
    force_control(id);
    eog.push_back(id);
  }
  for (std::string_view text : kForcedUserDefined) {
    const int32_t id = index.Find(text);
    if (id >= 0) types[id] = TokenType::kUserDefined;
  }
  for (int32_t id : {eos, eot, eom}) {
    if (id >= 0) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());

  // o200k_harmony (gpt-oss): with <|return|> and <|call|> present, <|end|>
  // only ends a message, not the generation.
  auto in_eog = [&](std::string_view text) {
    const int32_t id = index.Find(text);
    return id >= 0 && std::binary_search(eog.begin(), eog.end(), id);
  };
  const int32_t end_id = index.Find("<|end|>");
  if (in_eog("<|end|>") && in_eog("<|return|>") && in_eog("<|call|>")) {
    eog.erase(std::find(eog.begin(), eog.end(), end_id));
    types[end_id] = TokenType::kUserDefined;
  }
  eog_ids = std::move(eog);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::Create(VocabData data) {
  auto impl = std::make_unique<Impl>();
  Impl& t = *impl;

  // Model type and its llama.cpp defaults.
  if (data.model == "llama") {
    t.spm = true;
    t.add_bos = true;
    t.add_space_prefix = true;
  } else if (data.model == "gpt2") {
    t.spm = false;
  } else {
    return Status::NotSupported("tokenizer model '" + data.model +
                                "' is not supported (expected 'gpt2' or 'llama')");
  }

  // Tokens, types, scores.
  const size_t n = data.tokens.size();
  if (n == 0) return Status::InvalidArgument("tokenizer: vocabulary has no tokens");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument("tokenizer: vocabulary has " + std::to_string(n) +
                                   " tokens, more than int32 ids can address");
  }
  if (!data.types.empty() && data.types.size() < n) {
    return Status::InvalidArgument("tokenizer: token_type has " +
                                   std::to_string(data.types.size()) + " entries, expected " +
                                   std::to_string(n));
  }
  if (!data.scores.empty() && data.scores.size() < n) {
    return Status::InvalidArgument("tokenizer: scores has " + std::to_string(data.scores.size()) +
                                   " entries, expected " + std::to_string(n));
  }
  t.texts = std::move(data.tokens);
  t.types.resize(n, TokenType::kNormal);
  t.scores.assign(n, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    if (!data.types.empty()) t.types[i] = TypeFromInt(data.types[i]);
    if (!data.scores.empty()) t.scores[i] = data.scores[i];
    if (t.texts[i].empty()) {
      MX_LOG(kWarn) << "tokenizer: empty token at index " << i;
      t.texts[i] = "[EMPTY_" + std::to_string(i) + "]";
    }
  }
  if (auto [first, second] = t.index.Build(t.texts); first >= 0) {
    return Status::InvalidArgument("tokenizer: duplicate token '" + t.texts[second] +
                                   "' has ids " + std::to_string(first) + " and " +
                                   std::to_string(second));
  }

  // BPE: pre-tokenizer and merges.
  if (!t.spm) {
    if (data.pre.empty()) {
      MX_LOG(kWarn) << "tokenizer: missing pre-tokenizer type, using 'default' "
                       "(generation quality may be degraded)";
    } else if (auto config = internal::LookupPreType(data.pre)) {
      t.pre_config = *config;
    } else {
      return Status::NotSupported("tokenizer: pre-tokenizer type '" + data.pre +
                                  "' is not supported");
    }
    t.add_bos = t.pre_config.add_bos;
    MX_ASSIGN_OR_RETURN(t.pre, PreTokenizer::Create(t.pre_config.type));
    t.merges = std::move(data.merges);
    MX_RETURN_IF_ERROR(t.ranks.Build(t.merges));
  }

  // GGUF overrides, special ids, llama.cpp's by-text detection.
  if (data.add_space_prefix) t.add_space_prefix = *data.add_space_prefix;
  if (data.add_bos) t.add_bos = *data.add_bos;
  if (data.add_eos) t.add_eos = *data.add_eos;
  MX_RETURN_IF_ERROR(t.ApplySpecialTokens(data));
  t.DetectSpecialTokensByText();

  // Special-token candidates, longest text first (ties: lower id first).
  for (int32_t id = 0; id < t.n_vocab(); ++id) {
    if (IsSpecialType(t.types[id])) t.special_order.push_back(id);
  }
  std::stable_sort(t.special_order.begin(), t.special_order.end(), [&](int32_t a, int32_t b) {
    return t.texts[a].size() > t.texts[b].size();
  });
  t.SetStripAttributes(data);

  // SPM byte fallback table.
  if (t.spm) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    t.spm_model.vocab = &t.index;
    t.spm_model.scores = &t.scores;
    for (int b = 0; b < 256; ++b) {
      const char hex_name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
      int32_t id = t.index.Find(std::string_view(hex_name, 6));
      if (id < 0) {
        const char raw = static_cast<char>(b);
        id = t.index.Find(std::string_view(&raw, 1));
      }
      t.spm_model.byte_tokens[b] = id >= 0 ? id : t.unk;
    }
  }

  t.pieces.resize(n);
  for (int32_t id = 0; id < t.n_vocab(); ++id) t.pieces[id] = t.ComputePiece(id);

  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(impl)));
}

// --- encoding --------------------------------------------------------------

void Tokenizer::Impl::SetStripAttributes(const VocabData& data) {
  strip.assign(texts.size(), 0);
  std::string name = data.model_name;
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto set = [&](std::string_view text, uint8_t bit, bool on) {
    const int32_t id = index.Find(text);
    if (id < 0) return;
    strip[static_cast<size_t>(id)] = on ? (strip[static_cast<size_t>(id)] | bit)
                                        : (strip[static_cast<size_t>(id)] & ~bit);
  };
  // llama.cpp (llama-vocab.cpp, attributes by model or tokenizer name).
  if (data.pre == "jina-v2-de" || data.pre == "jina-v2-es" || data.pre == "jina-v2-code") {
    set("<mask>", kLstrip, true);
  } else if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (int32_t id : special_order) strip[static_cast<size_t>(id)] |= kRstrip;
    set("</s>", kRstrip, true);
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, kRstrip, false);
  } else if (name.find("modern-bert") != std::string::npos) {
    set("[MASK]", kLstrip, true);
  }
}

void Tokenizer::Impl::PartitionSpecial(std::string_view text, bool parse_special,
                                       std::vector<Fragment>* fragments,
                                       std::span<const Tokenizer::Span> literal) const {
  auto in_literal = [&](size_t begin, size_t end) {
    for (const Tokenizer::Span& s : literal) {
      if (begin < s.end && s.begin < end) return true;
    }
    return false;
  };
  fragments->clear();
  if (text.empty()) return;
  fragments->push_back(Fragment{-1, 0, text.size()});
  if (special_order.empty()) return;

  // Which byte pairs occur in the text: a special token can only match if all
  // of its byte pairs do. Cheap filter for vocabularies with many specials.
  std::vector<uint64_t> pair_seen(65536 / 64, 0);
  std::array<bool, 256> byte_seen{};
  for (size_t i = 0; i < text.size(); ++i) {
    const auto b = static_cast<uint8_t>(text[i]);
    byte_seen[b] = true;
    if (i + 1 < text.size()) {
      const uint32_t pair = (uint32_t(b) << 8) | static_cast<uint8_t>(text[i + 1]);
      pair_seen[pair >> 6] |= uint64_t{1} << (pair & 63);
    }
  }
  auto may_occur = [&](std::string_view s) {
    if (s.size() > text.size() || !byte_seen[static_cast<uint8_t>(s[0])]) return false;
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      const uint32_t pair = (uint32_t(static_cast<uint8_t>(s[i])) << 8) |
                            static_cast<uint8_t>(s[i + 1]);
      if (!(pair_seen[pair >> 6] & (uint64_t{1} << (pair & 63)))) return false;
    }
    return true;
  };

  std::vector<Fragment> next;
  for (int32_t id : special_order) {
    const TokenType type = types[id];
    if (!parse_special && (type == TokenType::kControl || type == TokenType::kUnknown)) continue;
    const std::string_view special = texts[id];
    if (!may_occur(special)) continue;
    next.clear();
    bool changed = false;
    for (const Fragment& f : *fragments) {
      if (f.token >= 0 || f.length < special.size()) {
        next.push_back(f);
        continue;
      }
      // Non-overlapping matches, left to right, inside this fragment only.
      const size_t end = f.offset + f.length;
      const std::string_view window = text.substr(0, end);
      size_t pos = f.offset;
      const uint8_t attr = strip[static_cast<size_t>(id)];
      auto space = [&](size_t i) { return std::isspace(static_cast<unsigned char>(text[i])) != 0; };
      for (size_t match, from = pos;
           (match = window.find(special, from)) != std::string_view::npos;) {
        if (in_literal(match, match + special.size())) {  // user text: stays text
          from = match + 1;
          continue;
        }
        size_t left_end = match;
        if (attr & kLstrip) {
          while (left_end > pos && space(left_end - 1)) --left_end;
        }
        if (left_end > pos) next.push_back(Fragment{-1, pos, left_end - pos});
        next.push_back(Fragment{id, match, special.size()});
        pos = match + special.size();
        if (attr & kRstrip) {
          while (pos < end && space(pos)) ++pos;
        }
        from = pos;
        changed = true;
      }
      if (pos < end) next.push_back(Fragment{-1, pos, end - pos});
    }
    if (changed) fragments->swap(next);
  }
}

void Tokenizer::Impl::EncodeBpeText(std::string_view raw, BpeWordEncoder* encoder,
                                    std::vector<int32_t>* out) const {
  // What llama.cpp's regex split sees: the text decoded leniently (invalid
  // bytes -> U+FFFD, overlong forms -> shortest form). `bytes` is what the
  // words are made of; `match` is the same text with surrogates (which PCRE2
  // cannot take) replaced by U+FFFD - same length, same classes for our
  // patterns, so offsets carry over.
  std::string bytes_storage, match_storage;
  std::string_view bytes = raw, match = raw;
  if (!IsValidUtf8(raw)) {
    bytes_storage.reserve(raw.size() + raw.size() / 2);
    bool has_surrogate = false;
    for (size_t i = 0; i < raw.size();) {
      const LenientChar c = DecodeLenient(raw, i);
      i += c.len;
      AppendUtf8(c.cpt, &bytes_storage);
      has_surrogate |= (c.cpt >= 0xD800 && c.cpt <= 0xDFFF);
    }
    bytes = match = bytes_storage;
    if (has_surrogate) {
      match_storage.reserve(bytes_storage.size());
      for (size_t i = 0; i < bytes_storage.size();) {
        const LenientChar c = DecodeLenient(bytes_storage, i);
        i += c.len;
        AppendUtf8(c.cpt >= 0xD800 && c.cpt <= 0xDFFF ? kReplacementChar : c.cpt,
                   &match_storage);
      }
      match = match_storage;
    }
  }

  std::vector<size_t> ends;
  pre->Split(match, &ends);
  const ByteMap& byte_map = ByteMap::Get();
  std::string mapped;
  size_t begin = 0;
  for (size_t end : ends) {
    mapped.clear();
    byte_map.AppendMapped(bytes.substr(begin, end - begin), &mapped);
    encoder->Encode(mapped, out);
    begin = end;
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<Impl::Fragment> fragments;
  impl_->PartitionSpecial(text, parse_special, &fragments);
  return impl_->EncodeFragments(text, add_special, fragments);
}

bool Tokenizer::ContainsControlText(std::string_view text) const {
  for (int32_t id : impl_->special_order) {
    if (impl_->types[id] == TokenType::kControl && !impl_->texts[id].empty() &&
        text.find(impl_->texts[id]) != std::string_view::npos) {
      return true;
    }
  }
  return false;
}

std::vector<int32_t> Tokenizer::EncodeWithLiterals(std::string_view text, bool add_special,
                                                   std::span<const Span> literal) const {
  std::vector<Impl::Fragment> fragments;
  impl_->PartitionSpecial(text, /*parse_special=*/true, &fragments, literal);
  return impl_->EncodeFragments(text, add_special, fragments);
}

std::vector<int32_t> Tokenizer::Impl::EncodeFragments(std::string_view text, bool add_special,
                                                      const std::vector<Fragment>& fragments) const {
  const Impl& t = *this;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (add_special && t.add_bos && t.bos >= 0) out.push_back(t.bos);

  if (t.spm) {
    SpmEncoder encoder(t.spm_model);
    std::string escaped;
    bool prev_special = true;  // the first fragment gets the prefix space too
    for (const Impl::Fragment& f : fragments) {
      if (f.token >= 0) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      escaped.clear();
      if (t.add_space_prefix && prev_special) escaped.append(kSpmSpace);
      AppendEscapedSpaces(text.substr(f.offset, f.length), &escaped);
      encoder.Encode(escaped, &out);
      prev_special = false;
    }
  } else {
    BpeWordEncoder encoder(t.index, t.ranks, t.pre_config.ignore_merges);
    for (const Impl::Fragment& f : fragments) {
      if (f.token >= 0) {
        out.push_back(f.token);
      } else {
        t.EncodeBpeText(text.substr(f.offset, f.length), &encoder, &out);
      }
    }
  }

  if (add_special && t.add_eos && t.eos >= 0) out.push_back(t.eos);
  return out;
}

// --- decoding --------------------------------------------------------------

std::string Tokenizer::Impl::ComputePiece(int32_t id) const {
  const std::string& text = texts[id];
  const TokenType type = types[id];
  if (IsSpecialType(type)) return text;
  if (type == TokenType::kByte) {
    const std::optional<char> byte = ParseByteToken(text);
    return byte ? std::string(1, *byte) : std::string();
  }
  if (type != TokenType::kNormal) return std::string();  // unused / undefined
  if (!spm) return ByteMap::Get().DecodeTokenText(text);
  std::string piece;
  size_t start = 0;
  for (size_t pos; (pos = text.find(kSpmSpace, start)) != std::string::npos;
       start = pos + kSpmSpace.size()) {
    piece.append(text, start, pos - start);
    piece.push_back(' ');
  }
  piece.append(text, start);
  return piece;
}

std::string Tokenizer::TokenToPiece(int32_t id) const {
  return impl_->InRange(id) ? impl_->pieces[id] : std::string();
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (impl_->InRange(id)) out += impl_->pieces[id];
  }
  return out;
}

// --- accessors -------------------------------------------------------------

int32_t Tokenizer::n_vocab() const { return impl_->n_vocab(); }
int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }
int32_t Tokenizer::eot_id() const { return impl_->eot; }
int32_t Tokenizer::eom_id() const { return impl_->eom; }
int32_t Tokenizer::unk_id() const { return impl_->unk; }
int32_t Tokenizer::pad_id() const { return impl_->pad; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
bool Tokenizer::add_space_prefix() const { return impl_->add_space_prefix; }
bool Tokenizer::is_spm() const { return impl_->spm; }

bool Tokenizer::IsEog(int32_t id) const {
  return std::binary_search(impl_->eog_ids.begin(), impl_->eog_ids.end(), id);
}
const std::vector<int32_t>& Tokenizer::eog_ids() const { return impl_->eog_ids; }

bool Tokenizer::IsControl(int32_t id) const {
  return impl_->InRange(id) && impl_->types[id] == TokenType::kControl;
}

TokenType Tokenizer::token_type(int32_t id) const {
  return impl_->InRange(id) ? impl_->types[id] : TokenType::kUndefined;
}

std::string_view Tokenizer::TokenText(int32_t id) const {
  return impl_->InRange(id) ? std::string_view(impl_->texts[id]) : std::string_view();
}

std::optional<int32_t> Tokenizer::FindToken(std::string_view text) const {
  const int32_t id = impl_->index.Find(text);
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

}  // namespace mx::tokenizer
