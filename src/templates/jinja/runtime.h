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
  // Charges an operation (a filter, test, method, operator, subscript or
  // print) for the data it reads or makes, whatever the operation: every
  // string operand or result costs one step per kTouchBytesPerStep bytes,
  // every list or dict one step per 16 items (its top level; deep operations
  // add ChargeWeight). The evaluator charges each operation's operands
  // before it runs and its result after, so no filter or method can scan a
  // large string for free.
  static constexpr uint64_t kTouchBytesPerStep = 16;
  Status ChargeTouched(const Value& v);
  Status ChargeTouched(const CallArgs& args);
  // Operations that walk a string code point by code point cost more per
  // byte than a scan or a copy: case mapping, the is... predicates, the
  // lower / upper tests, title, capitalize, wordcount (up to ~50 ns a byte)
  // pay one more step per byte of their string input; strip / trim,
  // splitlines, rsplit, reverse, truncate, indent, str.format and slices
  // (~5-10 ns a byte) one more per 4 bytes. So the budget stays about a
  // second of work whichever operation spends it. The filters that compare
  // and case-fold every item (unique, sort, dictsort, groupby, min, max) pay
  // 2 steps per unit of their input's weight (1 per byte of its strings).
  // `kind` is 'f' (filter),
  // 't' (test), 'm' (str method) or 's' (slice); 0: no extra charge.
  static uint64_t CodePointBytesPerStep(char kind, std::string_view name);
  Status ChargeCodePoints(char kind, std::string_view name, const Value& input);
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
