#include "templates/jinja/pystr.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

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
  switch (cp) {
    case 0x0178:
      return 0x00FF;
    case 0x0130:
      return 'i';
    case 0x01C4:
    case 0x01C5:
      return 0x01C6;  // DŽ Dž -> dž (and LJ, NJ, DZ below)
    case 0x01C7:
    case 0x01C8:
      return 0x01C9;
    case 0x01CA:
    case 0x01CB:
      return 0x01CC;
    case 0x01F1:
    case 0x01F2:
      return 0x01F3;
    default:
      return cp;
  }
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
    case 0x01C5:
    case 0x01C6:
      return 0x01C4;
    case 0x01C8:
    case 0x01C9:
      return 0x01C7;
    case 0x01CB:
    case 0x01CC:
      return 0x01CA;
    case 0x01F2:
    case 0x01F3:
      return 0x01F1;
    default:
      return cp;
  }
}

bool InRange(char32_t cp, char32_t lo, char32_t hi) { return cp >= lo && cp <= hi; }

// Characters whose upper / title case is more than one character.
constexpr const char* kLigatureUpper[] = {"FF", "FI", "FL", "FFI", "FFL", "ST", "ST"};
constexpr const char* kLigatureTitle[] = {"Ff", "Fi", "Fl", "Ffi", "Ffl", "St", "St"};

void AppendUpper(std::string& out, char32_t cp) {
  if (cp == 0x00DF) {  // ß
    out += "SS";
  } else if (cp >= 0xFB00 && cp <= 0xFB06) {
    out += kLigatureUpper[cp - 0xFB00];
  } else {
    AppendUtf8(out, ToUpper(cp));
  }
}

// Title case: the first letter of a word in str.title() / str.capitalize().
void AppendTitle(std::string& out, char32_t cp) {
  if (cp == 0x00DF) {
    out += "Ss";
  } else if (cp >= 0xFB00 && cp <= 0xFB06) {
    out += kLigatureTitle[cp - 0xFB00];
  } else if (cp >= 0x01C4 && cp <= 0x01CC) {
    AppendUtf8(out, cp <= 0x01C6 ? 0x01C5 : cp <= 0x01C9 ? 0x01C8 : 0x01CB);
  } else if (cp >= 0x01F1 && cp <= 0x01F3) {
    AppendUtf8(out, 0x01F2);
  } else {
    AppendUtf8(out, ToUpper(cp));
  }
}

// Blocks of non-letters above ASCII (punctuation, symbols, marks, spaces,
// controls, private use): what IsAlpha treats as not alphabetic. Everything
// else above U+007F counts as a letter, which is right for the scripts chat
// text uses and errs on the side of "letter" for the rest.
struct Range {
  char32_t lo, hi;
};
constexpr Range kNonLetters[] = {
    {0x0080, 0x00A9},   {0x00AB, 0x00B4},   {0x00B6, 0x00B9},   {0x00BB, 0x00BF},
    {0x00D7, 0x00D7},   {0x00F7, 0x00F7},   {0x02C2, 0x02C5},   {0x02D2, 0x02DF},
    {0x02E5, 0x02EB},   {0x02ED, 0x02ED},   {0x02EF, 0x036F},   {0x0374, 0x0375},
    {0x037E, 0x037E},   {0x0384, 0x0385},   {0x0387, 0x0387},   {0x03F6, 0x03F6},
    {0x0482, 0x0489},   {0x055A, 0x055F},   {0x0589, 0x058F},   {0x0591, 0x05C7},
    {0x05F3, 0x05F4},   {0x0600, 0x061F},   {0x064B, 0x065F},   {0x066A, 0x066D},
    {0x06D4, 0x06D4},   {0x06D6, 0x06ED},   {0x0900, 0x0903},   {0x093A, 0x094F},
    {0x0951, 0x0957},   {0x0962, 0x0965},   {0x0970, 0x0970},   {0x0E31, 0x0E31},
    {0x0E34, 0x0E3F},   {0x0E47, 0x0E4F},   {0x1680, 0x1680},   {0x2000, 0x206F},
    {0x20A0, 0x20FF},   {0x2100, 0x2101},   {0x2103, 0x2106},   {0x2108, 0x2109},
    {0x2114, 0x2114},   {0x2116, 0x2118},   {0x211E, 0x2123},   {0x2125, 0x2125},
    {0x2127, 0x2127},   {0x2129, 0x2129},   {0x212E, 0x212E},   {0x213A, 0x213B},
    {0x2140, 0x2144},   {0x214A, 0x214D},   {0x214F, 0x214F},   {0x2190, 0x245F},
    {0x2500, 0x2BFF},   {0x2CE5, 0x2CEA},   {0x2E00, 0x2E7F},   {0x2FF0, 0x3004},
    {0x3008, 0x3020},   {0x302A, 0x3030},   {0x3036, 0x3037},   {0x303D, 0x303F},
    {0x3099, 0x309C},   {0x30A0, 0x30A0},   {0x30FB, 0x30FB},   {0x3200, 0x33FF},
    {0x4DC0, 0x4DFF},   {0xA490, 0xA4CF},   {0xA700, 0xA716},   {0xD800, 0xF8FF},
    {0xFD3E, 0xFD3F},   {0xFE00, 0xFE6F},   {0xFEFF, 0xFEFF},   {0xFF00, 0xFF0F},
    {0xFF1A, 0xFF20},   {0xFF3B, 0xFF40},   {0xFF5B, 0xFF65},   {0xFFE0, 0xFFFF},
    {0x1D000, 0x1D24F}, {0x1F000, 0x1FBFF}, {0xE0000, 0xE01EF}, {0xF0000, 0x10FFFF},
};

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
  if (IsDigit(cp)) return false;
  for (const Range& r : kNonLetters) {
    if (cp >= r.lo && cp <= r.hi) return false;
  }
  return true;
}

bool IsUpper(char32_t cp) { return LowerOf(cp) != cp; }
bool IsLower(char32_t cp) {
  return UpperOf(cp) != cp || cp == 0xDF || (cp >= 0xFB00 && cp <= 0xFB06);  // ß and ligatures
}
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
    } else {
      AppendTitle(out, cp);
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
      AppendTitle(out, cp);
      first = false;
    } else {
      AppendUtf8(out, ToLower(cp));
    }
  }
  return out;
}

namespace {

// The text without Python-whitespace at either end.
std::string_view StripSpace(std::string_view s) {
  const std::u32string cps = Decode(s);
  size_t b = 0, e = cps.size();
  while (b < e && IsSpace(cps[b])) ++b;
  while (e > b && IsSpace(cps[e - 1])) --e;
  const size_t head = Encode(std::u32string_view(cps).substr(0, b)).size();
  const size_t body = Encode(std::u32string_view(cps).substr(b, e - b)).size();
  return s.substr(head, body);
}

int DigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}

// Digits of `base` with single '_' between them, from `i`; appends them to
// `out` and returns how many digits were read (0 if the syntax is broken).
size_t ScanDigits(std::string_view s, size_t& i, int base, std::string& out) {
  size_t n = 0;
  while (i < s.size()) {
    if (DigitValue(s[i]) < base) {
      out.push_back(s[i++]);
      ++n;
    } else if (s[i] == '_' && n > 0 && i + 1 < s.size() && DigitValue(s[i + 1]) < base) {
      ++i;
    } else {
      break;
    }
  }
  return n;
}

}  // namespace

std::optional<double> ParseFloat(std::string_view text) {
  std::string_view s = StripSpace(text);
  std::string clean;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean.push_back(s[i++]);
  std::string word;
  for (size_t k = i; k < s.size(); ++k) word.push_back(static_cast<char>(std::tolower(s[k])));
  if (word == "inf" || word == "infinity") return clean == "-" ? -HUGE_VAL : HUGE_VAL;
  if (word == "nan") return std::nan("");
  const size_t int_digits = ScanDigits(s, i, 10, clean);
  size_t frac_digits = 0;
  if (i < s.size() && s[i] == '.') {
    clean.push_back('.');
    ++i;
    frac_digits = ScanDigits(s, i, 10, clean);
  }
  if (int_digits + frac_digits == 0) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    clean.push_back('e');
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) clean.push_back(s[i++]);
    if (ScanDigits(s, i, 10, clean) == 0) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  return std::strtod(clean.c_str(), nullptr);
}

std::optional<int64_t> ParseInt(std::string_view text, int base, bool* overflow) {
  *overflow = false;
  if (base != 0 && (base < 2 || base > 36)) return std::nullopt;
  std::string_view s = StripSpace(text);
  size_t i = 0;
  bool negative = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) negative = s[i++] == '-';
  const int requested_base = base;
  int prefix_base = 0;
  if (i + 1 < s.size() && s[i] == '0') {
    const char p = static_cast<char>(std::tolower(s[i + 1]));
    prefix_base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
  }
  if (base == 0) base = prefix_base ? prefix_base : 10;
  if (prefix_base && prefix_base == base) {
    i += 2;
    if (i < s.size() && s[i] == '_') ++i;
  }
  std::string digits;
  if (ScanDigits(s, i, base, digits) == 0 || i != s.size()) return std::nullopt;
  // Base 0 refuses leading zeros in a decimal ("010"), as Python does.
  if (requested_base == 0 && prefix_base == 0 && digits.size() > 1 && digits[0] == '0' &&
      digits.find_first_not_of('0') != std::string::npos) {
    return std::nullopt;
  }
  uint64_t v = 0;
  const uint64_t limit = negative ? uint64_t{1} << 63 : (uint64_t{1} << 63) - 1;
  for (char c : digits) {
    const auto d = static_cast<uint64_t>(DigitValue(c));
    if (v > (limit - d) / static_cast<uint64_t>(base)) {
      *overflow = true;
      return std::nullopt;
    }
    v = v * static_cast<uint64_t>(base) + d;
  }
  return negative ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
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
