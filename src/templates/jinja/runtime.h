// What filters, tests and methods may ask of the evaluator: charging work
// against the limits, calling values, filters and tests by name. Internal to
// the jinja module.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "templates/jinja/value.h"

namespace mx::jinja {

// Arguments of one call, as Python passes them.
struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keywords;

  bool empty() const { return positional.empty() && keywords.empty(); }
};

// Binds `args` to the parameters `names` (positional or keyword), like a Python
// signature `f(names[0], names[1], ...)` without *args / **kwargs. Missing
// parameters stay nullopt; fails (TypeError wording) when more than
// `names.size()` positionals are given, a keyword is unknown or given twice, or
// one of the first `required` parameters is missing.
Result<std::vector<std::optional<Value>>> BindArgs(std::string_view function, const CallArgs& args,
                                                   std::initializer_list<std::string_view> names,
                                                   size_t required = 0);

// Errors in Python's words. Messages only: the evaluator adds the line.
Status TypeError(std::string message);
// The error an Undefined value raises when misused.
Status UndefinedError(const Value& undefined);

class Runtime {
 public:
  virtual ~Runtime() = default;
  // Counts `units` of work against Limits::max_steps (ResourceExhausted past it).
  virtual Status Charge(uint64_t units) = 0;
  // Charges a deep operation (==, <, in, hashing) over values of this weight
  // (Value::weight()): one step per 8 units.
  Status ChargeWeight(uint64_t weight) { return Charge(weight / 8); }
  // Fails with ResourceExhausted when a string of `bytes` is larger than the
  // largest value a template may build (Limits::max_output_bytes); charges it.
  virtual Status CheckString(size_t bytes) = 0;
  // Same for a list or dict of `n` items (Limits::max_items).
  virtual Status CheckItems(size_t n) = 0;
  virtual size_t max_string_bytes() const = 0;
  // Python's str() / repr() of `v`, failing (ResourceExhausted) rather than
  // building text larger than max_string_bytes(); charges its size.
  virtual Result<std::string> ToStr(const Value& v) = 0;
  virtual Result<std::string> ToRepr(const Value& v) = 0;
  // Calls a callable value (macro, global, bound method).
  virtual Result<Value> CallValue(const Value& callee, CallArgs args) = 0;
  // Applies the filter / test `name` as `input | name(args)` / `input is name(args)`.
  virtual Result<Value> CallFilter(std::string_view name, const Value& input, CallArgs args) = 0;
  virtual Result<bool> CallTest(std::string_view name, const Value& input, CallArgs args) = 0;
};

}  // namespace mx::jinja
