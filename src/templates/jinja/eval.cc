// Expressions and calls: names, literals, operators, attribute / item access,
// filters, tests, macro calls and the global functions.
#include <algorithm>
#include <ctime>

#include "templates/jinja/interpreter.h"
#include "templates/jinja/ops.h"
#include "templates/jinja/pystr.h"

namespace mx::jinja {
namespace {

// Statements and expressions nested deeper than this at run time fail (see
// interpreter.cc).
constexpr int kMaxEvalDepth = 1000;
// jinja2's sandbox refuses larger ranges.
constexpr int64_t kMaxRange = 100000;

bool IsIntLike(const Value& v) { return v.is_int() || v.is_bool(); }
int64_t IntOf(const Value& v) { return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int(); }

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

std::string Strftime(const DateTime& t, std::string_view format) {
  static constexpr const char* kMonths[] = {"January",   "February", "March",    "April",
                                            "May",       "June",     "July",     "August",
                                            "September", "October",  "November", "December"};
  static constexpr const char* kDays[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                          "Thursday", "Friday", "Saturday"};
  const int month = std::clamp(t.month, 1, 12);
  const int64_t days = DaysFromCivil(t.year, static_cast<unsigned>(month),
                                     static_cast<unsigned>(std::clamp(t.day, 1, 31)));
  const int wday = static_cast<int>(((days % 7) + 11) % 7);  // 1970-01-01 was a Thursday
  const int yday = static_cast<int>(days - DaysFromCivil(t.year, 1, 1));
  auto two = [](int v) {
    char b[16];
    std::snprintf(b, sizeof(b), "%02d", v);
    return std::string(b);
  };
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out.push_back(format[i]);
      continue;
    }
    char c = format[++i];
    bool no_pad = false;
    if (c == '-' && i + 1 < format.size()) {
      no_pad = true;
      c = format[++i];
    }
    auto num = [&](int v) { return no_pad ? std::to_string(v) : two(v); };
    const int hour12 = t.hour % 12 == 0 ? 12 : t.hour % 12;
    switch (c) {
      case 'Y':
        out += std::to_string(t.year);
        break;
      case 'y':
        out += two(t.year % 100);
        break;
      case 'm':
        out += num(month);
        break;
      case 'd':
        out += num(t.day);
        break;
      case 'e': {
        char b[16];
        std::snprintf(b, sizeof(b), "%2d", t.day);
        out += no_pad ? std::to_string(t.day) : b;
        break;
      }
      case 'H':
        out += num(t.hour);
        break;
      case 'I':
        out += num(hour12);
        break;
      case 'M':
        out += num(t.minute);
        break;
      case 'S':
        out += num(t.second);
        break;
      case 'p':
        out += t.hour < 12 ? "AM" : "PM";
        break;
      case 'B':
        out += kMonths[month - 1];
        break;
      case 'b':
      case 'h':
        out += std::string(kMonths[month - 1]).substr(0, 3);
        break;
      case 'A':
        out += kDays[wday];
        break;
      case 'a':
        out += std::string(kDays[wday]).substr(0, 3);
        break;
      case 'w':
        out += std::to_string(wday);
        break;
      case 'u':
        out += std::to_string(wday == 0 ? 7 : wday);
        break;
      case 'j': {
        char b[16];
        std::snprintf(b, sizeof(b), "%03d", yday + 1);
        out += no_pad ? std::to_string(yday + 1) : b;
        break;
      }
      case 'F':
        out += std::to_string(t.year) + "-" + two(month) + "-" + two(t.day);
        break;
      case 'T':
        out += two(t.hour) + ":" + two(t.minute) + ":" + two(t.second);
        break;
      case 'R':
        out += two(t.hour) + ":" + two(t.minute);
        break;
      case 'D':
        out += two(month) + "/" + two(t.day) + "/" + two(t.year % 100);
        break;
      case 'c':
        out += std::string(kDays[wday]).substr(0, 3) + " " +
               std::string(kMonths[month - 1]).substr(0, 3) + " ";
        {
          char b[16];
          std::snprintf(b, sizeof(b), "%2d", t.day);
          out += b;
        }
        out += " " + two(t.hour) + ":" + two(t.minute) + ":" + two(t.second) + " " +
               std::to_string(t.year);
        break;
      case 'x':
        out += two(month) + "/" + two(t.day) + "/" + two(t.year % 100);
        break;
      case 'X':
        out += two(t.hour) + ":" + two(t.minute) + ":" + two(t.second);
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case '%':
        out.push_back('%');
        break;
      case 'z':
      case 'Z':
        break;  // a naive datetime has no zone
      default:
        out.push_back('%');
        if (no_pad) out.push_back('-');
        out.push_back(c);
    }
  }
  return out;
}

// dict(*args, **kwargs) / namespace(*args, **kwargs).
Result<Dict> DictFromArgs(Runtime& rt, std::string_view fn, const CallArgs& args) {
  Dict d;
  if (args.positional.size() > 1) {
    return TypeError(std::string(fn) + " expected at most 1 argument, got " +
                     std::to_string(args.positional.size()));
  }
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_undefined()) return UndefinedError(src);  // dict() looks up src.keys
    if (src.is_dict()) {
      d = src.as_dict();
    } else {
      MX_ASSIGN_OR_RETURN(ValueList pairs, Iterate(rt, src));
      for (const Value& p : pairs) {
        MX_ASSIGN_OR_RETURN(ValueList kv, Iterate(rt, p));
        if (kv.size() != 2) {
          return Status::InvalidArgument("dictionary update sequence element has length " +
                                         std::to_string(kv.size()) + "; 2 is required");
        }
        if (!IsHashable(kv[0])) {
          return TypeError("unhashable type: '" + std::string(kv[0].TypeName()) + "'");
        }
        MX_RETURN_IF_ERROR(rt.ChargeWeight(kv[0].weight()));
        d.Set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keywords) d.Set(Value::String(k), v);
  return d;
}

}  // namespace

Value Interpreter::Lookup(const Expr& name, const ScopePtr& scope) const {
  if (const Value* v = scope->Find(name.symbol)) return *v;
  return Value::Undefined(py::ReprString(name.name) + " is undefined");
}

Result<Value> Interpreter::Eval(const Expr& e, const ScopePtr& scope) {
  if (Status st = Charge(1); !st.ok()) {
    if (error_line_ == 0) error_line_ = e.line;
    return st;
  }
  if (++eval_depth_ > kMaxEvalDepth) {
    --eval_depth_;
    if (error_line_ == 0) error_line_ = e.line;
    return Status::ResourceExhausted("statements and expressions nested deeper than " +
                                     std::to_string(kMaxEvalDepth));
  }
  Result<Value> r = EvalExpr(e, scope);
  --eval_depth_;
  if (!r.ok() && error_line_ == 0) error_line_ = e.line;
  return r;
}

Result<Value> Interpreter::EvalExpr(const Expr& e, const ScopePtr& scope) {
  switch (e.kind) {
    case ExprKind::kConst:
      return e.value;
    case ExprKind::kName:
      return Lookup(e, scope);
    case ExprKind::kList:
    case ExprKind::kTuple: {
      ValueList items;
      items.reserve(e.children.size());
      for (const ExprPtr& c : e.children) {
        MX_ASSIGN_OR_RETURN(Value v, Eval(*c, scope));
        items.push_back(std::move(v));
      }
      return e.kind == ExprKind::kList ? Value::List(std::move(items))
                                       : Value::Tuple(std::move(items));
    }
    case ExprKind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        MX_ASSIGN_OR_RETURN(Value k, Eval(*e.children[i], scope));
        MX_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i + 1], scope));
        MX_RETURN_IF_ERROR(ChargeTouched(k));  // hashed and compared
        if (!IsHashable(k))
          return TypeError("unhashable type: '" + std::string(k.TypeName()) + "'");
        d.Set(std::move(k), std::move(v));
      }
      return Value::FromDict(std::move(d));
    }
    case ExprKind::kGetAttr: {
      MX_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], scope));
      return GetAttr(obj, e.name);
    }
    case ExprKind::kGetItem:
      return EvalGetItem(e, scope);
    case ExprKind::kSlice:
      return RuntimeError("a slice is only valid inside []");
    case ExprKind::kCall:
      return EvalCall(e, scope);
    case ExprKind::kFilter:
      return EvalFilter(e, nullptr, scope);
    case ExprKind::kTest:
      return EvalTest(e, scope);
    case ExprKind::kNot: {
      MX_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0], scope));
      return Value::Bool(!v.Truthy());
    }
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      MX_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0], scope));
      return e.kind == ExprKind::kNeg ? Negate(v) : Positive(v);
    }
    case ExprKind::kBinary: {
      MX_ASSIGN_OR_RETURN(Value a, Eval(*e.children[0], scope));
      MX_ASSIGN_OR_RETURN(Value b, Eval(*e.children[1], scope));
      MX_RETURN_IF_ERROR(ChargeTouched(a));
      MX_RETURN_IF_ERROR(ChargeTouched(b));
      MX_ASSIGN_OR_RETURN(Value r, Binary(*this, e.bin_op, a, b));
      MX_RETURN_IF_ERROR(ChargeTouched(r));
      return r;
    }
    case ExprKind::kCompare:
      return EvalCompare(e, scope);
    case ExprKind::kAnd:
    case ExprKind::kOr: {
      MX_ASSIGN_OR_RETURN(Value a, Eval(*e.children[0], scope));
      if (a.Truthy() == (e.kind == ExprKind::kOr)) return a;
      return Eval(*e.children[1], scope);
    }
    case ExprKind::kCondExpr: {
      MX_ASSIGN_OR_RETURN(Value test, Eval(*e.children[0], scope));
      if (test.Truthy()) return Eval(*e.children[1], scope);
      if (e.children[2]) return Eval(*e.children[2], scope);
      return Value::Undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
    case ExprKind::kConcat: {
      std::string out;
      for (const ExprPtr& c : e.children) {
        MX_ASSIGN_OR_RETURN(Value v, Eval(*c, scope));
        if (v.is_string()) {
          out += v.as_string();
        } else {
          MX_ASSIGN_OR_RETURN(std::string text, ToStr(v));
          out += text;
        }
        MX_RETURN_IF_ERROR(CheckString(out.size()));
      }
      return Value::String(std::move(out));
    }
  }
  return Status::Internal("unknown expression");
}

Result<Value> Interpreter::EvalCompare(const Expr& e, const ScopePtr& scope) {
  MX_ASSIGN_OR_RETURN(Value left, Eval(*e.children[0], scope));
  for (size_t i = 0; i < e.cmp_ops.size(); ++i) {
    MX_ASSIGN_OR_RETURN(Value right, Eval(*e.children[i + 1], scope));
    MX_RETURN_IF_ERROR(ChargeTouched(left));
    MX_RETURN_IF_ERROR(ChargeTouched(right));
    MX_ASSIGN_OR_RETURN(bool ok, Compare(*this, e.cmp_ops[i], left, right));
    if (!ok) return Value::Bool(false);
    left = std::move(right);
  }
  return Value::Bool(true);
}

Result<Value> Interpreter::EvalGetItem(const Expr& e, const ScopePtr& scope) {
  MX_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0], scope));
  const Expr& index = *e.children[1];
  if (index.kind != ExprKind::kSlice) {
    MX_ASSIGN_OR_RETURN(Value key, Eval(index, scope));
    if (key.is_list()) MX_RETURN_IF_ERROR(ChargeWeight(key.weight()));  // hashing a tuple
    // A string is indexed by code point (a scan) and a string key hashed;
    // a list or dict lookup is O(1) and charged nothing more.
    if (obj.is_string()) MX_RETURN_IF_ERROR(ChargeTouched(obj));
    if (key.is_string()) MX_RETURN_IF_ERROR(ChargeTouched(key));
    return GetItem(obj, key);
  }
  Value bounds[3];
  for (int i = 0; i < 3; ++i) {
    if (index.children[i]) {
      MX_ASSIGN_OR_RETURN(bounds[i], Eval(*index.children[i], scope));
    } else {
      bounds[i] = Value::None();
    }
  }
  MX_RETURN_IF_ERROR(ChargeTouched(obj));
  MX_RETURN_IF_ERROR(ChargeCodePoints('s', "", obj));
  MX_ASSIGN_OR_RETURN(Value r, Slice(*this, obj, bounds[0], bounds[1], bounds[2]));
  MX_RETURN_IF_ERROR(ChargeTouched(r));
  return r;
}

Result<CallArgs> Interpreter::EvalArgs(const Expr& e, size_t first, const ScopePtr& scope) {
  CallArgs args;
  for (size_t i = first; i < e.children.size(); ++i) {
    MX_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i], scope));
    args.positional.push_back(std::move(v));
  }
  for (const Keyword& kw : e.kwargs) {
    MX_ASSIGN_OR_RETURN(Value v, Eval(*kw.value, scope));
    args.keywords.emplace_back(kw.name, std::move(v));
  }
  if (e.dyn_args) {
    MX_ASSIGN_OR_RETURN(Value v, Eval(*e.dyn_args, scope));
    MX_ASSIGN_OR_RETURN(ValueList extra, Iterate(*this, v));
    MX_RETURN_IF_ERROR(CheckItems(args.positional.size() + extra.size()));
    args.positional.insert(args.positional.end(), extra.begin(), extra.end());
  }
  if (e.dyn_kwargs) {
    MX_ASSIGN_OR_RETURN(Value v, Eval(*e.dyn_kwargs, scope));
    if (!v.is_dict())
      return TypeError("argument after ** must be a mapping, not " + std::string(v.TypeName()));
    for (const auto& [k, kv] : v.as_dict().items()) {
      if (!k.is_string()) return TypeError("keywords must be strings");
      args.keywords.emplace_back(k.as_string(), kv);
    }
  }
  return args;
}

Result<Value> Interpreter::EvalCall(const Expr& e, const ScopePtr& scope) {
  MX_ASSIGN_OR_RETURN(Value callee, Eval(*e.children[0], scope));
  MX_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, scope));
  return CallValue(callee, std::move(args));
}

Result<Value> Interpreter::EvalFilter(const Expr& e, const Value* input, const ScopePtr& scope) {
  Value in;
  if (const ExprPtr& child = e.children[0]) {
    if (child->kind == ExprKind::kFilter) {
      MX_ASSIGN_OR_RETURN(in, EvalFilter(*child, input, scope));
    } else {
      MX_ASSIGN_OR_RETURN(in, Eval(*child, scope));
    }
  } else if (input != nullptr) {
    in = *input;
  }
  MX_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, scope));
  if (e.filter == nullptr) return RuntimeError("No filter named '" + e.name + "' found.");
  return ApplyFilter(e.name, e.filter, in, args);
}

Result<Value> Interpreter::EvalTest(const Expr& e, const ScopePtr& scope) {
  MX_ASSIGN_OR_RETURN(Value in, Eval(*e.children[0], scope));
  MX_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1, scope));
  if (e.test == nullptr) return RuntimeError("No test named '" + e.name + "' found.");
  MX_ASSIGN_OR_RETURN(bool ok, ApplyTest(e.name, e.test, in, args));
  return Value::Bool(ok);
}

Result<Value> Interpreter::CallFilter(std::string_view name, const Value& input, CallArgs args) {
  const FilterFn fn = FindFilter(name);
  if (fn == nullptr) return RuntimeError("No filter named " + py::ReprString(name) + ".");
  return ApplyFilter(name, fn, input, args);
}

Result<Value> Interpreter::ApplyFilter(std::string_view name, FilterFn fn, const Value& input,
                                       const CallArgs& args) {
  MX_RETURN_IF_ERROR(ChargeTouched(input));
  MX_RETURN_IF_ERROR(ChargeCodePoints('f', name, input));
  MX_RETURN_IF_ERROR(ChargeTouched(args));
  MX_ASSIGN_OR_RETURN(Value out, fn(*this, input, args));
  MX_RETURN_IF_ERROR(ChargeTouched(out));
  return out;
}

Result<bool> Interpreter::ApplyTest(std::string_view name, TestFn fn, const Value& input,
                                    const CallArgs& args) {
  MX_RETURN_IF_ERROR(ChargeTouched(input));
  MX_RETURN_IF_ERROR(ChargeCodePoints('t', name, input));
  MX_RETURN_IF_ERROR(ChargeTouched(args));
  return fn(*this, input, args);
}

Result<bool> Interpreter::CallTest(std::string_view name, const Value& input, CallArgs args) {
  const TestFn fn = FindTest(name);
  if (fn == nullptr) return RuntimeError("No test named " + py::ReprString(name) + ".");
  return ApplyTest(name, fn, input, args);
}

Result<Value> Interpreter::CallValue(const Value& callee, CallArgs args) {
  if (callee.is_undefined()) return UndefinedError(callee);
  if (callee.is_callable()) {
    const Callable* fn = callee.as_callable();
    if (const auto* macro = dynamic_cast<const MacroCallable*>(fn)) {
      return CallMacro(*macro, std::move(args));
    }
    if (const auto* builtin = dynamic_cast<const BuiltinCallable*>(fn)) {
      return CallBuiltin(*builtin, std::move(args));
    }
    if (const auto* method = dynamic_cast<const BoundMethod*>(fn)) {
      if (method->self().is_object()) {
        auto* loop = dynamic_cast<LoopObject*>(method->self().as_object().get());
        if (loop != nullptr) return CallLoop(*loop, method->name(), std::move(args));
      }
      MX_RETURN_IF_ERROR(ChargeTouched(method->self()));
      MX_RETURN_IF_ERROR(ChargeCodePoints('m', method->name(), method->self()));
      MX_RETURN_IF_ERROR(ChargeTouched(args));
      MX_ASSIGN_OR_RETURN(Value out, CallMethod(*this, method->self(), method->name(), args));
      MX_RETURN_IF_ERROR(ChargeTouched(out));
      return out;
    }
  }
  if (callee.is_object()) {
    if (auto* loop = dynamic_cast<LoopObject*>(callee.as_object().get())) {
      return CallLoop(*loop, "", std::move(args));
    }
  }
  return TypeError("'" + std::string(callee.TypeName()) + "' object is not callable");
}

Result<Value> Interpreter::CallMacro(const MacroCallable& macro, CallArgs args) {
  const MacroDef& def = macro.def();
  if (call_depth_ >= limits_.max_call_depth) {
    return Status::ResourceExhausted("macro calls nested deeper than " +
                                     std::to_string(limits_.max_call_depth) + " (max_call_depth)");
  }
  const std::string quoted = py::ReprString(def.name);
  const size_t n_params = def.params.size();
  const size_t n_positional = std::min(args.positional.size(), n_params);
  std::vector<std::optional<Value>> bound(n_params);
  for (size_t i = 0; i < n_positional; ++i) bound[i] = args.positional[i];
  std::vector<std::pair<std::string, Value>> extra;
  std::optional<Value> caller;
  for (auto& [name, value] : args.keywords) {
    auto it = std::find(def.params.begin(), def.params.end(), name);
    const size_t idx = static_cast<size_t>(it - def.params.begin());
    if (it != def.params.end() && idx >= n_positional && !bound[idx]) {
      bound[idx] = std::move(value);
    } else if (name == "caller" && def.uses_caller && !caller) {
      caller = std::move(value);
    } else {
      extra.emplace_back(std::move(name), std::move(value));
    }
  }
  ScopePtr scope = NewScope(macro.closure());
  if (def.uses_caller &&
      std::find(def.params.begin(), def.params.end(), "caller") == def.params.end()) {
    scope->Set(program_.caller_symbol, caller ? *caller : Value::Undefined("No caller defined"));
  }
  if (def.uses_kwargs) {
    Dict kw;
    for (auto& [name, value] : extra) kw.Set(Value::String(name), value);
    scope->Set(program_.kwargs_symbol, Value::FromDict(std::move(kw)));
  } else if (!extra.empty()) {
    if (extra.front().first == "caller") {
      return TypeError("macro " + quoted +
                       " was invoked with two values for the special caller argument. This is "
                       "most likely a bug.");
    }
    return TypeError("macro " + quoted + " takes no keyword argument " +
                     py::ReprString(extra.front().first));
  }
  if (def.uses_varargs) {
    ValueList rest;
    if (args.positional.size() > n_params) {
      rest.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(n_params),
                  args.positional.end());
    }
    scope->Set(program_.varargs_symbol, Value::Tuple(std::move(rest)));
  } else if (args.positional.size() > n_params) {
    return TypeError("macro " + quoted + " takes not more than " + std::to_string(n_params) +
                     " argument(s)");
  }
  const size_t first_default = n_params - def.defaults.size();
  for (size_t i = 0; i < n_params; ++i) {
    if (bound[i]) {
      scope->Set(def.param_symbols[i], std::move(*bound[i]));
    } else if (i >= first_default) {
      MX_ASSIGN_OR_RETURN(Value d, Eval(*def.defaults[i - first_default], scope));
      scope->Set(def.param_symbols[i], std::move(d));
    } else {
      scope->Set(
          def.param_symbols[i],
          Value::Undefined("parameter " + py::ReprString(def.params[i]) + " was not provided"));
    }
  }
  ++call_depth_;
  Result<std::string> out = Capture(def.body, scope);
  --call_depth_;
  if (!out.ok()) return out.status();
  return Value::String(std::move(out).value());
}

Result<Value> Interpreter::CallBuiltin(const BuiltinCallable& fn, CallArgs args) {
  using Id = BuiltinCallable::Id;
  switch (fn.id()) {
    case Id::kRange: {
      if (!args.keywords.empty()) return TypeError("range() takes no keyword arguments");
      const ValueList& p = args.positional;
      if (p.empty() || p.size() > 3) {
        return TypeError("range expected 1 to 3 arguments, got " + std::to_string(p.size()));
      }
      for (const Value& v : p) {
        if (!IsIntLike(v)) {
          return TypeError("'" + std::string(v.TypeName()) +
                           "' object cannot be interpreted as an integer");
        }
      }
      const int64_t start = p.size() == 1 ? 0 : IntOf(p[0]);
      const int64_t stop = p.size() == 1 ? IntOf(p[0]) : IntOf(p[1]);
      const int64_t step = p.size() == 3 ? IntOf(p[2]) : 1;
      if (step == 0) return Status::InvalidArgument("range() arg 3 must not be zero");
      // Count without overflow: the number of values in [start, stop) by step.
      const long double span = static_cast<long double>(stop) - static_cast<long double>(start);
      const long double count_ld = span / static_cast<long double>(step);
      if (count_ld > static_cast<long double>(kMaxRange)) {
        return Status::ResourceExhausted(
            "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      }
      ValueList out;
      for (int64_t v = start; step > 0 ? v < stop : v > stop; v += step) {
        out.push_back(Value::Int(v));
        if (static_cast<int64_t>(out.size()) > kMaxRange) break;
        if ((step > 0 && v > INT64_MAX - step) || (step < 0 && v < INT64_MIN - step)) break;
      }
      MX_RETURN_IF_ERROR(CheckItems(out.size()));
      return Value::List(std::move(out));
    }
    case Id::kNamespace: {
      MX_ASSIGN_OR_RETURN(Dict d, DictFromArgs(*this, "namespace", args));
      auto ns = std::make_shared<Namespace>();
      for (const auto& [k, v] : d.items()) {
        if (k.is_string()) ns->Set(k.as_string(), v);
      }
      objects_.push_back(ns);
      return Value::FromObject(std::move(ns));
    }
    case Id::kDict: {
      MX_ASSIGN_OR_RETURN(Dict d, DictFromArgs(*this, "dict", args));
      return Value::FromDict(std::move(d));
    }
    case Id::kRaiseException: {
      MX_ASSIGN_OR_RETURN(auto a, BindArgs("raise_exception", args, {"message"}, 1));
      raised_ = true;
      return Status::InvalidArgument(a[0]->Str());
    }
    case Id::kStrftimeNow: {
      MX_ASSIGN_OR_RETURN(auto a, BindArgs("strftime_now", args, {"format"}, 1));
      if (!a[0]->is_string()) {
        return TypeError("strftime() argument 1 must be str, not " + std::string(a[0]->TypeName()));
      }
      MX_RETURN_IF_ERROR(CheckString(a[0]->as_string().size() * 16));
      return Value::String(Strftime(options_.now, a[0]->as_string()));
    }
  }
  return Status::Internal("unknown builtin");
}

Result<Value> Interpreter::CallLoop(LoopObject& loop, std::string_view method, CallArgs args) {
  if (method == "cycle") {
    if (args.positional.empty()) return TypeError("no items for cycling given");
    return args.positional[loop.index0() % args.positional.size()];
  }
  if (method == "changed") {
    Value value = Value::Tuple(std::move(args.positional));
    MX_RETURN_IF_ERROR(ChargeWeight(value.weight()));
    return Value::Bool(loop.Changed(value));
  }
  if (!loop.node()->recursive) {
    return TypeError("The loop must have the 'recursive' marker to be called recursively.");
  }
  if (args.positional.size() != 1 || !args.keywords.empty()) {
    return TypeError("loop() takes exactly one argument (the items to loop over)");
  }
  if (call_depth_ >= limits_.max_call_depth) {
    return Status::ResourceExhausted("recursive loop calls nested deeper than " +
                                     std::to_string(limits_.max_call_depth) + " (max_call_depth)");
  }
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(*this, args.positional[0]));
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  ++call_depth_;
  Status st = RunLoop(*loop.node(), loop.scope(), std::move(items), loop.depth0() + 1);
  --call_depth_;
  out_ = saved;
  MX_RETURN_IF_ERROR(st);
  return Value::String(std::move(buffer));
}

}  // namespace mx::jinja
