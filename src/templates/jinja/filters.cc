// jinja2's built-in filters (filters.py) plus transformers' tojson, with the
// same argument names and defaults: string and number filters here, sequence
// filters in filters_seq.cc, and the table of all of them.
#include <algorithm>
#include <cmath>
#include <string_view>

#include "templates/jinja/ast.h"
#include "templates/jinja/filters_impl.h"
#include "templates/jinja/json.h"
#include "templates/jinja/ops.h"
#include "templates/jinja/pystr.h"

namespace mx::jinja {
namespace filters_internal {

Value StrLike(const Value& like, std::string s) {
  return like.is_markup() ? Value::Markup(std::move(s)) : Value::String(std::move(s));
}

// jinja2's soft_str: str(value), keeping Markup.
Result<Value> SoftStr(Runtime& rt, const Value& v) {
  if (v.is_string()) return v;
  MX_ASSIGN_OR_RETURN(std::string s, rt.ToStr(v));
  return Value::String(std::move(s));
}

Result<bool> StrictBoolParam(const std::optional<Value>& v, bool dflt) {
  if (!v) return dflt;
  if (IsIntLike(*v)) return IntOf(*v) != 0;
  if (v->is_undefined()) return UndefinedError(*v);
  return TypeError("'" + std::string(v->TypeName()) +
                   "' object cannot be interpreted as an integer");
}

Result<int64_t> IntParam(std::string_view filter, const std::optional<Value>& v, int64_t dflt) {
  if (!v || v->is_none()) return dflt;
  if (IsIntLike(*v)) return IntOf(*v);
  return TypeError(std::string(filter) + ": expected an integer, got " +
                   std::string(v->TypeName()));
}

// make_attrgetter: "a.b.0" looked up item by item (integer parts as ints).
Result<Value> GetPath(const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return GetItem(item, attribute);
  Value cur = item;
  std::string_view path = attribute.as_string();
  while (true) {
    const size_t dot = path.find('.');
    std::string_view part = path.substr(0, dot);
    const bool digits =
        !part.empty() && part.size() < 18 &&
        std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    MX_ASSIGN_OR_RETURN(cur, GetItem(cur, digits ? Value::Int(std::stoll(std::string(part)))
                                                 : Value::String(std::string(part))));
    if (dot == std::string_view::npos) return cur;
    path.remove_prefix(dot + 1);
  }
}

Value IgnoreCase(const Value& v) {
  return v.is_string() ? Value::String(py::Lower(v.as_string())) : v;
}

// Sort keys: Python's sorted() with a key function, stable; TypeError on
// unorderable keys (reported after sorting stops at the first one).
Status SortByKeys(Runtime& rt, std::vector<std::pair<Value, Value>>& keyed, bool reverse) {
  Status error;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    if (!error.ok()) return false;
    Result<bool> lt = reverse ? Less(rt, b.first, a.first) : Less(rt, a.first, b.first);
    if (!lt.ok()) {
      error = lt.status();
      return false;
    }
    return *lt;
  });
  return error;
}

namespace {

// ---- string filters ------------------------------------------------------------

Result<Value> FTrim(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("trim", args, {"chars"}));
  CallArgs strip_args;
  if (a[0]) strip_args.positional.push_back(*a[0]);
  MX_ASSIGN_OR_RETURN(Value s, SoftStr(rt, in));
  return CallMethod(rt, s, "strip", strip_args);
}

Result<Value> FUpper(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("upper", args, {}).status());
  MX_ASSIGN_OR_RETURN(const Value s, SoftStr(rt, in));
  return StrLike(s, py::Upper(s.as_string()));
}

Result<Value> FLower(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("lower", args, {}).status());
  MX_ASSIGN_OR_RETURN(const Value s, SoftStr(rt, in));
  return StrLike(s, py::Lower(s.as_string()));
}

Result<Value> FCapitalize(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("capitalize", args, {}).status());
  MX_ASSIGN_OR_RETURN(const Value s, SoftStr(rt, in));
  return StrLike(s, py::Capitalize(s.as_string()));
}

// jinja2's title: words start after runs of whitespace, '-', '(', '{', '[', '<'.
Result<Value> FTitle(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("title", args, {}).status());
  MX_ASSIGN_OR_RETURN(const Value s, SoftStr(rt, in));
  std::string out;
  bool word_start = true;
  for (char32_t c : py::Decode(s.as_string())) {
    const bool sep = py::IsSpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      py::AppendUtf8(out, c);
      word_start = true;
    } else if (word_start) {
      out += py::Upper(py::Encode(std::u32string(1, c)));
      word_start = false;
    } else {
      py::AppendUtf8(out, py::ToLower(c));
    }
  }
  return StrLike(s, std::move(out));
}

Result<Value> FReplace(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("replace", args, {"old", "new", "count"}, 2));
  CallArgs r;
  MX_ASSIGN_OR_RETURN(Value old_s, SoftStr(rt, *a[0]));
  MX_ASSIGN_OR_RETURN(Value new_s, SoftStr(rt, *a[1]));
  r.positional = {old_s, new_s};
  if (a[2] && !a[2]->is_none()) r.positional.push_back(*a[2]);
  MX_ASSIGN_OR_RETURN(std::string text, rt.ToStr(in));
  MX_ASSIGN_OR_RETURN(Value out, CallMethod(rt, Value::String(std::move(text)), "replace", r));
  return out;
}

Result<Value> FString(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("string", args, {}).status());
  return SoftStr(rt, in);
}

Result<Value> FSafe(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("safe", args, {}).status());
  MX_ASSIGN_OR_RETURN(std::string text, rt.ToStr(in));
  return Value::Markup(std::move(text));
}

Result<Value> FEscape(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("escape", args, {}).status());
  if (in.is_markup()) return in;
  MX_ASSIGN_OR_RETURN(std::string text, rt.ToStr(in));
  return Value::Markup(EscapeHtml(text));
}

Result<Value> FForceEscape(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("forceescape", args, {}).status());
  MX_ASSIGN_OR_RETURN(std::string text, rt.ToStr(in));
  return Value::Markup(EscapeHtml(text));
}

Result<Value> FIndent(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("indent", args, {"width", "first", "blank"}));
  std::string indention = "    ";
  if (a[0] && a[0]->is_string()) {
    indention = a[0]->as_string();
  } else if (a[0]) {
    MX_ASSIGN_OR_RETURN(int64_t w, IntParam("indent", a[0], 4));
    MX_RETURN_IF_ERROR(rt.CheckString(static_cast<size_t>(std::max<int64_t>(w, 0))));
    indention = std::string(static_cast<size_t>(std::max<int64_t>(w, 0)), ' ');
  }
  const bool first = BoolParam(a[1], false), blank = BoolParam(a[2], false);
  // jinja2 appends "\n" to the value first: only strings work.
  if (in.is_undefined()) return UndefinedError(in);
  if (!in.is_string()) {
    return TypeError("unsupported operand type(s) for +=: '" + std::string(in.TypeName()) +
                     "' and 'str'");
  }
  const Value& s = in;
  MX_ASSIGN_OR_RETURN(
      Value lines_v, CallMethod(rt, Value::String(s.as_string() + "\n"), "splitlines", CallArgs{}));
  const ValueList& lines = lines_v.as_list();
  std::string rv;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i].as_string();
    if (i > 0) {
      rv += "\n";
      if (blank || !line.empty()) rv += indention;
    }
    rv += line;
    MX_RETURN_IF_ERROR(rt.CheckString(rv.size()));
  }
  if (first) rv = indention + rv;
  return StrLike(s, std::move(rv));
}

Result<Value> FCenter(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("center", args, {"width"}));
  CallArgs c;
  c.positional.push_back(a[0] ? *a[0] : Value::Int(80));
  MX_ASSIGN_OR_RETURN(Value s, SoftStr(rt, in));
  return CallMethod(rt, s, "center", c);
}

Result<Value> FTruncate(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("truncate", args, {"length", "killwords", "end", "leeway"}));
  MX_ASSIGN_OR_RETURN(int64_t length, IntParam("truncate", a[0], 255));
  const bool killwords = BoolParam(a[1], false);
  const Value end = a[2] ? *a[2] : Value::String("...");
  MX_ASSIGN_OR_RETURN(int64_t leeway, IntParam("truncate", a[3], 5));
  MX_ASSIGN_OR_RETURN(const int64_t end_len, Length(end));
  if (length < end_len) {
    return Status::InvalidArgument("expected length >= " + std::to_string(end_len) + ", got " +
                                   std::to_string(length));
  }
  if (leeway < 0)
    return Status::InvalidArgument("expected leeway >= 0, got " + std::to_string(leeway));
  // Python takes len() of the value and returns it unchanged when it is short.
  MX_ASSIGN_OR_RETURN(const int64_t n, Length(in));
  if (n <= length + leeway) return in;
  if (!in.is_string()) {
    return TypeError("truncate: expected a string, got " + std::string(in.TypeName()));
  }
  if (end.is_undefined()) return UndefinedError(end);
  if (!end.is_string()) {
    return TypeError("can only concatenate str (not \"" + std::string(end.TypeName()) +
                     "\") to str");
  }
  const std::u32string cps = py::Decode(in.as_string());
  std::u32string head = cps.substr(0, static_cast<size_t>(length - end_len));
  if (!killwords) {
    const size_t sp = head.rfind(U' ');
    if (sp != std::u32string::npos) head = head.substr(0, sp);
  }
  return Value::String(py::Encode(head) + end.as_string());
}

Result<Value> FWordcount(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("wordcount", args, {}).status());
  int64_t n = 0;
  bool in_word = false;
  MX_ASSIGN_OR_RETURN(std::string text, rt.ToStr(in));
  for (char32_t c : py::Decode(text)) {
    const bool w = py::IsAlpha(c) || py::IsDigit(c) || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::Int(n);
}

Result<Value> FFormat(Runtime& rt, const Value& in, const CallArgs& args) {
  if (!args.positional.empty() && !args.keywords.empty()) {
    return Status::InvalidArgument(
        "can't handle positional and keyword arguments at the same time");
  }
  Value fmt_args;
  if (!args.keywords.empty()) {
    Dict d;
    for (const auto& [k, v] : args.keywords) d.Set(Value::String(k), v);
    fmt_args = Value::FromDict(std::move(d));
  } else {
    fmt_args = Value::Tuple(args.positional);
  }
  MX_ASSIGN_OR_RETURN(const Value s, SoftStr(rt, in));
  MX_ASSIGN_OR_RETURN(std::string out, PercentFormat(rt, s.as_string(), fmt_args, s.is_markup()));
  return StrLike(s, std::move(out));
}

// ---- number filters -----------------------------------------------------------

Result<Value> FInt(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("int", args, {"default", "base"}));
  const Value dflt = a[0] ? *a[0] : Value::Int(0);
  if (in.is_undefined()) return UndefinedError(in);
  if (IsIntLike(in)) return Value::Int(IntOf(in));
  auto from_double = [&](double d) -> Result<Value> {
    if (std::isnan(d) || std::isinf(d)) return dflt;
    if (std::fabs(d) >= 9.2e18) return Status::NotSupported("integer overflow");
    return Value::Int(static_cast<int64_t>(d));
  };
  if (in.is_float()) return from_double(in.as_float());
  if (!in.is_string()) return dflt;
  // int(value, base); a bad base or text falls back to int(float(value)), as
  // jinja2's do_int does ("42.23"|int is 42), then to the default.
  const int base = a[1] && IsIntLike(*a[1]) && IntOf(*a[1]) >= 0 && IntOf(*a[1]) <= 36
                       ? static_cast<int>(IntOf(*a[1]))
                       : (a[1] ? -1 : 10);
  bool overflow = false;
  if (base >= 0) {
    if (std::optional<int64_t> v = py::ParseInt(in.as_string(), base, &overflow)) {
      return Value::Int(*v);
    }
    if (overflow) return Status::NotSupported("integer overflow (Python ints are unbounded)");
  }
  if (std::optional<double> d = py::ParseFloat(in.as_string())) return from_double(*d);
  return dflt;
}

Result<Value> FFloat(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("float", args, {"default"}));
  const Value dflt = a[0] ? *a[0] : Value::Float(0.0);
  if (in.is_undefined()) return UndefinedError(in);
  if (in.is_number()) return Value::Float(in.as_number());
  if (!in.is_string()) return dflt;
  if (std::optional<double> d = py::ParseFloat(in.as_string())) return Value::Float(*d);
  return dflt;
}

Result<Value> FAbs(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("abs", args, {}).status());
  if (in.is_float()) return Value::Float(std::fabs(in.as_float()));
  if (IsIntLike(in)) {
    if (IntOf(in) == INT64_MIN) return Status::NotSupported("integer overflow");
    return Value::Int(std::llabs(IntOf(in)));
  }
  if (in.is_undefined()) return UndefinedError(in);
  return TypeError("bad operand type for abs(): '" + std::string(in.TypeName()) + "'");
}

Result<Value> FRound(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("round", args, {"precision", "method"}));
  MX_ASSIGN_OR_RETURN(int64_t precision, IntParam("round", a[0], 0));
  const std::string method = a[1] ? a[1]->Str() : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    return Status::InvalidArgument("method must be common, ceil or floor");
  }
  if (in.is_undefined()) return UndefinedError(in);
  if (!in.is_number()) {
    return TypeError("type " + std::string(in.TypeName()) + " doesn't define __round__ method");
  }
  precision = std::clamp<int64_t>(precision, -308, 308);
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = in.as_number();
  if (method == "common") {
    if (IsIntLike(in) && precision >= 0) return Value::Int(IntOf(in));  // round(int) is an int
    // Python rounds half to even.
    const double scaled = x * scale;
    double r = std::nearbyint(scaled);
    if (!std::isfinite(scaled)) r = scaled;
    return Value::Float(r / scale);
  }
  const double r = method == "ceil" ? std::ceil(x * scale) : std::floor(x * scale);
  return Value::Float(r / scale);
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys).
Result<Value> FToJson(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(
      Args a, BindArgs("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"}));
  JsonDumpOptions opts;
  opts.max_bytes = rt.max_string_bytes();
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string()) {
      opts.indent = a[1]->as_string();
    } else {
      MX_ASSIGN_OR_RETURN(int64_t n, IntParam("tojson", a[1], 0));
      opts.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(n, 0, 1024)), ' ');
    }
  }
  if (a[2] && !a[2]->is_none()) {
    MX_ASSIGN_OR_RETURN(ValueList seps, Iterate(rt, *a[2]));
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string()) {
      return Status::InvalidArgument("tojson: separators must be a pair of strings");
    }
    opts.item_separator = seps[0].as_string();
    opts.key_separator = seps[1].as_string();
  }
  opts.sort_keys = BoolParam(a[3], false);
  MX_ASSIGN_OR_RETURN(std::string out, ToJson(in, opts));
  if (a[0] && a[0]->Truthy()) {
    std::string ascii;
    char buf[16];
    for (char32_t c : py::Decode(out)) {
      if (c < 0x80) {
        ascii.push_back(static_cast<char>(c));
      } else if (c < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(c));
        ascii += buf;
      } else {
        const unsigned v = static_cast<unsigned>(c) - 0x10000;
        std::snprintf(buf, sizeof(buf), "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
        ascii += buf;
      }
    }
    out = std::move(ascii);
  }
  MX_RETURN_IF_ERROR(rt.CheckString(out.size()));
  return Value::String(std::move(out));
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kFilters[] = {
    {"abs", FAbs},
    {"attr", FAttr},
    {"batch", FBatch},
    {"capitalize", FCapitalize},
    {"center", FCenter},
    {"count", FLength},
    {"d", FDefault},
    {"default", FDefault},
    {"dictsort", FDictsort},
    {"e", FEscape},
    {"escape", FEscape},
    {"first", FFirst},
    {"float", FFloat},
    {"forceescape", FForceEscape},
    {"format", FFormat},
    {"groupby", FGroupby},
    {"indent", FIndent},
    {"int", FInt},
    {"items", FItems},
    {"join", FJoin},
    {"last", FLast},
    {"length", FLength},
    {"list", FList},
    {"lower", FLower},
    {"map", FMap},
    {"max", FMax},
    {"min", FMin},
    {"reject", FReject},
    {"rejectattr", FRejectAttr},
    {"replace", FReplace},
    {"reverse", FReverse},
    {"round", FRound},
    {"safe", FSafe},
    {"select", FSelect},
    {"selectattr", FSelectAttr},
    {"slice", FSlice},
    {"sort", FSort},
    {"string", FString},
    {"sum", FSum},
    {"title", FTitle},
    {"tojson", FToJson},
    {"trim", FTrim},
    {"truncate", FTruncate},
    {"unique", FUnique},
    {"upper", FUpper},
    {"wordcount", FWordcount},
};

}  // namespace
}  // namespace filters_internal

FilterFn FindFilter(std::string_view name) {
  for (const filters_internal::FilterEntry& e : filters_internal::kFilters) {
    if (e.name == name) return e.fn;
  }
  return nullptr;
}

}  // namespace mx::jinja
