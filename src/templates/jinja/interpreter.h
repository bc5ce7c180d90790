// The tree-walking evaluator behind Template::Render: one Interpreter per
// render, holding the output buffer, the scopes, the step / depth counters and
// the objects to release at the end. Internal to the jinja module.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"
#include "templates/jinja/ast.h"
#include "templates/jinja/runtime.h"
#include "templates/jinja/template.h"
#include "templates/jinja/value.h"

namespace mx::jinja {

// Variables of one frame: the template's top level, one loop iteration, one
// macro call. Lookups fall through to the parent.
class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}
  const Value* Find(int symbol) const;
  void Set(int symbol, Value value);
  void Clear() {
    vars_.clear();
    index_.clear();
    parent_.reset();
  }

 private:
  const Value* FindHere(int symbol) const;

  std::shared_ptr<Scope> parent_;
  std::vector<std::pair<int, Value>> vars_;
  // symbol -> position in vars_, built once a scope holds many names (the top
  // level of a large template) so that lookups stay O(1).
  std::unordered_map<int, size_t> index_;
};
using ScopePtr = std::shared_ptr<Scope>;

// A macro (or a {% call %} block's caller) with the scope it was defined in.
class MacroCallable final : public Callable {
 public:
  MacroCallable(std::shared_ptr<const MacroDef> def, ScopePtr closure)
      : def_(std::move(def)), closure_(std::move(closure)) {}
  std::string Repr() const override;
  std::string_view TypeName() const override { return "Macro"; }
  const MacroDef& def() const { return *def_; }
  const ScopePtr& closure() const { return closure_; }

 private:
  std::shared_ptr<const MacroDef> def_;
  ScopePtr closure_;
};

// range, namespace, dict, raise_exception, strftime_now.
class BuiltinCallable final : public Callable {
 public:
  enum class Id { kRange, kNamespace, kDict, kRaiseException, kStrftimeNow };
  explicit BuiltinCallable(Id id) : id_(id) {}
  std::string Repr() const override;
  std::string_view TypeName() const override { return "builtin_function_or_method"; }
  Id id() const { return id_; }

 private:
  Id id_;
};

// jinja2's LoopContext: `loop.index`, `loop.cycle(...)`, `loop(children)` for
// recursive loops.
class LoopObject final : public Object {
 public:
  LoopObject(ValueList items, int depth0, const Stmt* node, ScopePtr scope)
      : items_(std::move(items)), depth0_(depth0), node_(node), scope_(std::move(scope)) {}
  std::string_view TypeName() const override { return "LoopContext"; }
  std::string ObjectTypeRepr() const override { return "jinja2.runtime.LoopContext object"; }
  std::optional<Value> GetAttr(std::string_view name) const override;
  void AppendRepr(std::string& out, int depth, size_t max_bytes) const override;
  void Clear() override {
    items_.clear();
    scope_.reset();
    last_changed_ = Value();
  }

  const ValueList& items() const { return items_; }
  void set_index0(size_t i) { index0_ = i; }
  size_t index0() const { return index0_; }
  int depth0() const { return depth0_; }
  const Stmt* node() const { return node_; }
  const ScopePtr& scope() const { return scope_; }
  // loop.changed(value): true when `value` differs from the previous call's.
  bool Changed(const Value& value);
  // The Value wrapping this object (set once by its creator).
  std::weak_ptr<Object> self;

 private:
  ValueList items_;
  size_t index0_ = 0;
  int depth0_;
  const Stmt* node_;
  ScopePtr scope_;
  bool has_changed_ = false;
  Value last_changed_;
};

class Interpreter final : public Runtime {
 public:
  Interpreter(const Program& program, const Limits& limits, const RenderOptions& options);
  ~Interpreter() override;

  Result<std::string> Render(const Value& context, RenderErrorInfo* error_info);

  // Runtime:
  Status Charge(uint64_t units) override;
  Status CheckString(size_t bytes) override;
  Status CheckItems(size_t n) override;
  size_t max_string_bytes() const override { return limits_.max_output_bytes; }
  Result<std::string> ToStr(const Value& v) override;
  Result<std::string> ToRepr(const Value& v) override;
  Result<Value> CallValue(const Value& callee, CallArgs args) override;
  Result<Value> CallFilter(std::string_view name, const Value& input, CallArgs args) override;
  Result<bool> CallTest(std::string_view name, const Value& input, CallArgs args) override;

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  // Statements (interpreter.cc).
  Result<Flow> ExecBody(const Body& body, const ScopePtr& scope);
  Result<Flow> Exec(const Stmt& s, const ScopePtr& scope);
  Result<Flow> ExecStmt(const Stmt& s, const ScopePtr& scope);
  Result<Flow> ExecFor(const Stmt& s, const ScopePtr& scope);
  Status RunLoop(const Stmt& s, const ScopePtr& scope, ValueList items, int depth0);
  Status Assign(const Target& target, const Value& value, const ScopePtr& scope);
  Result<std::string> Capture(const Body& body, const ScopePtr& scope);
  Status Write(std::string_view text);
  ScopePtr NewScope(const ScopePtr& parent);

  // Expressions and calls (eval.cc).
  Result<Value> Eval(const Expr& e, const ScopePtr& scope);
  Result<Value> EvalExpr(const Expr& e, const ScopePtr& scope);
  Result<Value> EvalCompare(const Expr& e, const ScopePtr& scope);
  Result<Value> EvalGetItem(const Expr& e, const ScopePtr& scope);
  Result<CallArgs> EvalArgs(const Expr& e, size_t first, const ScopePtr& scope);
  Result<Value> EvalCall(const Expr& e, const ScopePtr& scope);
  // `filter` applied to `input` (filter blocks pass the captured body).
  Result<Value> EvalFilter(const Expr& e, const Value* input, const ScopePtr& scope);
  Result<Value> EvalTest(const Expr& e, const ScopePtr& scope);
  // Runs a filter / test, charged for its input, arguments and result
  // (Runtime::ChargeTouched).
  // (Runtime::ChargeTouched, ChargeCodePoints for the filters / tests that
  // decode code points).
  Result<Value> ApplyFilter(std::string_view name, FilterFn fn, const Value& input,
                            const CallArgs& args);
  Result<bool> ApplyTest(std::string_view name, TestFn fn, const Value& input,
                         const CallArgs& args);
  Result<Value> CallMacro(const MacroCallable& macro, CallArgs args);
  Result<Value> CallBuiltin(const BuiltinCallable& fn, CallArgs args);
  Result<Value> CallLoop(LoopObject& loop, std::string_view method, CallArgs args);
  Value Lookup(const Expr& name, const ScopePtr& scope) const;

  // Errors in the evaluator's own words.
  Status RuntimeError(std::string message) const;

  const Program& program_;
  const Limits& limits_;
  const RenderOptions& options_;
  ScopePtr root_;
  std::string* out_ = nullptr;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;
  int error_line_ = 0;
  bool raised_ = false;
  bool stopped_ = false;  // RenderOptions::should_stop said so
  // Strong references to every scope a closure captured and every mutable
  // object created, released (cleared) at the end of the render so that
  // reference cycles through them (a macro stored in its own scope, a
  // namespace holding itself) cannot leak.
  std::vector<ScopePtr> captured_scopes_;
  std::vector<std::shared_ptr<Object>> objects_;
};

}  // namespace mx::jinja
