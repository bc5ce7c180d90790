// Statements: output, if, for (loop object, filter, else, recursion), set,
// block set, macro definitions, call / filter blocks, with; plus the render
// entry point, the limits and the end-of-render cleanup.
#include "templates/jinja/interpreter.h"

#include <algorithm>
#include <iterator>

#include "templates/jinja/ops.h"
#include "templates/jinja/pystr.h"

namespace mx::jinja {
namespace {

// Statements and expressions nested deeper than this at run time (macro
// recursion multiplies the parse-time nesting) fail instead of exhausting the
// thread's stack.
constexpr int kMaxEvalDepth = 1000;
// How often (in steps) Charge asks RenderOptions::should_stop.
constexpr uint64_t kStopCheckSteps = 1 << 16;

}  // namespace

// ---- Scope -------------------------------------------------------------------

namespace {
constexpr size_t kScopeIndexThreshold = 16;
}  // namespace

const Value* Scope::FindHere(int symbol) const {
  if (!index_.empty()) {
    auto it = index_.find(symbol);
    return it == index_.end() ? nullptr : &vars_[it->second].second;
  }
  for (const auto& [sym, value] : vars_) {
    if (sym == symbol) return &value;
  }
  return nullptr;
}

const Value* Scope::Find(int symbol) const {
  for (const Scope* s = this; s != nullptr; s = s->parent_.get()) {
    if (const Value* v = s->FindHere(symbol)) return v;
  }
  return nullptr;
}

void Scope::Set(int symbol, Value value) {
  if (const Value* v = FindHere(symbol)) {
    *const_cast<Value*>(v) = std::move(value);
    return;
  }
  vars_.emplace_back(symbol, std::move(value));
  if (!index_.empty()) {
    index_.emplace(symbol, vars_.size() - 1);
  } else if (vars_.size() >= kScopeIndexThreshold) {
    for (size_t i = 0; i < vars_.size(); ++i) index_.emplace(vars_[i].first, i);
  }
}

// ---- callables and the loop object -----------------------------------------

std::string MacroCallable::Repr() const { return "<Macro " + py::ReprString(def_->name) + ">"; }

std::string BuiltinCallable::Repr() const {
  switch (id_) {
    case Id::kRange:
      return "<class 'range'>";
    case Id::kNamespace:
      return "<class 'jinja2.utils.Namespace'>";
    case Id::kDict:
      return "<class 'dict'>";
    case Id::kRaiseException:
      return "<function raise_exception>";
    case Id::kStrftimeNow:
      return "<function strftime_now>";
  }
  return "<function>";
}

std::optional<Value> LoopObject::GetAttr(std::string_view name) const {
  const size_t n = items_.size();
  const auto i = static_cast<int64_t>(index0_);
  const auto len = static_cast<int64_t>(n);
  if (name == "index") return Value::Int(i + 1);
  if (name == "index0") return Value::Int(i);
  if (name == "revindex") return Value::Int(len - i);
  if (name == "revindex0") return Value::Int(len - i - 1);
  if (name == "first") return Value::Bool(i == 0);
  if (name == "last") return Value::Bool(i + 1 == len);
  if (name == "length") return Value::Int(len);
  if (name == "depth") return Value::Int(depth0_ + 1);
  if (name == "depth0") return Value::Int(depth0_);
  if (name == "previtem") {
    if (index0_ > 0 && index0_ <= n) return items_[index0_ - 1];
    return Value::Undefined("there is no previous item");
  }
  if (name == "nextitem") {
    if (index0_ + 1 < n) return items_[index0_ + 1];
    return Value::Undefined("there is no next item");
  }
  if (name == "cycle" || name == "changed") {
    if (std::shared_ptr<Object> me = self.lock()) {
      return Value::FromCallable(
          std::make_shared<BoundMethod>(Value::FromObject(std::move(me)), std::string(name)));
    }
  }
  return std::nullopt;
}

void LoopObject::AppendRepr(std::string& out, int /*depth*/, size_t /*max_bytes*/) const {
  out += "<LoopContext " + std::to_string(index0_ + 1) + "/" + std::to_string(items_.size()) + ">";
}

bool LoopObject::Changed(const Value& value) {
  if (has_changed_ && Equals(last_changed_, value)) return false;
  has_changed_ = true;
  last_changed_ = value;
  return true;
}

// ---- Interpreter: setup, limits, output -----------------------------------

Interpreter::Interpreter(const Program& program, const Limits& limits, const RenderOptions& options)
    : program_(program), limits_(limits), options_(options) {}

Interpreter::~Interpreter() {
  for (const auto& obj : objects_) obj->Clear();
  for (const auto& scope : captured_scopes_) scope->Clear();
  if (root_) root_->Clear();
}

Result<std::string> Interpreter::Render(const Value& context, RenderErrorInfo* error_info) {
  if (!context.is_dict()) {
    return Status::InvalidArgument("chat template: the render context must be a dict, not " +
                                   std::string(context.TypeName()));
  }
  root_ = std::make_shared<Scope>(nullptr);
  const Dict& vars = context.as_dict();
  for (size_t i = 0; i < program_.symbols.size(); ++i) {
    const std::string& name = program_.symbols[i];
    const int sym = static_cast<int>(i);
    if (const Value* v = vars.Find(name)) {
      root_->Set(sym, *v);
      continue;
    }
    using Id = BuiltinCallable::Id;
    std::optional<Id> id;
    if (name == "range") id = Id::kRange;
    if (name == "namespace") id = Id::kNamespace;
    if (name == "dict") id = Id::kDict;
    if (name == "raise_exception") id = Id::kRaiseException;
    if (name == "strftime_now") id = Id::kStrftimeNow;
    if (id) root_->Set(sym, Value::FromCallable(std::make_shared<BuiltinCallable>(*id)));
  }
  std::string out;
  out_ = &out;
  Result<Flow> r = ExecBody(program_.body, root_);
  out_ = nullptr;
  if (r.ok()) return out;
  if (error_info != nullptr) {
    error_info->raised = raised_;
    error_info->stopped = stopped_;
    error_info->line = error_line_;
  }
  if (raised_) return Status::InvalidArgument(r.status().message());
  return r.status().WithContext("chat template line " + std::to_string(error_line_));
}

Status Interpreter::Charge(uint64_t units) {
  const uint64_t before = steps_;
  steps_ += units;
  if (steps_ > limits_.max_steps || steps_ < before) {
    steps_ = limits_.max_steps + 1;
    return Status::ResourceExhausted("rendering took more than " +
                                     std::to_string(limits_.max_steps) + " steps (max_steps)");
  }
  // Whoever asked for the render may give up on it (a client that left, a
  // deadline): asked every kStopCheckSteps steps, so at most about 3 ms apart.
  if (options_.should_stop && (steps_ / kStopCheckSteps) != (before / kStopCheckSteps) &&
      options_.should_stop()) {
    stopped_ = true;
    return Status::ResourceExhausted("rendering was stopped after " + std::to_string(steps_) +
                                     " steps: the request was cancelled or its deadline passed");
  }
  return Status::Ok();
}

Status Interpreter::CheckString(size_t bytes) {
  if (bytes > limits_.max_output_bytes) {
    return Status::ResourceExhausted("a string of more than " +
                                     std::to_string(limits_.max_output_bytes) +
                                     " bytes (max_output_bytes)");
  }
  return Charge(bytes / 16);
}

Status Interpreter::CheckItems(size_t n) {
  if (n > limits_.max_items) {
    return Status::ResourceExhausted("a list or dict of more than " +
                                     std::to_string(limits_.max_items) + " items (max_items)");
  }
  return Charge(n / 16);
}

Status Runtime::ChargeTouched(const Value& v) {
  if (v.is_string()) return Charge(v.as_string().size() / kTouchBytesPerStep);
  if (v.is_list()) return Charge(v.as_list().size() / 16);
  if (v.is_dict()) return Charge(v.as_dict().size() / 16);
  return Status::Ok();
}

Status Runtime::ChargeTouched(const CallArgs& args) {
  for (const Value& v : args.positional) MX_RETURN_IF_ERROR(ChargeTouched(v));
  for (const auto& [name, v] : args.keywords) MX_RETURN_IF_ERROR(ChargeTouched(v));
  return Status::Ok();
}

uint64_t Runtime::CodePointBytesPerStep(char kind, std::string_view name) {
  auto in = [name](std::initializer_list<std::string_view> names) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  switch (kind) {
    case 'f':
      if (in({"upper", "lower", "title", "capitalize", "wordcount"})) return 1;
      if (in({"trim", "reverse", "truncate", "indent"})) return 4;
      return 0;
    case 't':
      return in({"lower", "upper"}) ? 1 : 0;
    case 'm':
      if (name.starts_with("is") ||
          in({"upper", "lower", "title", "capitalize", "swapcase", "casefold"})) {
        return 1;
      }
      if (in({"strip", "lstrip", "rstrip", "splitlines", "rsplit", "format"})) return 4;
      return 0;
    case 's':
      return 4;
  }
  return 0;
}

Status Runtime::ChargeCodePoints(char kind, std::string_view name, const Value& input) {
  if (kind == 'f' && (name == "unique" || name == "sort" || name == "dictsort" ||
                      name == "groupby" || name == "min" || name == "max")) {
    // They compare, hash and (case_sensitive=false, the default) case-fold
    // every string inside their input: 1 step per byte, 2 per item.
    const uint64_t w = input.weight();
    return Charge(w > UINT64_MAX / 2 ? UINT64_MAX / 2 : 2 * w);
  }
  if (!input.is_string()) return Status::Ok();
  const uint64_t bytes_per_step = CodePointBytesPerStep(kind, name);
  if (bytes_per_step == 0) return Status::Ok();
  return Charge(input.as_string().size() / bytes_per_step);
}

Result<std::string> Interpreter::ToStr(const Value& v) {
  if (v.is_string()) return v.as_string();
  std::string s = v.Str(limits_.max_output_bytes + 1);
  MX_RETURN_IF_ERROR(CheckString(s.size()));
  return s;
}

Result<std::string> Interpreter::ToRepr(const Value& v) {
  std::string s = v.Repr(Value::kMaxReprDepth, limits_.max_output_bytes + 1);
  MX_RETURN_IF_ERROR(CheckString(s.size()));
  return s;
}

Status Interpreter::RuntimeError(std::string message) const {
  return Status::InvalidArgument(std::move(message));
}

Status Interpreter::Write(std::string_view text) {
  MX_RETURN_IF_ERROR(Charge(text.size() / kTouchBytesPerStep));
  if (out_->size() + text.size() > limits_.max_output_bytes) {
    return Status::ResourceExhausted("output larger than " +
                                     std::to_string(limits_.max_output_bytes) +
                                     " bytes (max_output_bytes)");
  }
  out_->append(text);
  return Status::Ok();
}

ScopePtr Interpreter::NewScope(const ScopePtr& parent) { return std::make_shared<Scope>(parent); }

Result<std::string> Interpreter::Capture(const Body& body, const ScopePtr& scope) {
  std::string buffer;
  std::string* saved = out_;
  out_ = &buffer;
  Result<Flow> r = ExecBody(body, scope);
  out_ = saved;
  if (!r.ok()) return r.status();
  return buffer;
}

// ---- statements ----------------------------------------------------------------

Result<Interpreter::Flow> Interpreter::ExecBody(const Body& body, const ScopePtr& scope) {
  for (const StmtPtr& s : body) {
    MX_ASSIGN_OR_RETURN(Flow flow, Exec(*s, scope));
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Result<Interpreter::Flow> Interpreter::Exec(const Stmt& s, const ScopePtr& scope) {
  if (Status st = Charge(1); !st.ok()) {
    if (error_line_ == 0) error_line_ = s.line;
    return st;
  }
  if (++eval_depth_ > kMaxEvalDepth) {
    --eval_depth_;
    if (error_line_ == 0) error_line_ = s.line;
    return Status::ResourceExhausted("statements and expressions nested deeper than " +
                                     std::to_string(kMaxEvalDepth));
  }
  Result<Flow> r = ExecStmt(s, scope);
  --eval_depth_;
  if (!r.ok() && error_line_ == 0) error_line_ = s.line;
  return r;
}

Result<Interpreter::Flow> Interpreter::ExecStmt(const Stmt& s, const ScopePtr& scope) {
  switch (s.kind) {
    case StmtKind::kData:
      MX_RETURN_IF_ERROR(Write(s.text));
      return Flow::kNormal;
    case StmtKind::kOutput: {
      MX_ASSIGN_OR_RETURN(Value v, Eval(*s.exprs[0], scope));
      if (v.is_string()) {
        MX_RETURN_IF_ERROR(Write(v.as_string()));
      } else {
        MX_ASSIGN_OR_RETURN(std::string text, ToStr(v));
        MX_RETURN_IF_ERROR(Write(text));
      }
      return Flow::kNormal;
    }
    case StmtKind::kIf: {
      for (size_t i = 0; i < s.exprs.size(); ++i) {
        MX_ASSIGN_OR_RETURN(Value test, Eval(*s.exprs[i], scope));
        if (test.Truthy()) return ExecBody(s.branches[i], scope);
      }
      return ExecBody(s.else_body, scope);
    }
    case StmtKind::kFor:
      return ExecFor(s, scope);
    case StmtKind::kSet: {
      MX_ASSIGN_OR_RETURN(Value v, Eval(*s.exprs[0], scope));
      MX_RETURN_IF_ERROR(Assign(s.target, v, scope));
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock: {
      MX_ASSIGN_OR_RETURN(std::string text, Capture(s.body, NewScope(scope)));
      Value v = Value::String(std::move(text));
      if (s.filter) {
        MX_ASSIGN_OR_RETURN(v, EvalFilter(*s.filter, &v, scope));
      }
      MX_RETURN_IF_ERROR(Assign(s.target, v, scope));
      return Flow::kNormal;
    }
    case StmtKind::kMacro: {
      if (captured_scopes_.empty() || captured_scopes_.back() != scope) {
        captured_scopes_.push_back(scope);
      }
      scope->Set(s.target.symbol,
                 Value::FromCallable(std::make_shared<MacroCallable>(s.macro, scope)));
      return Flow::kNormal;
    }
    case StmtKind::kCallBlock: {
      if (captured_scopes_.empty() || captured_scopes_.back() != scope) {
        captured_scopes_.push_back(scope);
      }
      const Expr& call = *s.exprs[0];
      MX_ASSIGN_OR_RETURN(Value callee, Eval(*call.children[0], scope));
      MX_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(call, 1, scope));
      args.keywords.emplace_back(
          "caller", Value::FromCallable(std::make_shared<MacroCallable>(s.macro, scope)));
      MX_ASSIGN_OR_RETURN(Value result, CallValue(callee, std::move(args)));
      MX_ASSIGN_OR_RETURN(std::string text, ToStr(result));
      MX_RETURN_IF_ERROR(Write(text));
      return Flow::kNormal;
    }
    case StmtKind::kFilterBlock: {
      MX_ASSIGN_OR_RETURN(std::string body, Capture(s.body, NewScope(scope)));
      const Value input = Value::String(std::move(body));
      MX_ASSIGN_OR_RETURN(Value v, EvalFilter(*s.filter, &input, scope));
      MX_ASSIGN_OR_RETURN(std::string text, ToStr(v));
      MX_RETURN_IF_ERROR(Write(text));
      return Flow::kNormal;
    }
    case StmtKind::kWith: {
      ScopePtr inner = NewScope(scope);
      for (size_t i = 0; i < s.targets.size(); ++i) {
        MX_ASSIGN_OR_RETURN(Value v, Eval(*s.exprs[i], scope));
        MX_RETURN_IF_ERROR(Assign(s.targets[i], v, inner));
      }
      return ExecBody(s.body, inner);
    }
    case StmtKind::kScope: {
      MX_RETURN_IF_ERROR(ExecBody(s.body, NewScope(scope)).status());
      return Flow::kNormal;
    }
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
  }
  return Status::Internal("unknown statement");
}

Result<Interpreter::Flow> Interpreter::ExecFor(const Stmt& s, const ScopePtr& scope) {
  MX_ASSIGN_OR_RETURN(Value iterable, Eval(*s.exprs[0], scope));
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(*this, iterable));
  MX_RETURN_IF_ERROR(RunLoop(s, scope, std::move(items), 0));
  return Flow::kNormal;
}

Status Interpreter::RunLoop(const Stmt& s, const ScopePtr& scope, ValueList items, int depth0) {
  if (const ExprPtr& filter = s.exprs[1]) {
    ValueList kept;
    for (Value& item : items) {
      MX_RETURN_IF_ERROR(Charge(1));
      ScopePtr probe = NewScope(scope);
      MX_RETURN_IF_ERROR(Assign(s.target, item, probe));
      MX_ASSIGN_OR_RETURN(Value keep, Eval(*filter, probe));
      if (keep.Truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    if (!s.else_body.empty()) MX_RETURN_IF_ERROR(ExecBody(s.else_body, NewScope(scope)).status());
    return Status::Ok();
  }
  auto loop = std::make_shared<LoopObject>(std::move(items), depth0, &s, scope);
  loop->self = loop;
  objects_.push_back(loop);
  const Value loop_value = Value::FromObject(loop);
  const size_t n = loop->items().size();
  for (size_t i = 0; i < n; ++i) {
    MX_RETURN_IF_ERROR(Charge(1));
    loop->set_index0(i);
    ScopePtr iteration = NewScope(scope);
    MX_RETURN_IF_ERROR(Assign(s.target, loop->items()[i], iteration));
    iteration->Set(program_.loop_symbol, loop_value);
    MX_ASSIGN_OR_RETURN(Flow flow, ExecBody(s.body, iteration));
    if (flow == Flow::kBreak) break;
  }
  return Status::Ok();
}

Status Interpreter::Assign(const Target& target, const Value& value, const ScopePtr& scope) {
  switch (target.kind) {
    case Target::Kind::kName:
      scope->Set(target.symbol, value);
      return Status::Ok();
    case Target::Kind::kNamespaceAttr: {
      const Value* ns = scope->Find(target.symbol);
      if (ns == nullptr || !ns->is_object() || ns->TypeName() != "Namespace") {
        return RuntimeError("cannot assign attribute on non-namespace object");
      }
      static_cast<Namespace*>(ns->as_object().get())->Set(target.attr, value);
      return Status::Ok();
    }
    case Target::Kind::kTuple: {
      MX_ASSIGN_OR_RETURN(ValueList items, Iterate(*this, value));
      const size_t want = target.items.size();
      if (items.size() < want) {
        return RuntimeError("not enough values to unpack (expected " + std::to_string(want) +
                            ", got " + std::to_string(items.size()) + ")");
      }
      if (items.size() > want) {
        return RuntimeError("too many values to unpack (expected " + std::to_string(want) + ")");
      }
      for (size_t i = 0; i < want; ++i)
        MX_RETURN_IF_ERROR(Assign(target.items[i], items[i], scope));
      return Status::Ok();
    }
  }
  return Status::Internal("unknown assignment target");
}

}  // namespace mx::jinja
