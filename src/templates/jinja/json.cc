#include "templates/jinja/json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "templates/jinja/pystr.h"

namespace mx::jinja {
namespace {

class JsonParser {
 public:
  JsonParser(std::string_view text, const JsonParseOptions& options)
      : text_(text), options_(options) {}

  Result<Value> ParseDocument() {
    if (!py::IsValidUtf8(text_)) return Status::InvalidArgument("JSON: text is not valid UTF-8");
    SkipSpace();
    MX_ASSIGN_OR_RETURN(Value v, ParseValue(0));
    SkipSpace();
    if (pos_ != text_.size()) return Error("extra data");
    return v;
  }

 private:
  Status Error(const char* what) const {
    return Status::InvalidArgument("JSON: " + std::string(what) + " at offset " +
                                   std::to_string(pos_));
  }

  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  Result<Value> ParseValue(int depth) {
    if (depth > options_.max_depth) return Error("nesting too deep");
    if (pos_ >= text_.size()) return Error("unexpected end of input");
    const char c = text_[pos_];
    if (c == '{') return ParseObject(depth);
    if (c == '[') return ParseArray(depth);
    if (c == '"') {
      MX_ASSIGN_OR_RETURN(std::string s, ParseString());
      return Value::String(std::move(s));
    }
    if (Consume("true")) return Value::Bool(true);
    if (Consume("false")) return Value::Bool(false);
    if (Consume("null")) return Value::None();
    if (Consume("NaN")) return Value::Float(std::nan(""));
    if (Consume("Infinity")) return Value::Float(HUGE_VAL);
    if (Consume("-Infinity")) return Value::Float(-HUGE_VAL);
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber();
    return Error("unexpected character");
  }

  Result<Value> ParseObject(int depth) {
    ++pos_;  // {
    Dict dict;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return Value::FromDict(std::move(dict));
    }
    while (true) {
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"') return Error("expected a string key");
      MX_ASSIGN_OR_RETURN(std::string key, ParseString());
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':') return Error("expected ':'");
      ++pos_;
      SkipSpace();
      MX_ASSIGN_OR_RETURN(Value v, ParseValue(depth + 1));
      dict.Set(Value::String(std::move(key)), std::move(v));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return Value::FromDict(std::move(dict));
      }
      return Error("expected ',' or '}'");
    }
  }

  Result<Value> ParseArray(int depth) {
    ++pos_;  // [
    ValueList items;
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return Value::List(std::move(items));
    }
    while (true) {
      SkipSpace();
      MX_ASSIGN_OR_RETURN(Value v, ParseValue(depth + 1));
      items.push_back(std::move(v));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return Value::List(std::move(items));
      }
      return Error("expected ',' or ']'");
    }
  }

  int Hex4(size_t at) const {
    if (at + 4 > text_.size()) return -1;
    int v = 0;
    for (size_t i = at; i < at + 4; ++i) {
      const char c = text_[i];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        v |= c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        v |= c - 'A' + 10;
      } else {
        return -1;
      }
    }
    return v;
  }

  Result<std::string> ParseString() {
    ++pos_;  // "
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) return Error("unterminated string");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) return Error("invalid control character");
      if (c != '\\') {
        out.push_back(c);
        ++pos_;
        continue;
      }
      if (pos_ + 1 >= text_.size()) return Error("unterminated string");
      const char e = text_[pos_ + 1];
      pos_ += 2;
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
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
        case 'u': {
          int cp = Hex4(pos_);
          if (cp < 0) return Error("invalid \\u escape");
          pos_ += 4;
          if (cp >= 0xD800 && cp <= 0xDBFF && text_.substr(pos_, 2) == "\\u") {
            const int lo = Hex4(pos_ + 2);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              pos_ += 6;
            }
          }
          py::AppendUtf8(out, static_cast<char32_t>(cp));  // lone surrogates -> U+FFFD
          break;
        }
        default:
          return Error("invalid escape");
      }
    }
  }

  Result<Value> ParseNumber() {
    const size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    auto digits = [&] {
      const size_t s = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - s;
    };
    const size_t int_start = pos_;
    if (digits() == 0) return Error("invalid number");
    if (text_[int_start] == '0' && pos_ - int_start > 1) return Error("invalid number");
    bool is_float = false;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) return Error("invalid number");
      is_float = true;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) return Error("invalid number");
      is_float = true;
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (!is_float) {
      int64_t i = 0;
      auto r = std::from_chars(first, last, i);
      if (r.ec == std::errc() && r.ptr == last) return Value::Int(i);
    }
    double d = 0;
    auto r = std::from_chars(first, last, d);
    if (r.ec == std::errc::result_out_of_range) {
      // Python gives inf for huge literals and 0.0 for tiny ones.
      const bool tiny = std::string_view(first, static_cast<size_t>(last - first)).find("e-") !=
                        std::string_view::npos;
      d = tiny ? 0.0 : (*first == '-' ? -HUGE_VAL : HUGE_VAL);
    } else if (r.ec != std::errc()) {
      return Error("invalid number");
    }
    return Value::Float(d);
  }

  std::string_view text_;
  const JsonParseOptions& options_;
  size_t pos_ = 0;
};

class JsonWriter {
 public:
  explicit JsonWriter(const JsonDumpOptions& options) : options_(options) {
    item_sep_ = options.item_separator.value_or(options.indent ? "," : ", ");
    key_sep_ = options.key_separator.value_or(": ");
  }

  Status Write(const Value& v, int level) {
    if (out_.size() > options_.max_bytes) {
      return Status::ResourceExhausted("tojson output exceeds " +
                                       std::to_string(options_.max_bytes) + " bytes");
    }
    if (level > Value::kMaxReprDepth) return Status::InvalidArgument("Circular reference detected");
    switch (v.kind()) {
      case Value::Kind::kNone:
        out_ += "null";
        return Status::Ok();
      case Value::Kind::kBool:
        out_ += v.as_bool() ? "true" : "false";
        return Status::Ok();
      case Value::Kind::kInt:
        out_ += std::to_string(v.as_int());
        return Status::Ok();
      case Value::Kind::kFloat:
        WriteFloat(v.as_float());
        return Status::Ok();
      case Value::Kind::kString:
        WriteString(v.as_string());
        return Status::Ok();
      case Value::Kind::kList:
        if (v.is_iterator()) break;
        return WriteList(v.as_list(), level);
      case Value::Kind::kDict:
        return WriteDict(v.as_dict(), level);
      default:
        break;
    }
    return Status::InvalidArgument("Object of type " + std::string(v.TypeName()) +
                                   " is not JSON serializable");
  }

  std::string& out() { return out_; }

 private:
  void WriteFloat(double d) {
    if (std::isnan(d)) {
      out_ += "NaN";
    } else if (std::isinf(d)) {
      out_ += d < 0 ? "-Infinity" : "Infinity";
    } else {
      out_ += py::ReprFloat(d);
    }
  }

  void WriteString(std::string_view s) {
    out_.push_back('"');
    for (char c : s) {
      switch (c) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\r':
          out_ += "\\r";
          break;
        case '\t':
          out_ += "\\t";
          break;
        case '\b':
          out_ += "\\b";
          break;
        case '\f':
          out_ += "\\f";
          break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
            out_ += buf;
          } else {
            out_.push_back(c);
          }
      }
    }
    out_.push_back('"');
  }

  void NewLine(int level) {
    if (!options_.indent) return;
    out_.push_back('\n');
    for (int i = 0; i < level; ++i) out_ += *options_.indent;
  }

  Status WriteList(const ValueList& items, int level) {
    if (items.empty()) {
      out_ += "[]";
      return Status::Ok();
    }
    out_.push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out_ += item_sep_;
      NewLine(level + 1);
      MX_RETURN_IF_ERROR(Write(items[i], level + 1));
    }
    NewLine(level);
    out_.push_back(']');
    return Status::Ok();
  }

  Status WriteKey(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::kString:
        WriteString(k.as_string());
        return Status::Ok();
      case Value::Kind::kNone:
        out_ += "\"null\"";
        return Status::Ok();
      case Value::Kind::kBool:
        out_ += k.as_bool() ? "\"true\"" : "\"false\"";
        return Status::Ok();
      case Value::Kind::kInt:
        out_ += "\"" + std::to_string(k.as_int()) + "\"";
        return Status::Ok();
      case Value::Kind::kFloat:
        out_.push_back('"');
        WriteFloat(k.as_float());
        out_.push_back('"');
        return Status::Ok();
      default:
        return Status::InvalidArgument("keys must be str, int, float, bool or None, not " +
                                       std::string(k.TypeName()));
    }
  }

  Status WriteDict(const Dict& dict, int level) {
    if (dict.empty()) {
      out_ += "{}";
      return Status::Ok();
    }
    std::vector<const std::pair<Value, Value>*> items;
    items.reserve(dict.size());
    for (const auto& kv : dict.items()) items.push_back(&kv);
    if (options_.sort_keys) MX_RETURN_IF_ERROR(SortKeys(items));
    out_.push_back('{');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out_ += item_sep_;
      NewLine(level + 1);
      MX_RETURN_IF_ERROR(WriteKey(items[i]->first));
      out_ += key_sep_;
      MX_RETURN_IF_ERROR(Write(items[i]->second, level + 1));
    }
    NewLine(level);
    out_.push_back('}');
    return Status::Ok();
  }

  static Status SortKeys(std::vector<const std::pair<Value, Value>*>& items) {
    const bool all_strings = std::all_of(items.begin(), items.end(),
                                         [](const auto* kv) { return kv->first.is_string(); });
    const bool all_numbers = std::all_of(items.begin(), items.end(),
                                         [](const auto* kv) { return kv->first.is_number(); });
    if (all_strings) {
      std::stable_sort(items.begin(), items.end(), [](const auto* a, const auto* b) {
        return a->first.as_string() < b->first.as_string();
      });
    } else if (all_numbers) {
      std::stable_sort(items.begin(), items.end(), [](const auto* a, const auto* b) {
        return a->first.as_number() < b->first.as_number();
      });
    } else {
      return Status::InvalidArgument("'<' not supported between dict keys of different types");
    }
    return Status::Ok();
  }

  const JsonDumpOptions& options_;
  std::string item_sep_;
  std::string key_sep_;
  std::string out_;
};

}  // namespace

Result<Value> ParseJson(std::string_view text, const JsonParseOptions& options) {
  return JsonParser(text, options).ParseDocument();
}

Result<std::string> ToJson(const Value& value, const JsonDumpOptions& options) {
  JsonWriter writer(options);
  MX_RETURN_IF_ERROR(writer.Write(value, 0));
  if (writer.out().size() > options.max_bytes) {
    return Status::ResourceExhausted("tojson output exceeds " + std::to_string(options.max_bytes) +
                                     " bytes");
  }
  return std::move(writer.out());
}

}  // namespace mx::jinja
