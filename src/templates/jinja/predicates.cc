// jinja2's built-in tests (`x is defined`, `x is string`, ...), as in tests.py.
#include <string_view>

#include "templates/jinja/ast.h"
#include "templates/jinja/ops.h"
#include "templates/jinja/pystr.h"

namespace mx::jinja {
namespace {

Result<Value> OneArg(std::string_view test, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a, BindArgs(test, args, {"other"}, 1));
  return *a[0];
}

Status NoArgs(std::string_view test, const CallArgs& args) {
  return BindArgs(test, args, {}).status();
}

#define MX_SIMPLE_TEST(fn_name, test_name, expr)                         \
  Result<bool> fn_name(Runtime&, const Value& v, const CallArgs& args) { \
    MX_RETURN_IF_ERROR(NoArgs(test_name, args));                         \
    return (expr);                                                       \
  }

MX_SIMPLE_TEST(TDefined, "defined", !v.is_undefined())
MX_SIMPLE_TEST(TUndefined, "undefined", v.is_undefined())
MX_SIMPLE_TEST(TNone, "none", v.is_none())
MX_SIMPLE_TEST(TBoolean, "boolean", v.is_bool())
MX_SIMPLE_TEST(TFalse, "false", v.is_bool() && !v.as_bool())
MX_SIMPLE_TEST(TTrue, "true", v.is_bool() && v.as_bool())
MX_SIMPLE_TEST(TInteger, "integer", v.is_int())
MX_SIMPLE_TEST(TFloat, "float", v.is_float())
MX_SIMPLE_TEST(TString, "string", v.is_string())
MX_SIMPLE_TEST(TMapping, "mapping", v.is_dict())
MX_SIMPLE_TEST(TNumber, "number", v.is_number())
MX_SIMPLE_TEST(TEscaped, "escaped", v.is_markup())
// Undefined and LoopContext are callable in Python (they define __call__).
MX_SIMPLE_TEST(TCallable, "callable",
               v.is_callable() || v.is_undefined() ||
                   (v.is_object() && v.TypeName() == "LoopContext"))
// len() and __getitem__: str, list, tuple, dict and Undefined (!) qualify.
MX_SIMPLE_TEST(TSequence, "sequence",
               v.is_string() || v.is_sequence() || v.is_dict() || v.is_undefined())
MX_SIMPLE_TEST(TIterable, "iterable",
               v.is_string() || v.is_list() || v.is_dict() || v.is_undefined() ||
                   (v.is_object() && v.TypeName() == "LoopContext"))

#undef MX_SIMPLE_TEST

Result<bool> TLower(Runtime& rt, const Value& v, const CallArgs& args) {
  MX_RETURN_IF_ERROR(NoArgs("lower", args));
  MX_ASSIGN_OR_RETURN(Value r, CallMethod(rt, v.is_string() ? v : Value::String(v.Str(1 << 20)),
                                          "islower", CallArgs{}));
  return r.as_bool();
}

Result<bool> TUpper(Runtime& rt, const Value& v, const CallArgs& args) {
  MX_RETURN_IF_ERROR(NoArgs("upper", args));
  MX_ASSIGN_OR_RETURN(Value r, CallMethod(rt, v.is_string() ? v : Value::String(v.Str(1 << 20)),
                                          "isupper", CallArgs{}));
  return r.as_bool();
}

// value % n == r, with Python's operator semantics (and its errors).
Result<bool> ModuloIs(Runtime& rt, const Value& v, const Value& n, int64_t r) {
  MX_ASSIGN_OR_RETURN(Value m, Binary(rt, BinOp::kMod, v, n));
  return Equals(m, Value::Int(r));
}

Result<bool> TOdd(Runtime& rt, const Value& v, const CallArgs& args) {
  MX_RETURN_IF_ERROR(NoArgs("odd", args));
  return ModuloIs(rt, v, Value::Int(2), 1);
}

Result<bool> TEven(Runtime& rt, const Value& v, const CallArgs& args) {
  MX_RETURN_IF_ERROR(NoArgs("even", args));
  return ModuloIs(rt, v, Value::Int(2), 0);
}

Result<bool> TDivisibleBy(Runtime& rt, const Value& v, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a, BindArgs("divisibleby", args, {"num"}, 1));
  return ModuloIs(rt, v, *a[0], 0);
}

Result<bool> TSameAs(Runtime&, const Value& v, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Value other, OneArg("sameas", args));
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kBool:
      return v.as_bool() == other.as_bool();
    case Value::Kind::kInt:
      return v.as_int() == other.as_int();  // small ints are shared
    case Value::Kind::kUndefined:
      return v.identity() == other.identity();
    default:
      return v.identity() == other.identity();
  }
}

Result<bool> TIn(Runtime& rt, const Value& v, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(auto a, BindArgs("in", args, {"seq"}, 1));
  return Contains(rt, *a[0], v);
}

Result<bool> TFilter(Runtime&, const Value& v, const CallArgs& args) {
  MX_RETURN_IF_ERROR(NoArgs("filter", args));
  return v.is_string() && FindFilter(v.as_string()) != nullptr;
}

Result<bool> TTest(Runtime&, const Value& v, const CallArgs& args) {
  MX_RETURN_IF_ERROR(NoArgs("test", args));
  return v.is_string() && FindTest(v.as_string()) != nullptr;
}

template <CmpOp op>
Result<bool> TCompare(Runtime& rt, const Value& v, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Value other, OneArg("compare", args));
  return Compare(rt, op, v, other);
}

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"odd", TOdd},
    {"even", TEven},
    {"divisibleby", TDivisibleBy},
    {"defined", TDefined},
    {"undefined", TUndefined},
    {"filter", TFilter},
    {"test", TTest},
    {"none", TNone},
    {"boolean", TBoolean},
    {"false", TFalse},
    {"true", TTrue},
    {"integer", TInteger},
    {"float", TFloat},
    {"lower", TLower},
    {"upper", TUpper},
    {"string", TString},
    {"mapping", TMapping},
    {"number", TNumber},
    {"sequence", TSequence},
    {"iterable", TIterable},
    {"callable", TCallable},
    {"sameas", TSameAs},
    {"escaped", TEscaped},
    {"in", TIn},
    {"==", TCompare<CmpOp::kEq>},
    {"eq", TCompare<CmpOp::kEq>},
    {"equalto", TCompare<CmpOp::kEq>},
    {"!=", TCompare<CmpOp::kNe>},
    {"ne", TCompare<CmpOp::kNe>},
    {">", TCompare<CmpOp::kGt>},
    {"gt", TCompare<CmpOp::kGt>},
    {"greaterthan", TCompare<CmpOp::kGt>},
    {">=", TCompare<CmpOp::kGe>},
    {"ge", TCompare<CmpOp::kGe>},
    {"<", TCompare<CmpOp::kLt>},
    {"lt", TCompare<CmpOp::kLt>},
    {"lessthan", TCompare<CmpOp::kLt>},
    {"<=", TCompare<CmpOp::kLe>},
    {"le", TCompare<CmpOp::kLe>},
};

}  // namespace

TestFn FindTest(std::string_view name) {
  for (const TestEntry& e : kTests) {
    if (e.name == name) return e.fn;
  }
  return nullptr;
}

}  // namespace mx::jinja
