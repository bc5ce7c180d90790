#include "toolcalls/json_scan.h"

#include <cstdint>

namespace mx::toolcalls::internal {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Length of the valid UTF-8 sequence at s[i] (lead byte >= 0x80): > 0 valid,
// 0 invalid, -1 truncated by the end of `s` (valid so far).
int Utf8SequenceLength(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  int n;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (int k = 1; k < n; ++k) {
    if (i + k >= s.size()) return -1;
    const auto b = static_cast<unsigned char>(s[i + k]);
    if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) return 0;
  }
  return n;
}

class Scanner {
 public:
  Scanner(std::string_view text, size_t pos, bool at_end, int max_depth)
      : text_(text), pos_(pos), at_end_(at_end), max_depth_(max_depth) {}

  ScanResult Run();

 private:
  struct Frame {
    int node;
    bool object;
    // 0: just opened; 1: after a key (':' next); 2: after ':' (value next);
    // 3: after a value (',' or close next); 4: after ',' (key or value next).
    int state;
    std::string key;
  };

  ScanStatus Short() const { return at_end_ ? ScanStatus::kInvalid : ScanStatus::kNeedMore; }
  void SkipSpace() {
    while (pos_ < text_.size() && IsJsonSpace(text_[pos_])) ++pos_;
  }
  int NewNode(JsonNode::Kind kind) {
    JsonNode n;
    n.kind = kind;
    n.begin = out_.compact.size();
    out_.nodes.push_back(std::move(n));
    return static_cast<int>(out_.nodes.size()) - 1;
  }
  // A value ended: attach it to its container.
  void Done(int node) {
    out_.nodes[node].end = out_.compact.size();
    if (stack_.empty()) return;
    Frame& f = stack_.back();
    if (f.object) {
      out_.nodes[f.node].members.emplace_back(std::move(f.key), node);
      f.key.clear();
    } else {
      out_.nodes[f.node].items.push_back(node);
    }
    f.state = 3;
  }
  ScanStatus String(std::string* decoded);
  ScanStatus Number();
  ScanStatus Literal();
  ScanStatus Value(bool* done);

  std::string_view text_;
  size_t pos_;
  bool at_end_;
  int max_depth_;
  std::vector<Frame> stack_;
  JsonValue out_;
};

// At text_[pos_] == '"'. Copies the literal to compact; decodes it when asked.
ScanStatus Scanner::String(std::string* decoded) {
  std::string& out = out_.compact;
  const size_t begin = out.size();
  out.push_back('"');
  ++pos_;
  while (true) {
    if (pos_ >= text_.size()) return Short();
    const char c = text_[pos_];
    const auto u = static_cast<unsigned char>(c);
    if (c == '"') {
      out.push_back('"');
      ++pos_;
      break;
    }
    if (c == '\\') {
      if (pos_ + 1 >= text_.size()) return Short();
      const char e = text_[pos_ + 1];
      if (e == 'u') {
        for (size_t k = 2; k < 6; ++k) {
          if (pos_ + k >= text_.size()) return Short();
          if (HexValue(text_[pos_ + k]) < 0) return ScanStatus::kInvalid;
        }
        out.append(text_.substr(pos_, 6));
        pos_ += 6;
        continue;
      }
      if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n' && e != 'r' &&
          e != 't') {
        return ScanStatus::kInvalid;
      }
      out.append(text_.substr(pos_, 2));
      pos_ += 2;
      continue;
    }
    if (u < 0x20) {  // a raw control character: escape it
      static const char* kHex = "0123456789abcdef";
      if (c == '\n') {
        out.append("\\n");
      } else if (c == '\r') {
        out.append("\\r");
      } else if (c == '\t') {
        out.append("\\t");
      } else {
        out.append("\\u00");
        out.push_back(kHex[u >> 4]);
        out.push_back(kHex[u & 15]);
      }
      ++pos_;
      continue;
    }
    if (u >= 0x80) {
      const int n = Utf8SequenceLength(text_, pos_);
      if (n == 0) return ScanStatus::kInvalid;
      if (n < 0) return Short();
      out.append(text_.substr(pos_, static_cast<size_t>(n)));
      pos_ += static_cast<size_t>(n);
      continue;
    }
    out.push_back(c);
    ++pos_;
  }
  if (decoded) *decoded = DecodeJsonString(std::string_view(out).substr(begin));
  return ScanStatus::kComplete;
}

// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
ScanStatus Scanner::Number() {
  const size_t start = pos_;
  size_t i = pos_;
  const size_t n = text_.size();
  // Returns kNeedMore / kInvalid for a number cut by the end of the text.
  auto cut = [&](bool valid_here) {
    if (!at_end_) return ScanStatus::kNeedMore;
    return valid_here ? ScanStatus::kComplete : ScanStatus::kInvalid;
  };
  auto finish = [&](size_t end) {
    out_.compact.append(text_.substr(start, end - start));
    pos_ = end;
    return ScanStatus::kComplete;
  };
  if (text_[i] == '-') ++i;
  if (i >= n) return cut(false);
  if (text_[i] == '0') {
    ++i;
  } else if (IsDigit(text_[i])) {
    while (i < n && IsDigit(text_[i])) ++i;
  } else {
    return ScanStatus::kInvalid;
  }
  if (i >= n) return cut(true) == ScanStatus::kComplete ? finish(i) : cut(true);
  if (text_[i] == '.') {
    ++i;
    if (i >= n) return cut(false);
    if (!IsDigit(text_[i])) return ScanStatus::kInvalid;
    while (i < n && IsDigit(text_[i])) ++i;
    if (i >= n) return cut(true) == ScanStatus::kComplete ? finish(i) : cut(true);
  }
  if (text_[i] == 'e' || text_[i] == 'E') {
    ++i;
    if (i < n && (text_[i] == '+' || text_[i] == '-')) ++i;
    if (i >= n) return cut(false);
    if (!IsDigit(text_[i])) return ScanStatus::kInvalid;
    while (i < n && IsDigit(text_[i])) ++i;
    if (i >= n) return cut(true) == ScanStatus::kComplete ? finish(i) : cut(true);
  }
  return finish(i);
}

ScanStatus Scanner::Literal() {
  static constexpr std::string_view kWords[] = {"true", "false", "null"};
  for (std::string_view w : kWords) {
    if (text_[pos_] != w[0]) continue;
    const std::string_view rest = text_.substr(pos_, w.size());
    if (rest.size() < w.size()) {
      return w.substr(0, rest.size()) == rest ? Short() : ScanStatus::kInvalid;
    }
    if (rest != w) return ScanStatus::kInvalid;
    out_.compact.append(w);
    pos_ += w.size();
    return ScanStatus::kComplete;
  }
  return ScanStatus::kInvalid;
}

// Starts the value at pos_ (not whitespace). *done: a scalar was read whole.
ScanStatus Scanner::Value(bool* done) {
  *done = false;
  const char c = text_[pos_];
  if (c == '{' || c == '[') {
    if (static_cast<int>(stack_.size()) >= max_depth_) return ScanStatus::kInvalid;
    const int node = NewNode(c == '{' ? JsonNode::Kind::kObject : JsonNode::Kind::kArray);
    out_.compact.push_back(c);
    ++pos_;
    stack_.push_back(Frame{node, c == '{', 0, {}});
    return ScanStatus::kComplete;
  }
  ScanStatus st;
  int node;
  if (c == '"') {
    node = NewNode(JsonNode::Kind::kString);
    st = String(nullptr);
  } else if (c == '-' || IsDigit(c)) {
    node = NewNode(JsonNode::Kind::kNumber);
    st = Number();
  } else {
    node = NewNode(JsonNode::Kind::kLiteral);
    st = Literal();
  }
  if (st != ScanStatus::kComplete) return st;
  Done(node);
  *done = true;
  return ScanStatus::kComplete;
}

ScanResult Scanner::Run() {
  ScanResult r;
  SkipSpace();
  if (pos_ >= text_.size()) {
    r.status = Short();
    return r;
  }
  bool done = false;
  r.status = Value(&done);
  while (r.status == ScanStatus::kComplete && !stack_.empty()) {
    SkipSpace();
    if (pos_ >= text_.size()) {
      r.status = Short();
      break;
    }
    Frame& f = stack_.back();
    const char c = text_[pos_];
    const char close = f.object ? '}' : ']';
    if ((f.state == 0 || f.state == 3) && c == close) {
      out_.compact.push_back(c);
      ++pos_;
      const int node = f.node;
      stack_.pop_back();
      Done(node);
      continue;
    }
    if (f.state == 3) {
      if (c != ',') {
        r.status = ScanStatus::kInvalid;
        break;
      }
      out_.compact.push_back(',');
      ++pos_;
      f.state = 4;
      continue;
    }
    if (f.object && (f.state == 0 || f.state == 4)) {
      if (c != '"') {
        r.status = ScanStatus::kInvalid;
        break;
      }
      std::string key;
      r.status = String(&key);
      f.key = std::move(key);
      f.state = 1;
      continue;
    }
    if (f.object && f.state == 1) {
      if (c != ':') {
        r.status = ScanStatus::kInvalid;
        break;
      }
      out_.compact.push_back(':');
      ++pos_;
      f.state = 2;
      continue;
    }
    // A value: array state 0 / 4, object state 2.
    r.status = Value(&done);
  }
  if (r.status == ScanStatus::kComplete) {
    r.end = pos_;
    r.value = std::move(out_);
  }
  return r;
}

}  // namespace

const JsonNode* JsonValue::Member(const JsonNode& obj, std::string_view key) const {
  for (const auto& [k, index] : obj.members) {
    if (k == key) return &nodes[static_cast<size_t>(index)];
  }
  return nullptr;
}

std::string JsonValue::StringValue(const JsonNode& n) const { return DecodeJsonString(Text(n)); }

ScanResult ScanJson(std::string_view text, size_t pos, bool at_end, int max_depth) {
  return Scanner(text, pos, at_end, max_depth).Run();
}

std::string DecodeJsonString(std::string_view literal) {
  std::string out;
  if (literal.size() < 2) return out;
  const std::string_view s = literal.substr(1, literal.size() - 2);
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char e = s[++i];
    switch (e) {
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
      case 'u': {
        auto hex4 = [&](size_t at, uint32_t* v) {
          if (at + 4 > s.size()) return false;
          *v = 0;
          for (size_t k = 0; k < 4; ++k) {
            const int h = HexValue(s[at + k]);
            if (h < 0) return false;
            *v = *v * 16 + static_cast<uint32_t>(h);
          }
          return true;
        };
        uint32_t cp;
        if (!hex4(i + 1, &cp)) break;
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t lo;
          if (i + 2 < s.size() && s[i + 1] == '\\' && s[i + 2] == 'u' && hex4(i + 3, &lo) &&
              lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          } else {
            cp = 0xFFFD;
          }
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          cp = 0xFFFD;
        }
        AppendUtf8(cp, &out);
        break;
      }
      default:
        out.push_back(e);
        break;  // " \ /
    }
  }
  return out;
}

std::string QuoteJsonString(std::string_view s) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '\r') {
      out.append("\\r");
    } else if (c == '\t') {
      out.append("\\t");
    } else if (u < 0x20) {
      out.append("\\u00");
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    } else if (u >= 0x80) {
      const int n = Utf8SequenceLength(s, i);
      if (n <= 0) {
        out.append("\xEF\xBF\xBD");
        ++i;
        continue;
      }
      out.append(s.substr(i, static_cast<size_t>(n)));
      i += static_cast<size_t>(n);
      continue;
    } else {
      out.push_back(c);
    }
    ++i;
  }
  out.push_back('"');
  return out;
}

}  // namespace mx::toolcalls::internal
