#include "templates/jinja/ops.h"

#include <string.h>

#include <algorithm>
#include <cmath>

#include "templates/jinja/pystr.h"

namespace mx::jinja {
namespace {

std::string TypeNameOf(const Value& v) { return std::string(v.TypeName()); }

Status Unsupported(std::string_view op, const Value& a, const Value& b) {
  return TypeError("unsupported operand type(s) for " + std::string(op) + ": '" + TypeNameOf(a) +
                   "' and '" + TypeNameOf(b) + "'");
}

// bool is an int in Python arithmetic.
bool IsIntLike(const Value& v) { return v.is_int() || v.is_bool(); }
int64_t IntOf(const Value& v) { return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int(); }

Status Overflow() { return Status::NotSupported("integer overflow (Python ints are unbounded)"); }

Result<Value> Repeat(Runtime& rt, const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && static_cast<uint64_t>(n) > rt.max_string_bytes() / s.size()) {
      return rt.CheckString(rt.max_string_bytes() + 1);
    }
    MX_RETURN_IF_ERROR(rt.CheckString(s.size() * static_cast<size_t>(n)));
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += s;
    return seq.is_markup() ? Value::Markup(std::move(out)) : Value::String(std::move(out));
  }
  const ValueList& items = seq.as_list();
  if (!items.empty() && static_cast<uint64_t>(n) > (1ull << 40) / items.size()) {
    return rt.CheckItems(SIZE_MAX);
  }
  MX_RETURN_IF_ERROR(rt.CheckItems(items.size() * static_cast<size_t>(n)));
  ValueList out;
  out.reserve(items.size() * static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return seq.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

Result<Value> Add(Runtime& rt, const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return Value::Float(a.as_number() + b.as_number());
    int64_t r;
    if (__builtin_add_overflow(IntOf(a), IntOf(b), &r)) return Overflow();
    return Value::Int(r);
  }
  if (a.is_string() && b.is_string()) {
    const bool markup = a.is_markup() || b.is_markup();
    std::string lhs = (markup && !a.is_markup()) ? EscapeHtml(a.as_string()) : a.as_string();
    const std::string rhs = (markup && !b.is_markup()) ? EscapeHtml(b.as_string()) : b.as_string();
    MX_RETURN_IF_ERROR(rt.CheckString(lhs.size() + rhs.size()));
    lhs += rhs;
    return markup ? Value::Markup(std::move(lhs)) : Value::String(std::move(lhs));
  }
  if (a.is_sequence() && b.is_sequence() && a.is_tuple() == b.is_tuple()) {
    MX_RETURN_IF_ERROR(rt.CheckItems(a.as_list().size() + b.as_list().size()));
    ValueList out = a.as_list();
    out.insert(out.end(), b.as_list().begin(), b.as_list().end());
    return a.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
  }
  if (a.is_string() && !a.is_markup()) {
    return TypeError("can only concatenate str (not \"" + TypeNameOf(b) + "\") to str");
  }
  if (a.is_sequence()) {
    const std::string self = a.is_tuple() ? "tuple" : "list";
    return TypeError("can only concatenate " + self + " (not \"" + TypeNameOf(b) + "\") to " +
                     self);
  }
  return Unsupported("+", a, b);
}

Result<Value> Multiply(Runtime& rt, const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return Value::Float(a.as_number() * b.as_number());
    int64_t r;
    if (__builtin_mul_overflow(IntOf(a), IntOf(b), &r)) return Overflow();
    return Value::Int(r);
  }
  if ((a.is_string() || a.is_sequence()) && IsIntLike(b)) return Repeat(rt, a, IntOf(b));
  if ((b.is_string() || b.is_sequence()) && IsIntLike(a)) return Repeat(rt, b, IntOf(a));
  if ((a.is_string() || a.is_sequence()) && (b.is_string() || b.is_sequence() || b.is_float())) {
    return TypeError("can't multiply sequence by non-int of type '" + TypeNameOf(b) + "'");
  }
  return Unsupported("*", a, b);
}

Result<Value> FloorDivide(const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) return Unsupported("//", a, b);
  if (a.is_float() || b.is_float()) {
    const double x = a.as_number(), y = b.as_number();
    if (y == 0) return Status::InvalidArgument("float floor division by zero");
    double mod = std::fmod(x, y);
    double div = (x - mod) / y;
    if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1.0;
    double floordiv;
    if (div != 0) {
      floordiv = std::floor(div);
      if (div - floordiv > 0.5) floordiv += 1.0;
    } else {
      floordiv = std::copysign(0.0, x / y);
    }
    return Value::Float(floordiv);
  }
  const int64_t x = IntOf(a), y = IntOf(b);
  if (y == 0) return Status::InvalidArgument("integer division or modulo by zero");
  if (x == INT64_MIN && y == -1) return Overflow();
  int64_t q = x / y;
  if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
  return Value::Int(q);
}

Result<Value> Modulo(Runtime& rt, const Value& a, const Value& b) {
  if (a.is_string()) {
    MX_ASSIGN_OR_RETURN(std::string s, PercentFormat(rt, a.as_string(), b, a.is_markup()));
    return a.is_markup() ? Value::Markup(std::move(s)) : Value::String(std::move(s));
  }
  if (!a.is_number() || !b.is_number()) return Unsupported("%", a, b);
  if (a.is_float() || b.is_float()) {
    const double x = a.as_number(), y = b.as_number();
    if (y == 0) return Status::InvalidArgument("float modulo");
    double mod = std::fmod(x, y);
    if (mod != 0) {
      if ((y < 0) != (mod < 0)) mod += y;
    } else {
      mod = std::copysign(0.0, y);
    }
    return Value::Float(mod);
  }
  const int64_t x = IntOf(a), y = IntOf(b);
  if (y == 0) return Status::InvalidArgument("integer modulo by zero");
  if (y == -1) return Value::Int(0);
  int64_t m = x % y;
  if (m != 0 && ((m < 0) != (y < 0))) m += y;
  return Value::Int(m);
}

Result<Value> Power(const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) return Unsupported("** or pow()", a, b);
  if (!a.is_float() && !b.is_float() && IntOf(b) >= 0) {
    int64_t base = IntOf(a), exp = IntOf(b), result = 1;
    while (exp > 0) {
      if (exp & 1) {
        if (__builtin_mul_overflow(result, base, &result)) return Overflow();
      }
      exp >>= 1;
      if (exp > 0 && __builtin_mul_overflow(base, base, &base)) return Overflow();
    }
    return Value::Int(result);
  }
  const double x = a.as_number(), y = b.as_number();
  if (x == 0 && y < 0) return Status::InvalidArgument("0.0 cannot be raised to a negative power");
  if (x < 0 && y != std::floor(y)) {
    return Status::NotSupported("a negative number to a fractional power gives a complex number");
  }
  const double r = std::pow(x, y);
  if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) {
    return Status::InvalidArgument("(34, 'Numerical result out of range')");  // OverflowError
  }
  return Value::Float(r);
}

const char* CmpSymbol(CmpOp op) {
  switch (op) {
    case CmpOp::kLt:
      return "<";
    case CmpOp::kLe:
      return "<=";
    case CmpOp::kGt:
      return ">";
    case CmpOp::kGe:
      return ">=";
    default:
      return "==";
  }
}

// -1, 0, 1; or a TypeError naming `op`.
Result<int> Order(const Value& a, const Value& b, CmpOp op, int depth) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  if (a.is_number() && b.is_number()) {
    if (!a.is_float() && !b.is_float()) {
      const int64_t x = IntOf(a), y = IntOf(b);
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const double x = a.as_number(), y = b.as_number();
    if (std::isnan(x) || std::isnan(y)) return 2;  // unordered: every comparison false
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_sequence() && b.is_sequence() && a.is_tuple() == b.is_tuple() && depth > 0) {
    const ValueList& x = a.as_list();
    const ValueList& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!Equals(x[i], y[i])) return Order(x[i], y[i], op, depth - 1);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  return TypeError(std::string("'") + CmpSymbol(op) + "' not supported between instances of '" +
                   TypeNameOf(a) + "' and '" + TypeNameOf(b) + "'");
}

int64_t ClampIndex(int64_t i, int64_t len, int64_t lower, int64_t upper) {
  if (i < 0) {
    i += len;
    if (i < lower) i = lower;
  } else if (i > upper) {
    i = upper;
  }
  return i;
}

const char* const kStrMethods[] = {
    "capitalize",   "casefold",    "center",    "count",      "encode",       "endswith",
    "expandtabs",   "find",        "format",    "format_map", "index",        "isalnum",
    "isalpha",      "isascii",     "isdecimal", "isdigit",    "isidentifier", "islower",
    "isnumeric",    "isprintable", "isspace",   "istitle",    "isupper",      "join",
    "ljust",        "lower",       "lstrip",    "maketrans",  "partition",    "removeprefix",
    "removesuffix", "replace",     "rfind",     "rindex",     "rjust",        "rpartition",
    "rsplit",       "rstrip",      "split",     "splitlines", "startswith",   "strip",
    "swapcase",     "title",       "translate", "upper",      "zfill"};
const char* const kMarkupMethods[] = {"escape", "unescape", "striptags"};
const char* const kListSafe[] = {"copy", "count", "index"};
const char* const kListUnsafe[] = {"append", "clear",  "extend",  "insert",
                                   "pop",    "remove", "reverse", "sort"};
const char* const kTupleMethods[] = {"count", "index"};
const char* const kDictSafe[] = {"copy", "fromkeys", "get", "items", "keys", "values"};
const char* const kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};

template <size_t N>
bool InList(const char* const (&list)[N], std::string_view name) {
  for (const char* m : list) {
    if (name == m) return true;
  }
  return false;
}

// The attribute `name` of `obj` that Python has (a method), if any.
std::optional<Value> MethodAttribute(const Value& obj, std::string_view name) {
  bool unsafe = false;
  if (!HasMethod(obj, name, &unsafe)) return std::nullopt;
  if (unsafe) {
    return Value::Undefined("access to attribute " + py::ReprString(name) + " of " +
                                py::ReprString(obj.TypeName()) + " object is unsafe.",
                            /*security=*/true);
  }
  return Value::FromCallable(std::make_shared<BoundMethod>(obj, std::string(name)));
}

}  // namespace

Status TypeError(std::string message) { return Status::InvalidArgument(std::move(message)); }

Status UndefinedError(const Value& undefined) {
  const std::string& msg = undefined.undefined_message();
  return Status::InvalidArgument(msg.empty() ? "value is undefined" : msg);
}

std::string BoundMethod::Repr() const {
  return "<built-in method " + name_ + " of " + ObjectTypeRepr(self_) + ">";
}

std::string ObjectTypeRepr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNone:
      return "None";
    case Value::Kind::kUndefined:
      return "jinja2.runtime.Undefined object";
    case Value::Kind::kString:
      return v.is_markup() ? "markupsafe.Markup object" : "str object";
    case Value::Kind::kObject:
      return v.as_object()->ObjectTypeRepr();
    case Value::Kind::kCallable:
      if (v.TypeName() == "Macro") return "jinja2.runtime.Macro object";
      return std::string(v.TypeName()) + " object";
    default:
      return std::string(v.TypeName()) + " object";
  }
}

Value MissingAttribute(const Value& obj, std::string_view name) {
  // A huge name (a string key) is cut short in the message, at a character
  // boundary: building the message must not cost its size.
  constexpr size_t kMaxNameBytes = 1000;
  if (name.size() > kMaxNameBytes) {
    size_t cut = kMaxNameBytes;
    while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
    return Value::Undefined(py::ReprString(ObjectTypeRepr(obj)) + " has no attribute " +
                            py::ReprString(name.substr(0, cut)) + "...");
  }
  return Value::Undefined(py::ReprString(ObjectTypeRepr(obj)) + " has no attribute " +
                          py::ReprString(name));
}

Value MissingElement(const Value& obj, const Value& key) {
  if (key.is_string()) return MissingAttribute(obj, key.as_string());
  // The key is printed as Python would, cut short if huge.
  return Value::Undefined(ObjectTypeRepr(obj) + " has no element " +
                          key.Repr(Value::kMaxReprDepth, 1000));
}

Result<Value> Binary(Runtime& rt, BinOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) return UndefinedError(a);
  if (b.is_undefined()) return UndefinedError(b);
  switch (op) {
    case BinOp::kAdd:
      return Add(rt, a, b);
    case BinOp::kSub:
      if (!a.is_number() || !b.is_number()) return Unsupported("-", a, b);
      if (a.is_float() || b.is_float()) return Value::Float(a.as_number() - b.as_number());
      {
        int64_t r;
        if (__builtin_sub_overflow(IntOf(a), IntOf(b), &r)) return Overflow();
        return Value::Int(r);
      }
    case BinOp::kMul:
      return Multiply(rt, a, b);
    case BinOp::kDiv:
      if (!a.is_number() || !b.is_number()) return Unsupported("/", a, b);
      if (b.as_number() == 0) return Status::InvalidArgument("division by zero");
      return Value::Float(a.as_number() / b.as_number());
    case BinOp::kFloorDiv:
      return FloorDivide(a, b);
    case BinOp::kMod:
      return Modulo(rt, a, b);
    case BinOp::kPow:
      return Power(a, b);
  }
  return Status::Internal("unknown operator");
}

Result<Value> Negate(const Value& v) {
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_float()) return Value::Float(-v.as_float());
  if (IsIntLike(v)) {
    if (IntOf(v) == INT64_MIN) return Overflow();
    return Value::Int(-IntOf(v));
  }
  return TypeError("bad operand type for unary -: '" + TypeNameOf(v) + "'");
}

Result<Value> Positive(const Value& v) {
  if (v.is_undefined()) return UndefinedError(v);
  if (v.is_float()) return v;
  if (IsIntLike(v)) return Value::Int(IntOf(v));
  return TypeError("bad operand type for unary +: '" + TypeNameOf(v) + "'");
}

Result<bool> Less(Runtime& rt, const Value& a, const Value& b) {
  MX_RETURN_IF_ERROR(rt.ChargeWeight(std::min(a.weight(), b.weight())));
  MX_ASSIGN_OR_RETURN(int c, Order(a, b, CmpOp::kLt, Value::kMaxReprDepth));
  return c == -1;
}

Result<bool> Compare(Runtime& rt, CmpOp op, const Value& a, const Value& b) {
  if (op == CmpOp::kIn) return Contains(rt, b, a);
  if (op == CmpOp::kNotIn) {
    MX_ASSIGN_OR_RETURN(bool in, Contains(rt, b, a));
    return !in;
  }
  MX_RETURN_IF_ERROR(rt.ChargeWeight(std::min(a.weight(), b.weight())));
  if (op == CmpOp::kEq) return Equals(a, b);
  if (op == CmpOp::kNe) return !Equals(a, b);
  MX_ASSIGN_OR_RETURN(int c, Order(a, b, op, Value::kMaxReprDepth));
  if (c == 2) return false;
  switch (op) {
    case CmpOp::kLt:
      return c < 0;
    case CmpOp::kLe:
      return c <= 0;
    case CmpOp::kGt:
      return c > 0;
    case CmpOp::kGe:
      return c >= 0;
    default:
      return false;
  }
}

Result<bool> Contains(Runtime& rt, const Value& container, const Value& item) {
  MX_RETURN_IF_ERROR(rt.ChargeWeight(container.weight() + item.weight()));
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        return TypeError("'in <string>' requires string as left operand, not " + TypeNameOf(item));
      }
      return FindSubstring(container.as_string(), item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.as_list()) {
        if (Equals(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (!IsHashable(item)) return TypeError("unhashable type: '" + TypeNameOf(item) + "'");
      return container.as_dict().Find(item) != nullptr;
    default:
      return TypeError("argument of type '" + TypeNameOf(container) + "' is not iterable");
  }
}

bool HasMethod(const Value& self, std::string_view name, bool* unsafe) {
  *unsafe = false;
  if (self.is_string()) {
    return InList(kStrMethods, name) || (self.is_markup() && InList(kMarkupMethods, name));
  }
  if (self.is_dict()) {
    if (InList(kDictUnsafe, name)) {
      *unsafe = true;
      return true;
    }
    return InList(kDictSafe, name);
  }
  if (self.is_tuple()) return InList(kTupleMethods, name);
  if (self.is_sequence()) {
    if (InList(kListUnsafe, name)) {
      *unsafe = true;
      return true;
    }
    return InList(kListSafe, name);
  }
  return false;
}

Result<Value> GetAttr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (std::optional<Value> m = MethodAttribute(obj, name)) return *m;
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().Find(name)) return *v;
  } else if (obj.is_object()) {
    if (std::optional<Value> v = obj.as_object()->GetAttr(name)) return *v;
  }
  return MissingAttribute(obj, name);
}

Result<Value> GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.is_dict()) {
    if (IsHashable(key)) {
      if (const Value* v = obj.as_dict().Find(key)) return *v;
    }
  } else if (obj.is_sequence() && IsIntLike(key)) {
    const ValueList& items = obj.as_list();
    int64_t i = IntOf(key);
    const int64_t n = static_cast<int64_t>(items.size());
    if (i < 0) i += n;
    if (i >= 0 && i < n) return items[static_cast<size_t>(i)];
  } else if (obj.is_string() && IsIntLike(key)) {
    const std::string& s = obj.as_string();
    int64_t i = IntOf(key);
    if (py::IsAscii(s)) {
      const int64_t n = static_cast<int64_t>(s.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value::String(std::string(1, s[static_cast<size_t>(i)]));
    } else {
      const std::u32string cps = py::Decode(s);
      const int64_t n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) {
        std::string out;
        py::AppendUtf8(out, cps[static_cast<size_t>(i)]);
        return Value::String(std::move(out));
      }
    }
  }
  if (key.is_string()) {
    if (std::optional<Value> m = MethodAttribute(obj, key.as_string())) return *m;
    if (obj.is_object()) {
      if (std::optional<Value> v = obj.as_object()->GetAttr(key.as_string())) return *v;
    }
  }
  return MissingElement(obj, key);
}

Result<Value> Slice(Runtime& rt, const Value& obj, const Value& start, const Value& stop,
                    const Value& step) {
  // jinja2 compiles x[a:b] to Python's own slicing (not the sandboxed
  // getitem), so its errors are raised rather than turned into Undefined.
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.is_dict()) return TypeError("unhashable type: 'slice'");
  if (!obj.is_string() && !obj.is_sequence()) {
    return TypeError("'" + TypeNameOf(obj) + "' object is not subscriptable");
  }
  for (const Value* b : {&start, &stop, &step}) {
    if (!b->is_none() && !IsIntLike(*b)) {
      return TypeError("slice indices must be integers or None or have an __index__ method");
    }
  }
  const bool has_step = IsIntLike(step);
  const int64_t st = has_step ? IntOf(step) : 1;
  if (st == 0) return Status::InvalidArgument("slice step cannot be zero");
  std::u32string cps;
  const bool ascii = obj.is_string() && py::IsAscii(obj.as_string());
  if (obj.is_string() && !ascii) cps = py::Decode(obj.as_string());
  const int64_t len = static_cast<int64_t>(
      obj.is_string() ? (ascii ? obj.as_string().size() : cps.size()) : obj.as_list().size());
  const int64_t lower = st > 0 ? 0 : -1;
  const int64_t upper = st > 0 ? len : len - 1;
  int64_t begin =
      IsIntLike(start) ? ClampIndex(IntOf(start), len, lower, upper) : (st > 0 ? lower : upper);
  int64_t end =
      IsIntLike(stop) ? ClampIndex(IntOf(stop), len, lower, upper) : (st > 0 ? upper : lower);
  std::vector<size_t> picks;
  for (int64_t i = begin; st > 0 ? i < end : i > end; i += st) {
    picks.push_back(static_cast<size_t>(i));
    if ((st > 0 && i > INT64_MAX - st) || (st < 0 && i < INT64_MIN - st)) break;
  }
  MX_RETURN_IF_ERROR(rt.Charge(picks.size() / 16));
  if (obj.is_string()) {
    std::string out;
    out.reserve(picks.size());
    if (ascii) {
      for (size_t i : picks) out.push_back(obj.as_string()[i]);
    } else {
      for (size_t i : picks) py::AppendUtf8(out, cps[i]);
    }
    return obj.is_markup() ? Value::Markup(std::move(out)) : Value::String(std::move(out));
  }
  ValueList out;
  out.reserve(picks.size());
  for (size_t i : picks) out.push_back(obj.as_list()[i]);
  return obj.is_tuple() ? Value::Tuple(std::move(out)) : Value::List(std::move(out));
}

size_t FindSubstring(std::string_view hay, std::string_view needle, size_t from) {
  if (from > hay.size()) return std::string_view::npos;
  if (needle.empty()) return from;
  // glibc's memmem is the two-way algorithm: linear, unlike std::string::find.
  const void* p = memmem(hay.data() + from, hay.size() - from, needle.data(), needle.size());
  if (p == nullptr) return std::string_view::npos;
  return static_cast<size_t>(static_cast<const char*>(p) - hay.data());
}

size_t RFindSubstring(std::string_view hay, std::string_view needle) {
  if (needle.size() > hay.size()) return std::string_view::npos;
  if (needle.empty()) return hay.size();
  const std::string rhay(hay.rbegin(), hay.rend());
  const std::string rneedle(needle.rbegin(), needle.rend());
  const size_t p = FindSubstring(rhay, rneedle);
  if (p == std::string_view::npos) return p;
  return hay.size() - p - needle.size();
}

Result<ValueList> Iterate(Runtime& rt, const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return ValueList{};
    case Value::Kind::kList:
      MX_RETURN_IF_ERROR(rt.Charge(v.as_list().size() / 16));
      return v.as_list();
    case Value::Kind::kDict: {
      MX_RETURN_IF_ERROR(rt.Charge(v.as_dict().size() / 16));
      ValueList keys;
      keys.reserve(v.as_dict().size());
      for (const auto& [k, val] : v.as_dict().items()) keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      ValueList chars;
      const std::string& s = v.as_string();
      MX_RETURN_IF_ERROR(rt.CheckItems(s.size()));
      if (py::IsAscii(s)) {
        for (char c : s) chars.push_back(Value::String(std::string(1, c)));
      } else {
        for (char32_t cp : py::Decode(s)) {
          std::string one;
          py::AppendUtf8(one, cp);
          chars.push_back(Value::String(std::move(one)));
        }
      }
      return chars;
    }
    default:
      return TypeError("'" + TypeNameOf(v) + "' object is not iterable");
  }
}

Result<int64_t> Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(py::CodePointCount(v.as_string()));
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.as_dict().size());
    case Value::Kind::kList: {
      const std::string_view type = v.iterator_type();
      if (v.is_iterator() && type != "dict_items" && type != "dict_keys" && type != "dict_values") {
        break;
      }
      return static_cast<int64_t>(v.as_list().size());
    }
    default:
      break;
  }
  return TypeError("object of type '" + TypeNameOf(v) + "' has no len()");
}

std::string EscapeHtml(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

}  // namespace mx::jinja
