// Python's str, list and dict methods, as templates call them
// (`content.split('</think>')`, `message.get('tool_calls')`, ...), and the
// argument binding shared with filters.
#include <algorithm>

#include "templates/jinja/ops.h"
#include "templates/jinja/pystr.h"

namespace mx::jinja {
namespace {

Value StrLike(const Value& self, std::string s) {
  return self.is_markup() ? Value::Markup(std::move(s)) : Value::String(std::move(s));
}

Status ArgTypeError(std::string_view method, std::string_view what, const Value& got) {
  return TypeError(std::string(method) + "() argument must be " + std::string(what) + ", not " +
                   std::string(got.TypeName()));
}

// An optional str argument ("chars" of strip, "sep" of split): nullopt when
// absent or None.
Result<std::optional<std::string>> OptionalString(std::string_view method,
                                                  const std::optional<Value>& v) {
  if (!v || v->is_none()) return std::optional<std::string>();
  if (!v->is_string()) return ArgTypeError(method, "str or None", *v);
  return std::optional<std::string>(v->as_string());
}

// An integer argument (absent: `dflt`); None only where Python takes it.
Result<int64_t> IntArg(std::string_view method, const std::optional<Value>& v, int64_t dflt,
                       bool allow_none = false) {
  if (!v || (allow_none && v->is_none())) return dflt;
  if (v->is_int()) return v->as_int();
  if (v->is_bool()) return static_cast<int64_t>(v->as_bool());
  if (v->is_undefined()) return UndefinedError(*v);
  return TypeError("'" + std::string(v->TypeName()) +
                   "' object cannot be interpreted as an integer");
}

// A start / end bound of find, count, startswith, ...: an int, None or absent.
Result<std::optional<int64_t>> SliceIndex(const std::optional<Value>& v) {
  if (!v || v->is_none()) return std::optional<int64_t>();
  if (v->is_int()) return std::optional<int64_t>(v->as_int());
  if (v->is_bool()) return std::optional<int64_t>(v->as_bool() ? 1 : 0);
  return TypeError("slice indices must be integers or None or have an __index__ method");
}

// Python's strip family: `chars` nullopt strips whitespace.
std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  const std::u32string cps = py::Decode(s);
  std::u32string set = chars ? py::Decode(*chars) : std::u32string();
  std::sort(set.begin(), set.end());
  auto strip_it = [&](char32_t c) {
    return chars ? std::binary_search(set.begin(), set.end(), c) : py::IsSpace(c);
  };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip_it(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip_it(cps[e - 1])) --e;
  }
  if (b == 0 && e == cps.size()) return std::string(s);
  return py::Encode(std::u32string_view(cps).substr(b, e - b));
}

ValueList SplitWhitespace(std::string_view s, int64_t maxsplit, bool from_right) {
  const std::u32string cps = py::Decode(s);
  std::vector<std::pair<size_t, size_t>> parts;  // [begin, end) in code points
  const size_t n = cps.size();
  if (!from_right) {
    size_t i = 0;
    while (i < n) {
      while (i < n && py::IsSpace(cps[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.emplace_back(i, n);
        break;
      }
      const size_t b = i;
      while (i < n && !py::IsSpace(cps[i])) ++i;
      parts.emplace_back(b, i);
    }
  } else {
    size_t i = n;
    while (i > 0) {
      while (i > 0 && py::IsSpace(cps[i - 1])) --i;
      if (i == 0) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.emplace_back(0, i);
        break;
      }
      const size_t e = i;
      while (i > 0 && !py::IsSpace(cps[i - 1])) --i;
      parts.emplace_back(i, e);
    }
    std::reverse(parts.begin(), parts.end());
  }
  ValueList out;
  for (auto [b, e] : parts) {
    out.push_back(Value::String(py::Encode(std::u32string_view(cps).substr(b, e - b))));
  }
  return out;
}

ValueList SplitSep(std::string_view s, std::string_view sep, int64_t maxsplit, bool from_right) {
  if (from_right) {
    // rsplit is split of the reversed text by the reversed separator, reversed back.
    const std::string rs(s.rbegin(), s.rend());
    const std::string rsep(sep.rbegin(), sep.rend());
    ValueList parts = SplitSep(rs, rsep, maxsplit, false);
    std::reverse(parts.begin(), parts.end());
    for (Value& p : parts) {
      const std::string& t = p.as_string();
      p = Value::String(std::string(t.rbegin(), t.rend()));
    }
    return parts;
  }
  ValueList out;
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t f = FindSubstring(s, sep, pos);
    if (f == std::string_view::npos) break;
    out.push_back(Value::String(std::string(s.substr(pos, f - pos))));
    pos = f + sep.size();
  }
  out.push_back(Value::String(std::string(s.substr(pos))));
  return out;
}

bool IsLineBreak(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

ValueList SplitLines(std::string_view s, bool keepends) {
  const std::u32string cps = py::Decode(s);
  ValueList out;
  size_t i = 0, start = 0;
  while (i < cps.size()) {
    if (!IsLineBreak(cps[i])) {
      ++i;
      continue;
    }
    size_t eol = i;
    size_t next = i + 1;
    if (cps[i] == '\r' && next < cps.size() && cps[next] == '\n') ++next;
    const size_t end = keepends ? next : eol;
    out.push_back(Value::String(py::Encode(std::u32string_view(cps).substr(start, end - start))));
    i = start = next;
  }
  if (start < cps.size()) {
    out.push_back(Value::String(py::Encode(std::u32string_view(cps).substr(start))));
  }
  return out;
}

// s[start:end] in code points (Python slice bounds), for find/count/startswith.
std::u32string SubRange(const std::u32string& cps, std::optional<int64_t> start,
                        std::optional<int64_t> end, int64_t* offset) {
  const int64_t n = static_cast<int64_t>(cps.size());
  auto norm = [n](int64_t i) { return i < 0 ? std::max<int64_t>(0, i + n) : std::min(i, n); };
  int64_t b = 0, e = n;
  if (start) b = norm(*start);
  if (end) e = norm(*end);
  *offset = b;
  if (e <= b) return std::u32string();
  return cps.substr(static_cast<size_t>(b), static_cast<size_t>(e - b));
}

Result<Value> AffixTest(std::string_view method, const Value& self,
                        const std::vector<std::optional<Value>>& a, bool prefix) {
  std::vector<std::string> affixes;
  if (a[0]->is_string()) {
    affixes.push_back(a[0]->as_string());
  } else if (a[0]->is_tuple()) {
    for (const Value& v : a[0]->as_list()) {
      if (!v.is_string()) {
        return TypeError("tuple for " + std::string(method) + " must only contain str, not " +
                         std::string(v.TypeName()));
      }
      affixes.push_back(v.as_string());
    }
  } else {
    return TypeError(std::string(method) + " first arg must be str or a tuple of str, not " +
                     std::string(a[0]->TypeName()));
  }
  std::string hay = self.as_string();
  MX_ASSIGN_OR_RETURN(const std::optional<int64_t> start, SliceIndex(a[1]));
  MX_ASSIGN_OR_RETURN(const std::optional<int64_t> end, SliceIndex(a[2]));
  if (start && *start > static_cast<int64_t>(py::CodePointCount(hay))) return Value::Bool(false);
  if (start || end) {
    int64_t off;
    hay = py::Encode(SubRange(py::Decode(hay), start, end, &off));
  }
  for (const std::string& x : affixes) {
    if (x.size() > hay.size()) continue;
    if (prefix ? hay.compare(0, x.size(), x) == 0
               : hay.compare(hay.size() - x.size(), x.size(), x) == 0) {
      return Value::Bool(true);
    }
  }
  return Value::Bool(false);
}

// find / rfind / index / rindex / count.
Result<Value> Search(Runtime& rt, std::string_view method, const Value& self,
                     const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a, BindArgs(method, args, {"sub", "start", "end"}, 1));
  if (!a[0]->is_string()) return ArgTypeError(method, "str", *a[0]);
  const std::string& text = self.as_string();
  MX_RETURN_IF_ERROR(rt.Charge(text.size() / 64));
  // The [start, end) range in code points, then searched as bytes (a UTF-8
  // needle can only match at character boundaries).
  const bool ascii = py::IsAscii(text);
  const int64_t n = static_cast<int64_t>(ascii ? text.size() : py::CodePointCount(text));
  auto norm = [n](int64_t i) { return i < 0 ? std::max<int64_t>(0, i + n) : std::min(i, n); };
  MX_ASSIGN_OR_RETURN(const std::optional<int64_t> start_arg, SliceIndex(a[1]));
  MX_ASSIGN_OR_RETURN(const std::optional<int64_t> end_arg, SliceIndex(a[2]));
  const int64_t begin = start_arg ? norm(*start_arg) : 0;
  const int64_t end = end_arg ? norm(*end_arg) : n;
  std::vector<size_t> byte_of;  // code point index -> byte offset (non-ASCII only)
  if (!ascii) {
    for (size_t i = 0; i < text.size(); ++i) {
      if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) byte_of.push_back(i);
    }
    byte_of.push_back(text.size());
  }
  auto to_byte = [&](int64_t cp) {
    return ascii ? static_cast<size_t>(cp) : byte_of[static_cast<size_t>(cp)];
  };
  auto to_cp = [&](size_t byte) {
    if (ascii) return static_cast<int64_t>(byte);
    return static_cast<int64_t>(std::lower_bound(byte_of.begin(), byte_of.end(), byte) -
                                byte_of.begin());
  };
  const std::string& needle = a[0]->as_string();
  const bool is_index = method == "index" || method == "rindex";
  // Python refuses a start past the end even for an empty needle.
  const bool start_past_end = start_arg && *start_arg > n;
  if (end < begin || start_past_end) {
    if (method == "count") return Value::Int(0);
    if (is_index) return Status::InvalidArgument("substring not found");
    return Value::Int(-1);
  }
  if (needle.empty()) {
    if (method == "count") return Value::Int(end - begin + 1);
    return Value::Int(method == "rfind" || method == "rindex" ? end : begin);
  }
  const std::string_view hay =
      std::string_view(text).substr(to_byte(begin), to_byte(end) - to_byte(begin));
  if (method == "count") {
    if (needle.empty()) return Value::Int(end - begin + 1);
    int64_t count = 0;
    for (size_t p = FindSubstring(hay, needle); p != std::string_view::npos;
         p = FindSubstring(hay, needle, p + needle.size())) {
      ++count;
    }
    return Value::Int(count);
  }
  const bool reverse = method == "rfind" || method == "rindex";
  const size_t p = reverse ? RFindSubstring(hay, needle) : FindSubstring(hay, needle);
  if (p == std::string_view::npos) {
    if (is_index) return Status::InvalidArgument("substring not found");
    return Value::Int(-1);
  }
  return Value::Int(to_cp(to_byte(begin) + p));
}

Result<Value> Replace(Runtime& rt, const Value& self, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a, BindArgs("replace", args, {"old", "new", "count"}, 2));
  if (!a[0]->is_string() || !a[1]->is_string()) {
    return TypeError("replace() argument must be str");
  }
  MX_ASSIGN_OR_RETURN(int64_t count, IntArg("replace", a[2], -1));
  const std::string& s = self.as_string();
  const std::string& from = a[0]->as_string();
  const std::string& to = a[1]->as_string();
  std::string out;
  if (from.empty()) {
    // Python inserts `to` before every character and at the end.
    const std::u32string cps = py::Decode(s);
    int64_t done = 0;
    for (char32_t c : cps) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      py::AppendUtf8(out, c);
      MX_RETURN_IF_ERROR(rt.CheckString(out.size()));
    }
    if (count < 0 || done < count) out += to;
  } else {
    size_t pos = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
      const size_t f = FindSubstring(s, from, pos);
      if (f == std::string::npos) break;
      out.append(s, pos, f - pos);
      out += to;
      pos = f + from.size();
      ++done;
      MX_RETURN_IF_ERROR(rt.CheckString(out.size()));
    }
    out.append(s, pos, std::string::npos);
  }
  MX_RETURN_IF_ERROR(rt.CheckString(out.size()));
  return StrLike(self, std::move(out));
}

Result<Value> Join(Runtime& rt, const Value& self, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a, BindArgs("join", args, {"iterable"}, 1));
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(rt, *a[0]));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      return TypeError("sequence item " + std::to_string(i) + ": expected str instance, " +
                       std::string(items[i].TypeName()) + " found");
    }
    if (i) out += self.as_string();
    if (self.is_markup() && !items[i].is_markup()) {
      out += EscapeHtml(items[i].as_string());
    } else {
      out += items[i].as_string();
    }
    MX_RETURN_IF_ERROR(rt.CheckString(out.size()));
  }
  return StrLike(self, std::move(out));
}

Result<Value> Pad(Runtime& rt, std::string_view method, const Value& self, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a, BindArgs(method, args, {"width", "fillchar"}, 1));
  MX_ASSIGN_OR_RETURN(int64_t width, IntArg(method, a[0], 0));
  std::u32string fill = U" ";
  if (a[1]) {
    if (!a[1]->is_string() || py::CodePointCount(a[1]->as_string()) != 1) {
      return TypeError("The fill character must be exactly one character long");
    }
    fill = py::Decode(a[1]->as_string());
  }
  const std::string& s = self.as_string();
  const int64_t len = static_cast<int64_t>(py::CodePointCount(s));
  if (width <= len) return self;
  MX_RETURN_IF_ERROR(rt.CheckString(static_cast<size_t>(width) * 4));
  const int64_t marg = width - len;
  int64_t left = 0;
  if (method == "center") {
    left = marg / 2 + (marg & width & 1);
  } else if (method == "rjust") {
    left = marg;
  }
  std::string pad_char = py::Encode(fill);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += pad_char;
  out += s;
  for (int64_t i = 0; i < marg - left; ++i) out += pad_char;
  return StrLike(self, std::move(out));
}

// The is* predicates.
Value Predicate(std::string_view m, std::string_view s) {
  const std::u32string cps = py::Decode(s);
  if (m == "isascii") return Value::Bool(py::IsAscii(s));
  if (m == "isprintable") {
    return Value::Bool(std::all_of(cps.begin(), cps.end(),
                                   [](char32_t c) { return c == ' ' || py::IsPrintable(c); }));
  }
  if (cps.empty()) return Value::Bool(false);
  auto all = [&](auto pred) { return Value::Bool(std::all_of(cps.begin(), cps.end(), pred)); };
  if (m == "isdigit" || m == "isnumeric" || m == "isdecimal") return all(py::IsDigit);
  if (m == "isalpha") return all(py::IsAlpha);
  if (m == "isalnum") return all([](char32_t c) { return py::IsAlpha(c) || py::IsDigit(c); });
  if (m == "isspace") return all(py::IsSpace);
  if (m == "isidentifier") {
    const bool first_ok = py::IsAlpha(cps[0]) || cps[0] == '_';
    return Value::Bool(first_ok && std::all_of(cps.begin(), cps.end(), [](char32_t c) {
                         return py::IsAlpha(c) || py::IsDigit(c) || c == '_';
                       }));
  }
  bool cased = false, upper_seen = false, lower_seen = false;
  for (char32_t c : cps) {
    upper_seen = upper_seen || py::IsUpper(c);
    lower_seen = lower_seen || py::IsLower(c);
  }
  cased = upper_seen || lower_seen;
  if (m == "isupper") return Value::Bool(cased && !lower_seen);
  if (m == "islower") return Value::Bool(cased && !upper_seen);
  // istitle: upper case only after uncased characters, lower case only after cased ones.
  bool previous_cased = false, ok = false;
  for (char32_t c : cps) {
    if (py::IsUpper(c)) {
      if (previous_cased) return Value::Bool(false);
      previous_cased = ok = true;
    } else if (py::IsLower(c)) {
      if (!previous_cased) return Value::Bool(false);
      previous_cased = ok = true;
    } else {
      previous_cased = false;
    }
  }
  return Value::Bool(ok);
}

std::string Unescape(std::string_view s) {
  std::string out;
  static constexpr std::pair<std::string_view, char> kEntities[] = {
      {"&amp;", '&'}, {"&lt;", '<'},   {"&gt;", '>'},   {"&#39;", '\''},
      {"&#34;", '"'}, {"&quot;", '"'}, {"&apos;", '\''}};
  for (size_t i = 0; i < s.size();) {
    bool matched = false;
    for (auto [entity, c] : kEntities) {
      if (s.substr(i, entity.size()) == entity) {
        out.push_back(c);
        i += entity.size();
        matched = true;
        break;
      }
    }
    if (!matched) out.push_back(s[i++]);
  }
  return out;
}

Result<Value> StrMethod(Runtime& rt, const Value& self, std::string_view m, const CallArgs& args) {
  const std::string& s = self.as_string();
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    MX_ASSIGN_OR_RETURN(auto a, BindArgs(m, args, {"chars"}));
    MX_ASSIGN_OR_RETURN(auto chars, OptionalString(m, a[0]));
    return StrLike(self, Strip(s, chars, m != "rstrip", m != "lstrip"));
  }
  if (m == "split" || m == "rsplit") {
    MX_ASSIGN_OR_RETURN(auto a, BindArgs(m, args, {"sep", "maxsplit"}));
    MX_ASSIGN_OR_RETURN(auto sep, OptionalString(m, a[0]));
    MX_ASSIGN_OR_RETURN(int64_t maxsplit, IntArg(m, a[1], -1));
    MX_RETURN_IF_ERROR(rt.Charge(s.size() / 32));
    if (sep && sep->empty()) return Status::InvalidArgument("empty separator");
    ValueList parts = sep ? SplitSep(s, *sep, maxsplit, m == "rsplit")
                          : SplitWhitespace(s, maxsplit, m == "rsplit");
    if (self.is_markup()) {
      for (Value& part : parts) part = Value::Markup(part.as_string());
    }
    MX_RETURN_IF_ERROR(rt.CheckItems(parts.size()));
    return Value::List(std::move(parts));
  }
  if (m == "splitlines") {
    MX_ASSIGN_OR_RETURN(auto a, BindArgs(m, args, {"keepends"}));
    MX_ASSIGN_OR_RETURN(const int64_t keepends, IntArg(m, a[0], 0));
    return Value::List(SplitLines(s, keepends != 0));
  }
  if (m == "startswith" || m == "endswith") {
    MX_ASSIGN_OR_RETURN(auto a, BindArgs(m, args, {"prefix", "start", "end"}, 1));
    return AffixTest(m, self, a, m == "startswith");
  }
  if (m == "replace") return Replace(rt, self, args);
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex" || m == "count") {
    return Search(rt, m, self, args);
  }
  if (m == "join") return Join(rt, self, args);
  if (m == "center" || m == "ljust" || m == "rjust") return Pad(rt, m, self, args);
  if (m.substr(0, 2) == "is") {
    MX_ASSIGN_OR_RETURN(auto a, BindArgs(m, args, {}));
    return Predicate(m, s);
  }
  if (m == "upper" || m == "lower" || m == "title" || m == "capitalize" || m == "casefold" ||
      m == "swapcase") {
    MX_ASSIGN_OR_RETURN(auto a, BindArgs(m, args, {}));
    if (m == "upper") return StrLike(self, py::Upper(s));
    if (m == "lower" || m == "casefold") return StrLike(self, py::Lower(s));
    if (m == "title") return StrLike(self, py::Title(s));
    if (m == "capitalize") return StrLike(self, py::Capitalize(s));
    std::string out;
    for (char32_t c : py::Decode(s)) {
      py::AppendUtf8(out, py::IsUpper(c) ? py::ToLower(c) : py::ToUpper(c));
    }
    return StrLike(self, std::move(out));
  }
  if (m == "zfill") {
    MX_ASSIGN_OR_RETURN(auto a, BindArgs(m, args, {"width"}, 1));
    MX_ASSIGN_OR_RETURN(int64_t width, IntArg(m, a[0], 0));
    const int64_t len = static_cast<int64_t>(py::CodePointCount(s));
    if (width <= len) return self;
    MX_RETURN_IF_ERROR(rt.CheckString(static_cast<size_t>(width)));
    const size_t sign = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
    return StrLike(self, s.substr(0, sign) + std::string(static_cast<size_t>(width - len), '0') +
                             s.substr(sign));
  }
  if (m == "partition" || m == "rpartition") {
    MX_ASSIGN_OR_RETURN(auto a, BindArgs(m, args, {"sep"}, 1));
    if (!a[0]->is_string()) return ArgTypeError(m, "str", *a[0]);
    const std::string& sep = a[0]->as_string();
    if (sep.empty()) return Status::InvalidArgument("empty separator");
    const size_t f = m == "partition" ? FindSubstring(s, sep) : RFindSubstring(s, sep);
    if (f == std::string::npos) {
      if (m == "partition") {
        return Value::Tuple({self, Value::String(""), Value::String("")});
      }
      return Value::Tuple({Value::String(""), Value::String(""), self});
    }
    return Value::Tuple({StrLike(self, s.substr(0, f)), StrLike(self, sep),
                         StrLike(self, s.substr(f + sep.size()))});
  }
  if (m == "removeprefix" || m == "removesuffix") {
    MX_ASSIGN_OR_RETURN(auto a, BindArgs(m, args, {"affix"}, 1));
    if (!a[0]->is_string()) return ArgTypeError(m, "str", *a[0]);
    const std::string& x = a[0]->as_string();
    if (x.size() <= s.size()) {
      if (m == "removeprefix" && s.compare(0, x.size(), x) == 0) {
        return StrLike(self, s.substr(x.size()));
      }
      if (m == "removesuffix" && s.compare(s.size() - x.size(), x.size(), x) == 0) {
        return StrLike(self, s.substr(0, s.size() - x.size()));
      }
    }
    return self;
  }
  if (m == "format") {
    MX_ASSIGN_OR_RETURN(std::string out, BraceFormat(rt, s, args));
    return StrLike(self, std::move(out));
  }
  if (m == "escape") return Value::Markup(EscapeHtml(s));
  if (m == "unescape") return Value::String(Unescape(s));
  if (m == "striptags") {
    std::string out;
    bool in_tag = false;
    for (char c : s) {
      if (c == '<') in_tag = true;
      if (!in_tag) out.push_back(c);
      if (c == '>') in_tag = false;
    }
    const ValueList words = SplitWhitespace(Unescape(out), -1, false);
    std::string joined;
    for (size_t i = 0; i < words.size(); ++i) {
      if (i) joined.push_back(' ');
      joined += words[i].as_string();
    }
    return Value::String(std::move(joined));
  }
  return Status::NotSupported("str." + std::string(m) + "() is not supported in chat templates");
}

Result<Value> SequenceMethod(Runtime& rt, const Value& self, std::string_view m,
                             const CallArgs& args) {
  const ValueList& items = self.as_list();
  MX_RETURN_IF_ERROR(rt.ChargeWeight(self.weight()));
  if (m == "copy") return Value::List(items);
  if (m == "count") {
    MX_ASSIGN_OR_RETURN(auto a, BindArgs(m, args, {"value"}, 1));
    return Value::Int(std::count_if(items.begin(), items.end(),
                                    [&](const Value& v) { return Equals(v, *a[0]); }));
  }
  if (m == "index") {
    MX_ASSIGN_OR_RETURN(auto a, BindArgs(m, args, {"value", "start", "stop"}, 1));
    const int64_t n = static_cast<int64_t>(items.size());
    auto norm = [n](int64_t i) { return i < 0 ? std::max<int64_t>(0, i + n) : std::min(i, n); };
    MX_ASSIGN_OR_RETURN(int64_t b, IntArg(m, a[1], 0));
    MX_ASSIGN_OR_RETURN(int64_t e, IntArg(m, a[2], n));
    for (int64_t i = norm(b); i < norm(e); ++i) {
      if (Equals(items[static_cast<size_t>(i)], *a[0])) return Value::Int(i);
    }
    return Status::InvalidArgument(a[0]->Repr() + " is not in " +
                                   (self.is_tuple() ? "tuple" : "list"));
  }
  return Status::NotSupported(std::string(self.TypeName()) + "." + std::string(m) +
                              "() is not supported in chat templates");
}

Result<Value> DictMethod(Runtime& rt, const Value& self, std::string_view m, const CallArgs& args) {
  const Dict& dict = self.as_dict();
  if (m == "get") {
    MX_ASSIGN_OR_RETURN(auto a, BindArgs(m, args, {"key", "default"}, 1));
    if (!IsHashable(*a[0]))
      return TypeError("unhashable type: '" + std::string(a[0]->TypeName()) + "'");
    if (const Value* v = dict.Find(*a[0])) return *v;
    return a[1] ? *a[1] : Value::None();
  }
  MX_ASSIGN_OR_RETURN(auto a, BindArgs(m, args, {}));
  ValueList out;
  out.reserve(dict.size());
  for (const auto& [k, v] : dict.items()) {
    if (m == "items") {
      out.push_back(Value::Tuple({k, v}));
    } else {
      out.push_back(m == "keys" ? k : v);
    }
  }
  if (m == "items") return Value::Iterator(std::move(out), "dict_items");
  if (m == "keys") return Value::Iterator(std::move(out), "dict_keys");
  if (m == "values") return Value::Iterator(std::move(out), "dict_values");
  if (m == "copy") return self;
  return Status::NotSupported("dict." + std::string(m) + "() is not supported in chat templates");
}

}  // namespace

Result<std::vector<std::optional<Value>>> BindArgs(std::string_view function, const CallArgs& args,
                                                   std::initializer_list<std::string_view> names,
                                                   size_t required) {
  std::vector<std::optional<Value>> out(names.size());
  if (args.positional.size() > names.size()) {
    return TypeError(std::string(function) + "() takes at most " + std::to_string(names.size()) +
                     " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) out[i] = args.positional[i];
  for (const auto& [key, value] : args.keywords) {
    auto it = std::find(names.begin(), names.end(), key);
    if (it == names.end()) {
      return TypeError(std::string(function) + "() got an unexpected keyword argument '" + key +
                       "'");
    }
    const size_t idx = static_cast<size_t>(it - names.begin());
    if (out[idx]) {
      return TypeError(std::string(function) + "() got multiple values for argument '" + key + "'");
    }
    out[idx] = value;
  }
  for (size_t i = 0; i < required; ++i) {
    if (!out[i]) {
      return TypeError(std::string(function) + "() missing required argument '" +
                       std::string(names.begin()[i]) + "'");
    }
  }
  return out;
}

Result<Value> CallMethod(Runtime& rt, const Value& self, std::string_view name,
                         const CallArgs& args) {
  if (self.is_string()) return StrMethod(rt, self, name, args);
  if (self.is_sequence()) return SequenceMethod(rt, self, name, args);
  if (self.is_dict()) return DictMethod(rt, self, name, args);
  return TypeError("'" + std::string(self.TypeName()) + "' object has no method '" +
                   std::string(name) + "'");
}

}  // namespace mx::jinja
