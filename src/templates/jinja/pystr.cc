#include "templates/jinja/pystr.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace mx::jinja::py {
namespace {

constexpr char32_t kReplacement = 0xFFFD;

// Decodes one code point at `i`, advancing `i`; invalid sequences yield U+FFFD
// and consume one byte.
char32_t DecodeOne(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int len = 0;
  char32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
  } else {
    ++i;
    return kReplacement;
  }
  if (i + len > s.size()) {
    ++i;
    return kReplacement;
  }
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return kReplacement;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  const bool overlong =
      (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++i;
    return kReplacement;
  }
  i += len;
  return cp;
}

// A pair range where upper and lower case alternate: even code points are
// upper case when `even_upper`.
struct AltRange {
  char32_t first, last;
  bool even_upper;
};
constexpr AltRange kAltRanges[] = {
    {0x0100, 0x012F, true},  {0x0132, 0x0137, true},  {0x0139, 0x0148, false},
    {0x014A, 0x0177, true},  {0x0179, 0x017E, false}, {0x01A0, 0x01A5, true},
    {0x01DE, 0x01EF, true},  {0x01F8, 0x021F, true},  {0x0222, 0x0233, true},
    {0x03D8, 0x03EF, true},  {0x0460, 0x0481, true},  {0x048A, 0x04BF, true},
    {0x04C1, 0x04CE, false}, {0x04D0, 0x052F, true},  {0x1E00, 0x1E95, true},
    {0x1EA0, 0x1EFF, true},
};

// A block of upper case letters whose lower case is at a fixed offset.
struct OffsetRange {
  char32_t first, last;  // upper case
  int32_t delta;         // lower = upper + delta
};
constexpr OffsetRange kOffsetRanges[] = {
    {0x0041, 0x005A, 32}, {0x00C0, 0x00D6, 32}, {0x00D8, 0x00DE, 32}, {0x0391, 0x03A1, 32},
    {0x03A3, 0x03AB, 32}, {0x0388, 0x038A, 37}, {0x0410, 0x042F, 32}, {0x0400, 0x040F, 80},
    {0x0531, 0x0556, 48}, {0xFF21, 0xFF3A, 32}, {0x0386, 0x0386, 38}, {0x038C, 0x038C, 64},
    {0x038E, 0x038F, 63},
};

char32_t LowerOf(char32_t cp) {
  for (const auto& r : kOffsetRanges) {
    if (cp >= r.first && cp <= r.last) return static_cast<char32_t>(cp + r.delta);
  }
  for (const auto& r : kAltRanges) {
    if (cp >= r.first && cp <= r.last) {
      const bool is_upper = ((cp % 2) == 0) == r.even_upper;
      return is_upper ? cp + 1 : cp;
    }
  }
  if (cp == 0x0178) return 0x00FF;
  if (cp == 0x0130) return 'i';
  return cp;
}

char32_t UpperOf(char32_t cp) {
  for (const auto& r : kOffsetRanges) {
    const char32_t lo_first = static_cast<char32_t>(r.first + r.delta);
    const char32_t lo_last = static_cast<char32_t>(r.last + r.delta);
    if (cp >= lo_first && cp <= lo_last) return static_cast<char32_t>(cp - r.delta);
  }
  for (const auto& r : kAltRanges) {
    if (cp >= r.first && cp <= r.last) {
      const bool is_upper = ((cp % 2) == 0) == r.even_upper;
      return is_upper ? cp : cp - 1;
    }
  }
  switch (cp) {
    case 0x00FF:
      return 0x0178;
    case 0x00B5:
      return 0x039C;
    case 0x0131:
      return 'I';
    case 0x017F:
      return 'S';
    case 0x03C2:
      return 0x03A3;
    default:
      return cp;
  }
}

bool InRange(char32_t cp, char32_t lo, char32_t hi) { return cp >= lo && cp <= hi; }

void AppendUpper(std::string& out, char32_t cp) {
  if (cp == 0x00DF) {  // ß
    out += "SS";
    return;
  }
  AppendUtf8(out, ToUpper(cp));
}

bool IsCased(char32_t cp) { return IsUpper(cp) || IsLower(cp); }

}  // namespace

std::u32string Decode(std::string_view utf8) {
  std::u32string out;
  out.reserve(utf8.size());
  size_t i = 0;
  while (i < utf8.size()) out.push_back(DecodeOne(utf8, i));
  return out;
}

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacement;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Encode(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) AppendUtf8(out, cp);
  return out;
}

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const size_t start = i;
    // A real U+FFFD takes three bytes; an invalid sequence decodes as one byte.
    if (DecodeOne(text, i) == kReplacement && i - start == 1) return false;
  }
  return true;
}

size_t CodePointCount(std::string_view utf8) {
  if (IsAscii(utf8)) return utf8.size();
  size_t n = 0, i = 0;
  while (i < utf8.size()) {
    DecodeOne(utf8, i);
    ++n;
  }
  return n;
}

bool IsAscii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

bool IsSpace(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || InRange(cp, 0x2000, 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool IsPrintable(char32_t cp) {
  if (cp < 0x20 || InRange(cp, 0x7F, 0xA0)) return false;
  if (cp < 0x7F) return true;
  if (cp == 0xAD || InRange(cp, 0x0600, 0x0605) || cp == 0x061C || cp == 0x06DD || cp == 0x070F ||
      cp == 0x180E || cp == 0x1680 || InRange(cp, 0x2000, 0x200F) || InRange(cp, 0x2028, 0x202F) ||
      InRange(cp, 0x205F, 0x206F) || cp == 0x3000 || InRange(cp, 0xD800, 0xF8FF) ||
      InRange(cp, 0xFDD0, 0xFDEF) || cp == 0xFEFF || InRange(cp, 0xFFF9, 0xFFFB) ||
      (cp & 0xFFFE) == 0xFFFE || InRange(cp, 0xE0000, 0xE007F) || cp >= 0xF0000) {
    return false;
  }
  return true;
}

bool IsDigit(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return InRange(cp, 0x0660, 0x0669) || InRange(cp, 0x06F0, 0x06F9) ||
         InRange(cp, 0x0966, 0x096F) || InRange(cp, 0xFF10, 0xFF19) || cp == 0xB2 || cp == 0xB3 ||
         cp == 0xB9 || InRange(cp, 0x2070, 0x2079) || InRange(cp, 0x2080, 0x2089);
}

bool IsAlpha(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  if (IsCased(cp) || cp == 0xAA || cp == 0xBA || cp == 0xDF) return true;
  return InRange(cp, 0x0180, 0x024F) || InRange(cp, 0x0370, 0x03FF) ||
         InRange(cp, 0x0400, 0x052F) || InRange(cp, 0x05D0, 0x05EA) ||
         InRange(cp, 0x0620, 0x064A) || InRange(cp, 0x0904, 0x0939) ||
         InRange(cp, 0x0E01, 0x0E30) || InRange(cp, 0x1100, 0x11FF) ||
         InRange(cp, 0x3041, 0x3096) || InRange(cp, 0x30A1, 0x30FA) ||
         InRange(cp, 0x3400, 0x4DBF) || InRange(cp, 0x4E00, 0x9FFF) ||
         InRange(cp, 0xAC00, 0xD7A3) || InRange(cp, 0xF900, 0xFAFF) ||
         InRange(cp, 0x20000, 0x2FA1F);
}

bool IsUpper(char32_t cp) { return LowerOf(cp) != cp; }
bool IsLower(char32_t cp) { return UpperOf(cp) != cp || cp == 0xDF; }
char32_t ToUpper(char32_t cp) { return UpperOf(cp); }
char32_t ToLower(char32_t cp) { return LowerOf(cp); }

std::string Upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (IsAscii(s)) {
    for (char c : s) out.push_back((c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : c);
    return out;
  }
  for (char32_t cp : Decode(s)) AppendUpper(out, cp);
  return out;
}

std::string Lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  if (IsAscii(s)) {
    for (char c : s) out.push_back((c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c);
    return out;
  }
  for (char32_t cp : Decode(s)) {
    if (cp == 0x0130) {
      out += "i\xCC\x87";  // İ lowers to i + combining dot above
      continue;
    }
    AppendUtf8(out, ToLower(cp));
  }
  return out;
}

std::string Title(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool previous_is_cased = false;
  for (char32_t cp : Decode(s)) {
    if (previous_is_cased) {
      AppendUtf8(out, ToLower(cp));
    } else if (cp == 0xDF) {
      out += "Ss";
    } else {
      AppendUtf8(out, ToUpper(cp));
    }
    previous_is_cased = IsCased(cp);
  }
  return out;
}

std::string Capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool first = true;
  for (char32_t cp : Decode(s)) {
    if (first) {
      if (cp == 0xDF) {
        out += "Ss";
      } else {
        AppendUtf8(out, ToUpper(cp));
      }
      first = false;
    } else {
      AppendUtf8(out, ToLower(cp));
    }
  }
  return out;
}

std::string ReprString(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back(quote);
  char buf[16];
  for (char32_t cp : Decode(s)) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      out += buf;
    } else if (cp < 0x7F || IsPrintable(cp)) {
      AppendUtf8(out, cp);
    } else if (cp <= 0xFF) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      out += buf;
    } else if (cp <= 0xFFFF) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      out += buf;
    } else {
      std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(cp));
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

std::string ReprFloat(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));
  std::string out;
  if (!sci.empty() && sci[0] == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  // sci = "d[.ddd]e[+-]xx"
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exp = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+' ? 1 : 0), sci.data() + sci.size(),
                  exp);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int n = static_cast<int>(digits.size());
  if (exp >= -4 && exp < 16) {  // Python's repr switches to exponents outside
    const int decpt = exp + 1;  // digits before the decimal point
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= n) {
      out += digits;
      out.append(static_cast<size_t>(decpt - n), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt));
      out.push_back('.');
      out += digits.substr(static_cast<size_t>(decpt));
    }
    return out;
  }
  out.push_back(digits[0]);
  if (n > 1) {
    out.push_back('.');
    out += digits.substr(1);
  }
  std::snprintf(buf, sizeof(buf), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  out += buf;
  return out;
}

}  // namespace mx::jinja::py
