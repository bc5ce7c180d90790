#include "templates/jinja/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "templates/jinja/pystr.h"

namespace mx::jinja {
namespace {

// Byte length of the whitespace character (Python's \s) at `pos`, or 0.
size_t SpaceLen(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  const auto c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) return py::IsSpace(c) ? 1 : 0;
  size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
  if (pos + len > s.size()) return 0;
  const std::u32string cp = py::Decode(s.substr(pos, len));
  return (cp.size() == 1 && py::IsSpace(cp[0])) ? len : 0;
}

size_t SkipSpaces(std::string_view s, size_t pos) {
  while (size_t n = SpaceLen(s, pos)) pos += n;
  return pos;
}

// Python's str.rstrip() on a byte range.
std::string_view RStrip(std::string_view s) {
  const std::u32string cps = py::Decode(s);
  size_t keep = cps.size();
  while (keep > 0 && py::IsSpace(cps[keep - 1])) --keep;
  if (keep == cps.size()) return s;
  // Re-encode length: count bytes of the kept prefix.
  size_t bytes = py::Encode(std::u32string_view(cps).substr(0, keep)).size();
  return s.substr(0, bytes);
}

bool AllSpace(std::string_view s) {
  if (s.empty()) return false;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t n = SpaceLen(s, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }
bool IsDigitChar(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Result<std::vector<Token>> Run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      const size_t start = FindTagStart(pos);
      if (start == std::string::npos) {
        EmitData(pos, std::string_view(src_).substr(pos));
        break;
      }
      const char kind = src_[start + 1];
      const char sign =
          (start + 2 < src_.size() && (src_[start + 2] == '-' || src_[start + 2] == '+'))
              ? src_[start + 2]
              : '\0';
      std::string_view text = std::string_view(src_).substr(pos, start - pos);
      size_t raw_body = 0;
      const bool is_raw = kind == '%' && MatchRawBegin(start, &raw_body);
      text = ApplyLeftStrip(text, sign, kind != '{', line_starting);
      EmitData(pos, text);
      if (is_raw) {
        MX_ASSIGN_OR_RETURN(pos, LexRaw(start, raw_body, &line_starting));
        continue;
      }
      const size_t inner = start + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        MX_ASSIGN_OR_RETURN(pos, SkipComment(start, inner, &line_starting));
        continue;
      }
      MX_ASSIGN_OR_RETURN(pos, LexTag(start, inner, kind == '%', &line_starting));
    }
    Token eof;
    eof.type = TokenType::kEof;
    SetPos(eof, src_.size());
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  void SetPos(Token& t, size_t pos) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    t.line = static_cast<int>(line);
    t.column = static_cast<int>(pos - line_starts_[line - 1] + 1);
  }

  Status Error(size_t pos, const std::string& msg) const {
    Token t;
    SetPos(t, pos);
    return Status::InvalidArgument("line " + std::to_string(t.line) + ": " + msg);
  }

  size_t FindTagStart(size_t pos) const {
    while (true) {
      const size_t p = src_.find('{', pos);
      if (p == std::string::npos || p + 1 >= src_.size()) return std::string::npos;
      const char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') return p;
      pos = p + 1;
    }
  }

  // "{%[-+]?\s*raw\s*(-%}\s*|%})": sets *body to the position after it.
  bool MatchRawBegin(size_t start, size_t* body) const {
    size_t p = start + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = SkipSpaces(src_, p);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p = SkipSpaces(src_, p + 3);
    if (src_.compare(p, 3, "-%}") == 0) {
      *body = SkipSpaces(src_, p + 3);
      return true;
    }
    if (src_.compare(p, 2, "%}") == 0) {
      *body = p + 2;
      return true;
    }
    return false;
  }

  // jinja2's OptionalLStrip: "-" strips all trailing whitespace of the text;
  // otherwise lstrip_blocks strips a whitespace-only last line before a block
  // or comment tag.
  std::string_view ApplyLeftStrip(std::string_view text, char sign, bool block_like,
                                  bool line_starting) const {
    if (sign == '-') return RStrip(text);
    if (sign == '+' || !block_like) return text;
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting) && AllSpace(text.substr(l_pos))) return text.substr(0, l_pos);
    return text;
  }

  void EmitData(size_t pos, std::string_view text) {
    if (text.empty()) return;
    Token t;
    t.type = TokenType::kData;
    t.text = std::string(text);
    SetPos(t, pos);
    tokens_.push_back(std::move(t));
  }

  // After "-%}" whitespace is skipped; after "%}" one newline (trim_blocks).
  size_t AfterEnd(size_t end_pos, char sign) const {
    if (sign == '-') return SkipSpaces(src_, end_pos);
    if (sign == '+') return end_pos;
    if (end_pos < src_.size() && src_[end_pos] == '\n') return end_pos + 1;
    return end_pos;
  }

  Result<size_t> LexRaw(size_t start, size_t body, bool* line_starting) {
    *line_starting = body > 0 && src_[body - 1] == '\n';
    size_t search = body;
    while (true) {
      const size_t p = src_.find("{%", search);
      if (p == std::string::npos && body >= src_.size()) return body;  // as jinja2: nothing left
      if (p == std::string::npos) return Error(start, "Missing end of raw directive");
      size_t q = p + 2;
      char sign = '\0';
      if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) sign = src_[q++];
      q = SkipSpaces(src_, q);
      if (src_.compare(q, 6, "endraw") != 0) {
        search = p + 2;
        continue;
      }
      q = SkipSpaces(src_, q + 6);
      char end_sign = '\0';
      if (src_.compare(q, 3, "+%}") == 0 || src_.compare(q, 3, "-%}") == 0) {
        end_sign = src_[q];
        q += 3;
      } else if (src_.compare(q, 2, "%}") == 0) {
        q += 2;
      } else {
        search = p + 2;
        continue;
      }
      std::string_view text = std::string_view(src_).substr(body, p - body);
      EmitData(body, ApplyLeftStrip(text, sign, true, *line_starting));
      const size_t next = AfterEnd(q, end_sign);
      *line_starting = next > 0 && src_[next - 1] == '\n';
      return next;
    }
  }

  Result<size_t> SkipComment(size_t start, size_t inner, bool* line_starting) {
    const size_t p = src_.find("#}", inner);
    // Like jinja2's lexer, a "{#" with nothing after it ends the template quietly.
    if (p == std::string::npos && inner >= src_.size()) return src_.size();
    if (p == std::string::npos) return Error(start, "Missing end of comment tag");
    char sign = '\0';
    if (p > inner && (src_[p - 1] == '-' || src_[p - 1] == '+')) sign = src_[p - 1];
    const size_t next = AfterEnd(p + 2, sign);
    *line_starting = next > 0 && src_[next - 1] == '\n';
    return next;
  }

  // Matches the end of the current tag at `pos`; returns the position after it
  // (0 when there is none here).
  size_t MatchTagEnd(size_t pos, bool block, bool* line_starting) const {
    if (block) {
      if (src_.compare(pos, 3, "+%}") == 0) return Finish(pos + 3, '+', line_starting);
      if (src_.compare(pos, 3, "-%}") == 0) return Finish(pos + 3, '-', line_starting);
      if (src_.compare(pos, 2, "%}") == 0) return Finish(pos + 2, '\0', line_starting);
      return 0;
    }
    if (src_.compare(pos, 3, "-}}") == 0) return Finish(pos + 3, '-', line_starting);
    // trim_blocks does not apply to "}}": finish it like "+%}".
    if (src_.compare(pos, 2, "}}") == 0) return Finish(pos + 2, '+', line_starting);
    return 0;
  }

  size_t Finish(size_t end_pos, char sign, bool* line_starting) const {
    const size_t next = AfterEnd(end_pos, sign);
    *line_starting = next > 0 && src_[next - 1] == '\n';
    return next;
  }

  Result<size_t> LexTag(size_t start, size_t pos, bool block, bool* line_starting) {
    Token begin;
    begin.type = block ? TokenType::kBlockBegin : TokenType::kVarBegin;
    SetPos(begin, start);
    tokens_.push_back(std::move(begin));
    std::vector<char> balance;
    while (true) {
      if (balance.empty()) {
        if (const size_t next = MatchTagEnd(pos, block, line_starting)) {
          Token end;
          end.type = block ? TokenType::kBlockEnd : TokenType::kVarEnd;
          SetPos(end, pos);
          tokens_.push_back(std::move(end));
          return next;
        }
      }
      if (const size_t n = SpaceLen(src_, pos)) {
        pos += n;
        continue;
      }
      if (pos >= src_.size()) {
        return Error(start, block
                                ? "unexpected end of template, expected 'end of statement block'."
                                : "unexpected end of template, expected 'end of print statement'.");
      }
      Token t;
      SetPos(t, pos);
      const char c = src_[pos];
      if (IsDigitChar(c)) {
        MX_ASSIGN_OR_RETURN(pos, LexNumber(pos, t));
      } else if (IsNameStart(c)) {
        const size_t s = pos;
        while (pos < src_.size() && IsNameChar(src_[pos])) ++pos;
        t.type = TokenType::kName;
        t.text = src_.substr(s, pos - s);
      } else if (c == '\'' || c == '"') {
        MX_ASSIGN_OR_RETURN(pos, LexString(pos, t));
      } else {
        MX_ASSIGN_OR_RETURN(pos, LexOperator(pos, t, balance));
      }
      tokens_.push_back(std::move(t));
    }
  }

  static bool DigitIn(char c, int base) {
    if (base == 2) return c == '0' || c == '1';
    if (base == 8) return c >= '0' && c <= '7';
    if (base == 16) return IsDigitChar(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    return IsDigitChar(c);
  }

  // Digits with single '_' separators: "(_?d)*" after a first digit when
  // `need_first`, else "(d+_)*d+".
  size_t ScanDigits(size_t pos, int base) const {
    size_t p = pos;
    while (p < src_.size()) {
      if (DigitIn(src_[p], base)) {
        ++p;
      } else if (src_[p] == '_' && p > pos && p + 1 < src_.size() && DigitIn(src_[p + 1], base)) {
        ++p;
      } else {
        break;
      }
    }
    return p;
  }

  Result<size_t> LexNumber(size_t pos, Token& t) {
    const size_t start = pos;
    // Float: digits ((.digits)? e[+-]?digits | .digits), not right after a '.'.
    const bool after_dot = start > 0 && src_[start - 1] == '.';
    if (!after_dot) {
      size_t p = ScanDigits(pos, 10);
      bool is_float = false;
      if (p < src_.size() && src_[p] == '.' && p + 1 < src_.size() && IsDigitChar(src_[p + 1])) {
        p = ScanDigits(p + 1, 10);
        is_float = true;
      }
      if (p < src_.size() && (src_[p] == 'e' || src_[p] == 'E')) {
        size_t q = p + 1;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        if (q < src_.size() && IsDigitChar(src_[q])) {
          p = ScanDigits(q, 10);
          is_float = true;
        }
      }
      if (is_float) {
        std::string digits;
        for (size_t i = start; i < p; ++i) {
          if (src_[i] != '_') digits.push_back(src_[i]);
        }
        t.type = TokenType::kFloat;
        t.float_value = std::strtod(digits.c_str(), nullptr);
        return p;
      }
    }
    int base = 10;
    size_t p = pos;
    if (src_[pos] == '0' && pos + 1 < src_.size()) {
      const char x = src_[pos + 1];
      base = (x == 'b' || x == 'B')   ? 2
             : (x == 'o' || x == 'O') ? 8
             : (x == 'x' || x == 'X') ? 16
                                      : 10;
      if (base != 10) {
        size_t q = pos + 2;
        if (q < src_.size() && src_[q] == '_') ++q;
        if (q >= src_.size() || !DigitIn(src_[q], base)) {
          base = 10;
        } else {
          p = ScanDigits(q, base);
        }
      }
    }
    if (base == 10) {
      if (src_[pos] == '0') {
        // "0(_?0)*"
        p = pos + 1;
        while (p < src_.size() &&
               (src_[p] == '0' || (src_[p] == '_' && p + 1 < src_.size() && src_[p + 1] == '0'))) {
          ++p;
        }
      } else {
        p = ScanDigits(pos, 10);
      }
    }
    std::string digits;
    for (size_t i = (base == 10 ? start : start + 2); i < p; ++i) {
      if (src_[i] != '_') digits.push_back(src_[i]);
    }
    errno = 0;
    const unsigned long long v = std::strtoull(digits.c_str(), nullptr, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX)) {
      return Error(start, "integer literal out of range");
    }
    t.type = TokenType::kInteger;
    t.int_value = static_cast<int64_t>(v);
    return p;
  }

  Result<size_t> LexString(size_t pos, Token& t) {
    const char quote = src_[pos];
    size_t p = pos + 1;
    while (p < src_.size() && src_[p] != quote) {
      p += (src_[p] == '\\' && p + 1 < src_.size()) ? 2 : 1;
    }
    if (p >= src_.size()) return Error(pos, "unexpected end of string literal");
    MX_ASSIGN_OR_RETURN(t.text, Unescape(pos, std::string_view(src_).substr(pos + 1, p - pos - 1)));
    t.type = TokenType::kString;
    return p + 1;
  }

  static int HexValue(char c) {
    if (IsDigitChar(c)) return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Python's "unicode-escape" decoding of a literal's body.
  Result<std::string> Unescape(size_t pos, std::string_view body) const {
    std::string out;
    out.reserve(body.size());
    for (size_t i = 0; i < body.size(); ++i) {
      const char c = body[i];
      if (c != '\\' || i + 1 >= body.size()) {
        out.push_back(c);
        continue;
      }
      const char e = body[++i];
      switch (e) {
        case '\n':
          break;  // line continuation
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 0; k < n; ++k) {
            const int h = i + 1 + k < body.size() ? HexValue(body[i + 1 + k]) : -1;
            if (h < 0) {
              return Error(pos, std::string("truncated \\") + e + " escape");
            }
            cp = cp * 16 + static_cast<uint32_t>(h);
          }
          if (cp > 0x10FFFF) return Error(pos, "illegal Unicode character");
          i += n;
          py::AppendUtf8(out, cp);
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0;
                 k < 2 && i + 1 < body.size() && body[i + 1] >= '0' && body[i + 1] <= '7'; ++k) {
              cp = cp * 8 + static_cast<uint32_t>(body[++i] - '0');
            }
            py::AppendUtf8(out, cp);
          } else {
            out.push_back('\\');  // unknown escapes are kept as written
            out.push_back(e);
          }
      }
    }
    return out;
  }

  Result<size_t> LexOperator(size_t pos, Token& t, std::vector<char>& balance) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwo) {
      if (src_.compare(pos, 2, op) == 0) {
        t.type = TokenType::kOperator;
        t.text = std::string(op);
        return pos + 2;
      }
    }
    const char c = src_[pos];
    static constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string_view::npos) {
      std::string shown = c >= 0x20 && c < 0x7F
                              ? std::string(1, c)
                              : "\\x" + std::to_string(static_cast<unsigned char>(c));
      return Error(pos, "unexpected char '" + shown + "' at " + std::to_string(pos));
    }
    if (c == '{' || c == '(' || c == '[') {
      balance.push_back(c == '{' ? '}' : c == '(' ? ')' : ']');
    } else if (c == '}' || c == ')' || c == ']') {
      if (balance.empty()) return Error(pos, std::string("unexpected '") + c + "'");
      const char expected = balance.back();
      balance.pop_back();
      if (expected != c) {
        return Error(pos, std::string("unexpected '") + c + "', expected '" + expected + "'");
      }
    }
    t.type = TokenType::kOperator;
    t.text = std::string(1, c);
    return pos + 1;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

}  // namespace

Result<std::vector<Token>> Tokenize(std::string_view source) {
  return Lexer(NormalizeNewlines(source)).Run();
}

}  // namespace mx::jinja
