// The parsed form of a template: expression and statement nodes, built by the
// parser and walked by the interpreter. Immutable after parsing, so a parsed
// template may be rendered from many threads. Internal to the jinja module.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "templates/jinja/runtime.h"
#include "templates/jinja/value.h"

namespace mx::jinja {

using FilterFn = Result<Value> (*)(Runtime& rt, const Value& input, const CallArgs& args);
using TestFn = Result<bool> (*)(Runtime& rt, const Value& input, const CallArgs& args);

// nullptr when there is no such filter / test.
FilterFn FindFilter(std::string_view name);
TestFn FindTest(std::string_view name);

enum class ExprKind : uint8_t {
  kConst,     // value
  kName,      // name, symbol
  kList,      // children: items
  kTuple,     // children: items
  kDict,      // children: key0, value0, key1, value1, ...
  kGetAttr,   // children: [object]; name: attribute
  kGetItem,   // children: [object, index]
  kSlice,     // children: [start, stop, step], each may be null
  kCall,      // children: [callee, args...]; kwargs; dyn_args / dyn_kwargs
  kFilter,    // children: [input (null in a filter block), args...]; name; filter
  kTest,      // children: [input, args...]; name; test
  kNot,       // children: [operand]
  kNeg,       // children: [operand]
  kPos,       // children: [operand]
  kBinary,    // children: [left, right]; bin_op
  kCompare,   // children: [first, operand1, ...]; cmp_ops
  kAnd,       // children: [left, right]
  kOr,        // children: [left, right]
  kCondExpr,  // children: [test, then, else (may be null)]
  kConcat,    // children: operands of ~
};

enum class BinOp : uint8_t { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CmpOp : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Keyword {
  std::string name;
  ExprPtr value;
};

struct Expr {
  ExprKind kind = ExprKind::kConst;
  int line = 0;
  int column = 0;
  Value value;
  std::string name;
  int symbol = -1;
  BinOp bin_op = BinOp::kAdd;
  std::vector<CmpOp> cmp_ops;
  std::vector<ExprPtr> children;
  std::vector<Keyword> kwargs;
  ExprPtr dyn_args;
  ExprPtr dyn_kwargs;
  FilterFn filter = nullptr;
  TestFn test = nullptr;
};

// An assignment target: a name, a namespace attribute (ns.attr) or a tuple.
struct Target {
  enum class Kind : uint8_t { kName, kNamespaceAttr, kTuple };
  Kind kind = Kind::kName;
  std::string name;
  int symbol = -1;
  std::string attr;
  std::vector<Target> items;
  int line = 0;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// A macro or the body of a {% call %} block (the caller).
struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<int> param_symbols;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  Body body;
  bool uses_caller = false;
  bool uses_varargs = false;
  bool uses_kwargs = false;
  int line = 0;
};

enum class StmtKind : uint8_t {
  kData,         // text
  kOutput,       // exprs[0]: printed
  kIf,           // exprs: the if / elif tests; branches: their bodies; else_body
  kFor,          // target; exprs[0]: iterable, exprs[1]: filter (may be null); body; else_body
  kSet,          // target; exprs[0]: value
  kSetBlock,     // target; filter (may be null); body
  kMacro,        // macro; target (the name)
  kCallBlock,    // macro (the caller); exprs[0]: the call
  kFilterBlock,  // filter; body
  kWith,         // targets; exprs: values; body
  kScope,        // body in its own scope ({% generation %})
  kBreak,
  kContinue,
};

struct Stmt {
  StmtKind kind = StmtKind::kData;
  int line = 0;
  std::string text;
  std::vector<ExprPtr> exprs;
  Target target;
  std::vector<Target> targets;
  Body body;
  std::vector<Body> branches;
  Body else_body;
  bool recursive = false;
  ExprPtr filter;
  std::shared_ptr<const MacroDef> macro;
};

// A parsed template.
struct Program {
  Body body;
  std::vector<std::string> symbols;  // symbol id -> name
  int loop_symbol = -1;              // ids of the names the interpreter binds itself
  int varargs_symbol = -1;
  int kwargs_symbol = -1;
  int caller_symbol = -1;
};

}  // namespace mx::jinja
