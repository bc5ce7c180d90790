#include "tokenizer/utf8.h"

#include <cstring>

namespace mx::tokenizer {
namespace {

constexpr char kReplacementUtf8[] = "\xEF\xBF\xBD";

// Length of the run of ASCII bytes starting at `p` (at most n).
size_t AsciiRun(const unsigned char* p, size_t n) {
  size_t i = 0;
  while (i + 8 <= n) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    if (word & 0x8080808080808080ull) break;
    i += 8;
  }
  while (i < n && p[i] < 0x80) ++i;
  return i;
}

enum class StepKind { kChar, kInvalid, kIncomplete };
struct Step {
  StepKind kind;
  size_t len;  // kChar: sequence length; kInvalid: bytes of the ill-formed subpart
};

// One strict (RFC 3629) decoding step at p[0] (REQUIRES: n >= 1). kIncomplete
// means the bytes up to the end of the buffer are a proper prefix of a valid
// sequence.
Step StrictStep(const unsigned char* p, size_t n) {
  const unsigned char b0 = p[0];
  if (b0 < 0x80) return {StepKind::kChar, 1};
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
  } else if (b0 == 0xE0) {
    need = 2, lo = 0xA0;
  } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
    need = 2;
  } else if (b0 == 0xED) {
    need = 2, hi = 0x9F;  // no surrogates
  } else if (b0 == 0xF0) {
    need = 3, lo = 0x90;
  } else if (b0 >= 0xF1 && b0 <= 0xF3) {
    need = 3;
  } else if (b0 == 0xF4) {
    need = 3, hi = 0x8F;  // <= U+10FFFF
  } else {
    return {StepKind::kInvalid, 1};  // 80..C1, F5..FF
  }
  for (size_t i = 1; i <= need; ++i) {
    if (i >= n) return {StepKind::kIncomplete, i};
    const unsigned char c = p[i];
    const unsigned char min = (i == 1) ? lo : 0x80;
    const unsigned char max = (i == 1) ? hi : 0xBF;
    if (c < min || c > max) return {StepKind::kInvalid, i};
  }
  return {StepKind::kChar, need + 1};
}

}  // namespace

bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    i += AsciiRun(p + i, n - i);
    if (i >= n) break;
    const Step step = StrictStep(p + i, n - i);
    if (step.kind != StepKind::kChar) return false;
    i += step.len;
  }
  return true;
}

void AppendUtf8(uint32_t cpt, std::string* out) {
  if (cpt < 0x80) {
    out->push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | ((cpt >> 18) & 0x07)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

LenientChar DecodeLenient(std::string_view s, size_t pos) {
  constexpr LenientChar kInvalid{kReplacementChar, 1, false};
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
  const size_t n = s.size() - pos;
  const unsigned char b0 = p[0];
  auto is_cont = [&](size_t i) { return i < n && (p[i] & 0xC0) == 0x80; };
  if (!(b0 & 0x80)) return {b0, 1, true};
  if (!(b0 & 0x40)) return kInvalid;
  if (!(b0 & 0x20)) {
    if (!is_cont(1)) return kInvalid;
    return {(uint32_t(b0 & 0x1F) << 6) | (p[1] & 0x3F), 2, true};
  }
  if (!(b0 & 0x10)) {
    if (!is_cont(1) || !is_cont(2)) return kInvalid;
    return {(uint32_t(b0 & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F), 3,
            true};
  }
  if (!(b0 & 0x08)) {
    if (!is_cont(1) || !is_cont(2) || !is_cont(3)) return kInvalid;
    const uint32_t cpt = (uint32_t(b0 & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) |
                         (uint32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    // llama.cpp throws when re-encoding these; we treat the lead byte as invalid.
    if (cpt > 0x10FFFF) return kInvalid;
    return {cpt, 4, true};
  }
  return kInvalid;
}

std::string NormalizeUtf8Lenient(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = 0;
  while (i < s.size()) {
    const size_t run = AsciiRun(p + i, s.size() - i);
    out.append(s.data() + i, run);
    i += run;
    if (i >= s.size()) break;
    const LenientChar c = DecodeLenient(s, i);
    AppendUtf8(c.cpt, &out);
    i += c.len;
  }
  return out;
}

std::string Utf8StreamDecoder::Push(std::string_view bytes) {
  std::string joined;
  std::string_view buf = bytes;
  if (!pending_.empty()) {
    joined = pending_;
    joined.append(bytes);
    buf = joined;
    pending_.clear();
  }
  std::string out;
  out.reserve(buf.size());
  const auto* p = reinterpret_cast<const unsigned char*>(buf.data());
  const size_t n = buf.size();
  size_t i = 0;
  while (i < n) {
    const size_t run = AsciiRun(p + i, n - i);
    out.append(buf.data() + i, run);
    i += run;
    if (i >= n) break;
    const Step step = StrictStep(p + i, n - i);
    switch (step.kind) {
      case StepKind::kChar:
        out.append(buf.data() + i, step.len);
        i += step.len;
        break;
      case StepKind::kInvalid:
        out.append(kReplacementUtf8);
        i += step.len;
        break;
      case StepKind::kIncomplete:
        pending_.assign(buf.data() + i, n - i);
        i = n;
        break;
    }
  }
  return out;
}

std::string Utf8StreamDecoder::Flush() {
  // pending_ only ever holds a proper prefix of one valid sequence, i.e. a
  // single maximal ill-formed subpart once the stream ends.
  std::string out = pending_.empty() ? std::string() : std::string(kReplacementUtf8);
  pending_.clear();
  return out;
}

}  // namespace mx::tokenizer
