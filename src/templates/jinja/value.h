// Value: the data a chat template computes with, modelled on the Python objects
// jinja2 sees when transformers renders a template: None, bool, int, float, str
// (and markupsafe's Markup), list, tuple, dict (insertion ordered), callables
// (macros, built-in functions, bound methods), namespace and loop objects, and
// jinja2's Undefined, which carries the message it raises when misused.
//
// Values are small (32 bytes) and cheap to copy: strings, lists and dicts are
// shared, immutable after construction (the sandbox transformers uses forbids
// list.append and friends), so copies alias the same storage. Namespace and
// loop objects are the only mutable values; they are shared by reference, as in
// Python. Not thread-safe to mutate; immutable values may be read from many
// threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/status.h"

namespace mx::jinja {

class Value;
class Dict;
using ValueList = std::vector<Value>;

// Something a template can call: a macro, a global function or a bound method.
// The evaluator knows the concrete kinds; Value only prints them.
class Callable {
 public:
  virtual ~Callable() = default;
  // Python's repr(), e.g. "<Macro 'render'>".
  virtual std::string Repr() const = 0;
  // type(x).__name__, e.g. "Macro", "builtin_function_or_method".
  virtual std::string_view TypeName() const = 0;
};

// A mutable object with attributes: jinja2's Namespace and LoopContext.
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string_view TypeName() const = 0;  // "Namespace"
  // What jinja2 writes in "'<this>' has no attribute 'x'", e.g.
  // "jinja2.utils.Namespace object".
  virtual std::string ObjectTypeRepr() const = 0;
  // The attribute `name`, or nullopt when there is none.
  virtual std::optional<Value> GetAttr(std::string_view name) const = 0;
  // Appends repr(); stops once `out` is longer than `max_bytes`.
  virtual void AppendRepr(std::string& out, int depth, size_t max_bytes) const = 0;
  // Drops references to other values (breaks reference cycles at the end of a
  // render). The object stays valid and empty.
  virtual void Clear() = 0;
};

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,  // list, tuple or a materialised iterator (generator, dict view)
    kDict,
    kCallable,
    kObject,
  };

  // Undefined without a message: "'<name>' is undefined" is built by the caller.
  Value() : kind_(Kind::kUndefined) { int_ = 0; }

  // jinja2's Undefined: falsy, prints as "", iterates as empty; most other uses
  // fail with `message` (an UndefinedError, or a SecurityError when
  // `security` is set: an unsafe attribute of the immutable sandbox).
  static Value Undefined(std::string message, bool security = false);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  // markupsafe.Markup: a str that escapes what is concatenated to it.
  static Value Markup(std::string s);
  static Value List(ValueList items);
  static Value Tuple(ValueList items);
  // A one-shot iterator (what map/select/... return in jinja2): iterates like a
  // list, but has no len(), is not a sequence and is not JSON serialisable.
  // `type_name` is its Python type name, e.g. "generator".
  static Value Iterator(ValueList items, std::string_view type_name);
  static Value FromDict(Dict dict);
  // Convenience: a dict with string keys, in the given order (later duplicates win).
  static Value MakeDict(std::vector<std::pair<std::string, Value>> items);
  static Value FromCallable(std::shared_ptr<const Callable> fn);
  static Value FromObject(std::shared_ptr<Object> obj);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  // int, float or bool (Python's numbers.Number).
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_markup() const { return kind_ == Kind::kString && flags_ == kMarkupFlag; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && flags_ == kTupleFlag; }
  bool is_iterator() const { return kind_ == Kind::kList && flags_ == kIteratorFlag; }
  // list or tuple (not an iterator).
  bool is_sequence() const { return kind_ == Kind::kList && flags_ != kIteratorFlag; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_object() const { return kind_ == Kind::kObject; }

  // REQUIRES: the matching kind (checked with assert in debug builds).
  bool as_bool() const { return bool_; }
  int64_t as_int() const { return int_; }
  double as_float() const { return float_; }
  // int, bool or float as a double.
  double as_number() const;
  const std::string& as_string() const;
  const ValueList& as_list() const;
  const Dict& as_dict() const;
  // The value of `key` when this is a dict holding it; null otherwise (any
  // other kind included). Valid while this Value (or a copy) is alive.
  const Value* Field(std::string_view key) const;
  // Valid while this Value (or a copy) is alive.
  const Callable* as_callable() const;
  std::shared_ptr<Object> as_object() const;
  // The UndefinedError message ("" when none was given).
  const std::string& undefined_message() const;
  bool undefined_is_security() const { return kind_ == Kind::kUndefined && flags_ == 1; }
  // The Python type name of an iterator ("generator", "dict_items", ...).
  std::string_view iterator_type() const;
  // Identity: the same shared storage (Python's `is` for containers/objects).
  const void* identity() const { return ptr_.get(); }

  // Nesting depth of lists and dicts (a scalar is 0). Objects count as 1.
  uint32_t depth() const;
  // What a deep operation (==, <, hashing) may cost on this value: 1 per
  // element, counting shared sub-structures once per reference, plus 1 per 2
  // bytes of strings (Runtime::ChargeWeight's 1 step per 8 units is then 1
  // per 16 bytes, as for every operation); saturates. Objects count as 1
  // (compared by identity).
  uint64_t weight() const;

  // Python truthiness.
  bool Truthy() const;
  // Python's str(): "None", "True", "1.0", repr of containers; "" for Undefined.
  // Printing stops once the text is longer than `max_bytes` (the result is then
  // cut short: callers that care check its size against their limit).
  std::string Str(size_t max_bytes = kMaxReprBytes) const;
  // Python's repr(); nesting deeper than `depth` prints as "...".
  std::string Repr(int depth = kMaxReprDepth, size_t max_bytes = kMaxReprBytes) const;
  void AppendRepr(std::string& out, int depth, size_t max_bytes) const;
  // type(x).__name__: "str", "int", "NoneType", "list", "dict", "Undefined", ...
  std::string_view TypeName() const;

  static constexpr int kMaxReprDepth = 200;
  static constexpr size_t kMaxReprBytes = size_t{64} << 20;

 private:
  friend struct ListData;
  friend class Dict;
  // When `v` is the only reference to a list or dict, moves its elements into
  // `work` (leaving it empty), so that freeing nested values needs no recursion.
  static void StealChildren(Value& v, std::vector<Value>& work);

  static constexpr uint8_t kMarkupFlag = 1;
  static constexpr uint8_t kTupleFlag = 1;
  static constexpr uint8_t kIteratorFlag = 2;

  Kind kind_;
  uint8_t flags_ = 0;
  union {
    bool bool_;
    int64_t int_;
    double float_;
  };
  // kString: std::string; kList: ListData; kDict: Dict; kCallable: Callable;
  // kObject: Object; kUndefined: std::string (the message) or null.
  std::shared_ptr<const void> ptr_;
};

// Python's == (1 == 1.0 == True; lists and dicts compare by content; objects
// and callables by identity; Undefined equals Undefined).
bool Equals(const Value& a, const Value& b);

// Python's hash() as far as dict keys need it: equal keys hash equal.
uint64_t HashKey(const Value& v, int depth = Value::kMaxReprDepth);
// False for list, dict and tuples holding them (Python: "unhashable type"),
// and for tuples nested deeper than Value::kMaxReprDepth.
bool IsHashable(const Value& v, int depth = Value::kMaxReprDepth);

// An insertion-ordered dict with Python key equality.
class Dict {
 public:
  Dict() = default;
  Dict(const Dict&) = default;
  Dict(Dict&&) = default;
  Dict& operator=(const Dict&) = default;
  Dict& operator=(Dict&&) = default;
  // Frees nested values iteratively (any depth).
  ~Dict();
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  const std::vector<std::pair<Value, Value>>& items() const { return items_; }
  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  // Replaces the value of an equal key (keeping its position) or appends.
  // REQUIRES: IsHashable(key) for Python semantics (other keys still work,
  // compared by ==).
  void Set(Value key, Value value);
  uint32_t depth() const { return depth_; }
  uint64_t weight() const { return weight_; }

 private:
  friend class Value;  // StealChildren empties a dict it solely owns
  std::optional<size_t> Position(const Value& key) const;
  std::vector<std::pair<Value, Value>> items_;
  // Key hash -> position; built once the dict is large enough to matter.
  std::unordered_multimap<uint64_t, size_t> index_;
  uint32_t depth_ = 1;
  uint64_t weight_ = 1;
};

// What a list Value stores.
struct ListData {
  ListData() = default;
  ListData(const ListData&) = delete;
  ListData& operator=(const ListData&) = delete;
  // Frees nested values iteratively (any depth).
  ~ListData();

  ValueList items;
  uint32_t depth = 1;
  uint64_t weight = 1;
  std::string iterator_type;  // for iterators only
};

// jinja2's Namespace: attribute storage shared by reference.
class Namespace final : public Object {
 public:
  std::string_view TypeName() const override { return "Namespace"; }
  std::string ObjectTypeRepr() const override { return "jinja2.utils.Namespace object"; }
  std::optional<Value> GetAttr(std::string_view name) const override;
  void AppendRepr(std::string& out, int depth, size_t max_bytes) const override;
  void Clear() override { attrs_ = Dict(); }
  void Set(std::string name, Value value) {
    attrs_.Set(Value::String(std::move(name)), std::move(value));
  }
  const Dict& attrs() const { return attrs_; }

 private:
  Dict attrs_;
  // Set while this namespace is being printed: a namespace that holds itself
  // prints as "<Namespace {...}>" inside, as Python's reprlib guard does.
  mutable bool in_repr_ = false;
};

}  // namespace mx::jinja
