// Python semantics of the operations a template applies to values: arithmetic,
// comparison, `in`, attribute and item access (jinja2's sandboxed getattr /
// getitem), slicing, iteration and len(). Errors carry Python's wording (the
// evaluator adds the template line). Internal to the jinja module.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "templates/jinja/ast.h"
#include "templates/jinja/runtime.h"
#include "templates/jinja/value.h"

namespace mx::jinja {

// A method bound to its receiver: `"a b".split` or `loop.cycle`.
class BoundMethod final : public Callable {
 public:
  BoundMethod(Value self, std::string name) : self_(std::move(self)), name_(std::move(name)) {}
  std::string Repr() const override;
  std::string_view TypeName() const override { return "builtin_function_or_method"; }
  const Value& self() const { return self_; }
  const std::string& name() const { return name_; }

 private:
  Value self_;
  std::string name_;
};

// What jinja2 writes for the object in "'<x>' has no attribute 'y'":
// "str object", "None", "jinja2.utils.Namespace object".
std::string ObjectTypeRepr(const Value& v);
// The Undefined that `obj.name` / `obj[key]` gives when there is no such
// attribute / item.
Value MissingAttribute(const Value& obj, std::string_view name);
Value MissingElement(const Value& obj, const Value& key);

Result<Value> Binary(Runtime& rt, BinOp op, const Value& a, const Value& b);
Result<Value> Negate(const Value& v);
Result<Value> Positive(const Value& v);
// a < b (TypeError for unorderable operands). Comparisons charge `rt` for
// the elements they may visit (Value::weight()).
Result<bool> Less(Runtime& rt, const Value& a, const Value& b);
Result<bool> Compare(Runtime& rt, CmpOp op, const Value& a, const Value& b);
// `item in container`.
Result<bool> Contains(Runtime& rt, const Value& container, const Value& item);

// jinja2's sandboxed `obj.name` (attributes / methods first, then items) and
// `obj[key]` (items first, then attributes). Missing ones are Undefined;
// unsafe ones (list.append, dict.update, ...) an Undefined that raises
// SecurityError when used. Fails only for an Undefined `obj`.
Result<Value> GetAttr(const Value& obj, std::string_view name);
Result<Value> GetItem(const Value& obj, const Value& key);
// obj[start:stop:step]; each bound may be None / undefined (absent).
Result<Value> Slice(Runtime& rt, const Value& obj, const Value& start, const Value& stop,
                    const Value& step);

// The items `for x in v` visits: list / tuple items, dict keys, str characters;
// nothing for Undefined; TypeError ("'NoneType' object is not iterable") else.
// Charges `rt` for the items (a string's characters count against max_items).
Result<ValueList> Iterate(Runtime& rt, const Value& v);
// Substring search in linear time (Python's find semantics on bytes);
// npos when absent. Charges nothing.
size_t FindSubstring(std::string_view hay, std::string_view needle, size_t from = 0);
size_t RFindSubstring(std::string_view hay, std::string_view needle);
// len(v): TypeError ("object of type 'NoneType' has no len()") when it has none.
Result<int64_t> Length(const Value& v);

// Calls a str / list / dict method (`self.name(args)`); NotSupported for the
// few Python methods that are not implemented.
Result<Value> CallMethod(Runtime& rt, const Value& self, std::string_view name,
                         const CallArgs& args);
// True when Python's type of `self` has a method `name`; `*unsafe` is set for
// methods the immutable sandbox refuses (list.append, dict.pop, ...).
bool HasMethod(const Value& self, std::string_view name, bool* unsafe);

// markupsafe.escape() of str(v): & < > ' " as entities.
std::string EscapeHtml(std::string_view s);

// Python's str % args. With `escape_args` (a Markup format) the text of %s /
// %r arguments that are not Markup is HTML-escaped, as markupsafe does.
Result<std::string> PercentFormat(Runtime& rt, std::string_view format, const Value& args,
                                  bool escape_args = false);
// Python's str.format(*args, **kwargs) (sandboxed: attribute lookups go through GetAttr).
Result<std::string> BraceFormat(Runtime& rt, std::string_view format, const CallArgs& args);

}  // namespace mx::jinja
