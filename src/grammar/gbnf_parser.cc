// GBNF text -> Grammar. A recursive-descent parser over the syntax of
// llama.cpp's grammar-parser (docs/structured_output.md); the checks that
// need the whole grammar (undefined rules, root, left recursion) and the
// flattening are in grammar.cc.
#include <charconv>
#include <map>
#include <string>
#include <unordered_map>

#include "grammar/grammar_build.h"

namespace mx::grammar {
namespace {

bool IsWordChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  Parser(std::string_view text, const GbnfLimits& limits, RawGrammar* out)
      : text_(text), limits_(limits), g_(out) {}

  Status Run() {
    SkipSpace(true);
    while (pos_ < text_.size()) {
      MX_RETURN_IF_ERROR(ParseRule());
      SkipSpace(true);
    }
    return Status::Ok();
  }

 private:
  Status Error(size_t at, const std::string& what) const {
    return Status::InvalidArgument("grammar line " + LineCol(text_, at) + ": " + what);
  }

  char Peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  bool AtEnd() const { return pos_ >= text_.size(); }

  // Skips blanks and # comments; newlines too when `newline_ok`.
  void SkipSpace(bool newline_ok) {
    while (!AtEnd()) {
      char c = text_[pos_];
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!AtEnd() && text_[pos_] != '\n' && text_[pos_] != '\r') ++pos_;
      } else if (newline_ok && (c == '\n' || c == '\r')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view ParseName() {
    size_t start = pos_;
    while (!AtEnd() && IsWordChar(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  Status ParseRule() {
    const size_t start = pos_;
    std::string_view name = ParseName();
    if (name.empty()) return Error(pos_, std::string("expected a rule name, found ") + Describe());
    SkipSpace(false);
    if (text_.substr(pos_, 3) != "::=") {
      return Error(
          pos_, "expected '::=' after rule name '" + std::string(name) + "', found " + Describe());
    }
    pos_ += 3;
    SkipSpace(true);
    MX_ASSIGN_OR_RETURN(uint32_t id, g_->RuleId(std::string(name), start, limits_));
    RawRule& rule = g_->rules[id];
    if (rule.defined) {
      return Error(start, "rule '" + std::string(name) + "' is defined twice (first at line " +
                              LineCol(text_, rule.def_pos) + ")");
    }
    rule.defined = true;
    rule.def_pos = start;
    std::vector<Seq> alts;
    MX_RETURN_IF_ERROR(ParseAlternatives(std::string(name), 0, &alts));
    g_->rules[id].alts = std::move(alts);
    // The rule ends at a newline or at the end of the text.
    if (AtEnd()) return Status::Ok();
    if (Peek() == '\n' || Peek() == '\r') return Status::Ok();
    return Error(pos_, "expected a newline or the end after rule '" + std::string(name) +
                           "', found " + Describe());
  }

  std::string Describe() const {
    if (AtEnd()) return "the end of the grammar";
    unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c >= 0x21 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
    char buf[8];
    std::snprintf(buf, sizeof(buf), "0x%02X", c);
    return std::string("byte ") + buf;
  }

  Status ParseAlternatives(const std::string& rule_name, int depth, std::vector<Seq>* alts) {
    bool nested = depth > 0;
    while (true) {
      Seq seq;
      MX_RETURN_IF_ERROR(ParseSequence(rule_name, depth, &seq));
      MX_RETURN_IF_ERROR(g_->AddElements(seq.size() + 1, limits_, pos_));
      alts->push_back(std::move(seq));
      if (Peek() != '|') break;
      ++pos_;
      SkipSpace(true);
    }
    (void)nested;
    return Status::Ok();
  }

  Status ParseSequence(const std::string& rule_name, int depth, Seq* seq) {
    const bool nested = depth > 0;
    size_t last_start = std::string::npos;  // where the last item begins in *seq
    while (!AtEnd()) {
      const size_t at = pos_;
      const char c = Peek();
      if (c == '"') {
        last_start = seq->size();
        MX_RETURN_IF_ERROR(ParseLiteral(seq));
      } else if (c == '[') {
        last_start = seq->size();
        CharClass cls;
        MX_RETURN_IF_ERROR(ParseClass(&cls));
        seq->push_back({Op::kChar, g_->AddClass(std::move(cls))});
      } else if (c == '.') {
        ++pos_;
        last_start = seq->size();
        CharClass any;
        any.negated = true;
        seq->push_back({Op::kChar, g_->AddClass(std::move(any))});
      } else if (IsWordChar(c)) {
        last_start = seq->size();
        std::string name(ParseName());
        MX_ASSIGN_OR_RETURN(uint32_t id, g_->RuleId(name, at, limits_));
        seq->push_back({Op::kRef, id});
      } else if (c == '(') {
        if (depth + 1 > limits_.max_nesting) {
          return Error(at, "groups nested deeper than " + std::to_string(limits_.max_nesting) +
                               " levels (GbnfLimits::max_nesting)");
        }
        ++pos_;
        SkipSpace(true);
        std::vector<Seq> sub;
        MX_RETURN_IF_ERROR(ParseAlternatives(rule_name, depth + 1, &sub));
        if (Peek() != ')')
          return Error(at, "unclosed '(' (expected ')', found " + Describe() + ")");
        ++pos_;
        MX_ASSIGN_OR_RETURN(uint32_t id, g_->NewRule(rule_name, at, limits_));
        g_->rules[id].alts = std::move(sub);
        last_start = seq->size();
        seq->push_back({Op::kRef, id});
      } else if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        if (last_start == std::string::npos) {
          return Error(at, std::string("'") + c + "' has nothing before it to repeat");
        }
        uint32_t lo = c == '+' ? 1 : 0;
        uint32_t hi = c == '?' ? 1 : kUnbounded;
        MX_RETURN_IF_ERROR(g_->Repeat(rule_name, seq, last_start, lo, hi, at, limits_));
        last_start = std::string::npos;
      } else if (c == '{') {
        if (last_start == std::string::npos) {
          return Error(at, "'{' has nothing before it to repeat");
        }
        uint32_t lo = 0, hi = 0;
        MX_RETURN_IF_ERROR(ParseCount(&lo, &hi));
        MX_RETURN_IF_ERROR(g_->Repeat(rule_name, seq, last_start, lo, hi, at, limits_));
        last_start = std::string::npos;
      } else {
        break;
      }
      SkipSpace(nested);
    }
    return Status::Ok();
  }

  // {m}, {m,}, {m,n}
  Status ParseCount(uint32_t* lo, uint32_t* hi) {
    const size_t at = pos_;
    ++pos_;
    SkipSpace(false);
    uint64_t m = 0;
    MX_RETURN_IF_ERROR(ParseInt(at, &m));
    SkipSpace(false);
    uint64_t n = m;
    bool unbounded = false;
    if (Peek() == ',') {
      ++pos_;
      SkipSpace(false);
      if (Peek() == '}') {
        unbounded = true;
      } else {
        MX_RETURN_IF_ERROR(ParseInt(at, &n));
        SkipSpace(false);
      }
    }
    if (Peek() != '}')
      return Error(pos_, "expected '}' to close the repetition, found " + Describe());
    ++pos_;
    std::string written(text_.substr(at, pos_ - at));
    if (m > limits_.max_repetition || (!unbounded && n > limits_.max_repetition)) {
      return Error(at, "repetition " + written + " exceeds the limit of " +
                           std::to_string(limits_.max_repetition) +
                           " (GbnfLimits::max_repetition)");
    }
    if (!unbounded && n < m) return Error(at, "repetition " + written + " has max < min");
    *lo = static_cast<uint32_t>(m);
    *hi = unbounded ? kUnbounded : static_cast<uint32_t>(n);
    return Status::Ok();
  }

  Status ParseInt(size_t at, uint64_t* v) {
    size_t start = pos_;
    while (!AtEnd() && text_[pos_] >= '0' && text_[pos_] <= '9' && pos_ - start < 12) ++pos_;
    if (pos_ == start)
      return Error(pos_, "expected a number in the repetition, found " + Describe());
    if (!AtEnd() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      return Error(at, "repetition count too large");
    }
    std::from_chars(text_.data() + start, text_.data() + pos_, *v);
    return Status::Ok();
  }

  // One character of a literal or class: an escape or a UTF-8 sequence.
  Status ParseChar(uint32_t* cp) {
    const size_t at = pos_;
    if (Peek() == '\\') {
      const char e = Peek(1);
      int digits = 0;
      switch (e) {
        case 'x':
          digits = 2;
          break;
        case 'u':
          digits = 4;
          break;
        case 'U':
          digits = 8;
          break;
        case 'n':
          *cp = '\n';
          pos_ += 2;
          return Status::Ok();
        case 'r':
          *cp = '\r';
          pos_ += 2;
          return Status::Ok();
        case 't':
          *cp = '\t';
          pos_ += 2;
          return Status::Ok();
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
          *cp = static_cast<unsigned char>(e);
          pos_ += 2;
          return Status::Ok();
        default:
          if (pos_ + 1 >= text_.size()) return Error(at, "unterminated escape sequence");
          return Error(at, std::string("unknown escape '\\") + e + "'");
      }
      pos_ += 2;
      uint32_t v = 0;
      for (int i = 0; i < digits; ++i) {
        int h = HexValue(Peek());
        if (h < 0) {
          return Error(at, "escape '\\" + std::string(1, e) + "' needs " + std::to_string(digits) +
                               " hex digits");
        }
        v = v * 16 + static_cast<uint32_t>(h);
        ++pos_;
      }
      if (v > 0x10FFFF) return Error(at, "escape beyond U+10FFFF");
      if (v >= 0xD800 && v <= 0xDFFF) {
        // Half of a UTF-16 pair is no character: no UTF-8 text holds it.
        return Error(at, "escape '\\" + std::string(1, e) + std::string(text_.substr(at + 2, pos_ - at - 2)) +
                             "' is a UTF-16 surrogate, not a character (write the character itself, or "
                             "\\U0001F600 for one above U+FFFF)");
      }
      *cp = v;
      return Status::Ok();
    }
    size_t len = 0;
    if (!DecodeUtf8(text_.substr(pos_), cp, &len)) return Error(at, "invalid UTF-8");
    pos_ += len;
    return Status::Ok();
  }

  Status ParseLiteral(Seq* seq) {
    const size_t at = pos_;
    ++pos_;
    while (true) {
      if (AtEnd()) return Error(at, "unterminated string literal");
      if (Peek() == '"') break;
      uint32_t cp = 0;
      MX_RETURN_IF_ERROR(ParseChar(&cp));
      seq->push_back({Op::kChar, g_->CharLiteral(cp)});
    }
    ++pos_;
    return Status::Ok();
  }

  Status ParseClass(CharClass* cls) {
    const size_t at = pos_;
    ++pos_;
    if (Peek() == '^') {
      cls->negated = true;
      ++pos_;
    }
    while (true) {
      if (AtEnd()) return Error(at, "unterminated character class (expected ']')");
      if (Peek() == ']') break;
      uint32_t lo = 0, hi = 0;
      MX_RETURN_IF_ERROR(ParseChar(&lo));
      hi = lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < text_.size()) {
        const size_t range_at = pos_;
        ++pos_;
        MX_RETURN_IF_ERROR(ParseChar(&hi));
        if (hi < lo) return Error(range_at, "character range is reversed (end before start)");
      }
      cls->ranges.push_back({lo, hi});
    }
    ++pos_;
    return Status::Ok();
  }

  std::string_view text_;
  const GbnfLimits& limits_;
  RawGrammar* g_;
  size_t pos_ = 0;
};

}  // namespace

Result<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text, const GbnfLimits& limits) {
  if (text.size() > limits.max_text_bytes) {
    return Status::InvalidArgument(
        "grammar: text of " + std::to_string(text.size()) + " bytes exceeds the limit of " +
        std::to_string(limits.max_text_bytes) + " (GbnfLimits::max_text_bytes)");
  }
  RawGrammar raw;
  Parser parser(text, limits, &raw);
  MX_RETURN_IF_ERROR(parser.Run());
  return raw.Finish(text);
}

void AppendGbnfLiteral(std::string_view text, std::string* out) {
  out->push_back('"');
  for (unsigned char c : text) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02X", c);
          *out += buf;
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
  }
  out->push_back('"');
}

}  // namespace mx::grammar
