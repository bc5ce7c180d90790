#include "templates/jinja/value.h"

#include <algorithm>
#include <cassert>

#include "templates/jinja/pystr.h"

namespace mx::jinja {
namespace {

const std::string& EmptyString() {
  static const std::string* empty = new std::string();
  return *empty;
}

const ValueList& EmptyList() {
  static const ValueList* empty = new ValueList();
  return *empty;
}

const Dict& EmptyDict() {
  static const Dict* empty = new Dict();
  return *empty;
}

uint32_t MaxDepth(const ValueList& items) {
  uint32_t d = 0;
  for (const Value& v : items) d = std::max(d, v.depth());
  return d + 1;
}

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

uint64_t TotalWeight(const ValueList& items) {
  uint64_t w = 1;
  for (const Value& v : items) w = SaturatingAdd(w, v.weight());
  return w;
}

std::shared_ptr<ListData> NewListData(ValueList items) {
  auto data = std::make_shared<ListData>();
  data->depth = MaxDepth(items);
  data->weight = TotalWeight(items);
  data->items = std::move(items);
  return data;
}

}  // namespace

// The private constructor path: factories fill kind_, flags_ and ptr_ directly.
#define MX_JINJA_MAKE(kind, flags, ptr) \
  Value v;                              \
  v.kind_ = (kind);                     \
  v.flags_ = (flags);                   \
  v.ptr_ = (ptr);                       \
  return v

Value Value::Undefined(std::string message, bool security) {
  std::shared_ptr<const void> msg;
  if (!message.empty()) msg = std::make_shared<const std::string>(std::move(message));
  MX_JINJA_MAKE(Kind::kUndefined, security ? 1 : 0, std::move(msg));
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.int_ = 0;
  v.bool_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.float_ = d;
  return v;
}

Value Value::String(std::string s) {
  MX_JINJA_MAKE(Kind::kString, 0, std::make_shared<const std::string>(std::move(s)));
}

Value Value::Markup(std::string s) {
  MX_JINJA_MAKE(Kind::kString, kMarkupFlag, std::make_shared<const std::string>(std::move(s)));
}

Value Value::List(ValueList items) { MX_JINJA_MAKE(Kind::kList, 0, NewListData(std::move(items))); }

Value Value::Tuple(ValueList items) {
  MX_JINJA_MAKE(Kind::kList, kTupleFlag, NewListData(std::move(items)));
}

Value Value::Iterator(ValueList items, std::string_view type_name) {
  auto data = NewListData(std::move(items));
  data->iterator_type = std::string(type_name);
  MX_JINJA_MAKE(Kind::kList, kIteratorFlag, std::move(data));
}

Value Value::FromDict(Dict dict) {
  MX_JINJA_MAKE(Kind::kDict, 0, std::make_shared<const Dict>(std::move(dict)));
}

Value Value::MakeDict(std::vector<std::pair<std::string, Value>> items) {
  Dict d;
  for (auto& [k, v] : items) d.Set(Value::String(std::move(k)), std::move(v));
  return FromDict(std::move(d));
}

Value Value::FromCallable(std::shared_ptr<const Callable> fn) {
  MX_JINJA_MAKE(Kind::kCallable, 0, std::move(fn));
}

Value Value::FromObject(std::shared_ptr<Object> obj) {
  MX_JINJA_MAKE(Kind::kObject, 0, std::move(obj));
}

#undef MX_JINJA_MAKE

double Value::as_number() const {
  switch (kind_) {
    case Kind::kInt:
      return static_cast<double>(int_);
    case Kind::kBool:
      return bool_ ? 1.0 : 0.0;
    case Kind::kFloat:
      return float_;
    default:
      return 0.0;
  }
}

const std::string& Value::as_string() const {
  assert(kind_ == Kind::kString);
  if (kind_ != Kind::kString) return EmptyString();
  return *static_cast<const std::string*>(ptr_.get());
}

const ValueList& Value::as_list() const {
  assert(kind_ == Kind::kList);
  if (kind_ != Kind::kList) return EmptyList();
  return static_cast<const ListData*>(ptr_.get())->items;
}

const Dict& Value::as_dict() const {
  assert(kind_ == Kind::kDict);
  if (kind_ != Kind::kDict) return EmptyDict();
  return *static_cast<const Dict*>(ptr_.get());
}

const Value* Value::Field(std::string_view key) const {
  return is_dict() ? as_dict().Find(key) : nullptr;
}

const Callable* Value::as_callable() const {
  assert(kind_ == Kind::kCallable);
  if (kind_ != Kind::kCallable) return nullptr;
  return static_cast<const Callable*>(ptr_.get());
}

std::shared_ptr<Object> Value::as_object() const {
  assert(kind_ == Kind::kObject);
  if (kind_ != Kind::kObject) return nullptr;
  return std::shared_ptr<Object>(std::const_pointer_cast<void>(ptr_),
                                 const_cast<Object*>(static_cast<const Object*>(ptr_.get())));
}

const std::string& Value::undefined_message() const {
  if (kind_ != Kind::kUndefined || !ptr_) return EmptyString();
  return *static_cast<const std::string*>(ptr_.get());
}

std::string_view Value::iterator_type() const {
  if (!is_iterator()) return {};
  return static_cast<const ListData*>(ptr_.get())->iterator_type;
}

uint32_t Value::depth() const {
  switch (kind_) {
    case Kind::kList:
      return static_cast<const ListData*>(ptr_.get())->depth;
    case Kind::kDict:
      return static_cast<const Dict*>(ptr_.get())->depth();
    case Kind::kObject:
      return 1;
    default:
      return 0;
  }
}

uint64_t Value::weight() const {
  switch (kind_) {
    case Kind::kString:
      return 1 + as_string().size() / 2;
    case Kind::kList:
      return static_cast<const ListData*>(ptr_.get())->weight;
    case Kind::kDict:
      return static_cast<const Dict*>(ptr_.get())->weight();
    default:
      return 1;
  }
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return bool_;
    case Kind::kInt:
      return int_ != 0;
    case Kind::kFloat:
      return float_ != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kList:
      // A generator object is always true in Python; views and lists by size.
      if (is_iterator() && iterator_type() != "dict_items" && iterator_type() != "dict_keys" &&
          iterator_type() != "dict_values") {
        return true;
      }
      return !as_list().empty();
    case Kind::kDict:
      return !as_dict().empty();
    case Kind::kCallable:
    case Kind::kObject:
      return true;
  }
  return false;
}

std::string Value::Str(size_t max_bytes) const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return as_string();
    default:
      return Repr(kMaxReprDepth, max_bytes);
  }
}

std::string Value::Repr(int depth, size_t max_bytes) const {
  std::string out;
  AppendRepr(out, depth, max_bytes);
  return out;
}

void Value::AppendRepr(std::string& out, int depth, size_t max_bytes) const {
  if (out.size() > max_bytes) return;
  if (depth <= 0) {
    out += "...";
    return;
  }
  switch (kind_) {
    case Kind::kUndefined:
      out += "Undefined";
      return;
    case Kind::kNone:
      out += "None";
      return;
    case Kind::kBool:
      out += bool_ ? "True" : "False";
      return;
    case Kind::kInt:
      out += std::to_string(int_);
      return;
    case Kind::kFloat:
      out += py::ReprFloat(float_);
      return;
    case Kind::kString:
      if (is_markup()) {
        out += "Markup(" + py::ReprString(as_string()) + ")";
      } else {
        out += py::ReprString(as_string());
      }
      return;
    case Kind::kList: {
      const ValueList& items = as_list();
      auto append_items = [&] {
        for (size_t i = 0; i < items.size() && out.size() <= max_bytes; ++i) {
          if (i) out += ", ";
          items[i].AppendRepr(out, depth - 1, max_bytes);
        }
      };
      if (is_iterator()) {
        const std::string_view type = iterator_type();
        if (type == "dict_items" || type == "dict_keys" || type == "dict_values") {
          out += std::string(type) + "([";
          append_items();
          out += "])";
        } else {
          out += "<" + std::string(type) + " object>";
        }
        return;
      }
      out += is_tuple() ? "(" : "[";
      append_items();
      out += is_tuple() ? (items.size() == 1 ? ",)" : ")") : "]";
      return;
    }
    case Kind::kDict: {
      out += "{";
      bool first = true;
      for (const auto& [k, v] : as_dict().items()) {
        if (out.size() > max_bytes) break;
        if (!first) out += ", ";
        first = false;
        k.AppendRepr(out, depth - 1, max_bytes);
        out += ": ";
        v.AppendRepr(out, depth - 1, max_bytes);
      }
      out += "}";
      return;
    }
    case Kind::kCallable:
      out += static_cast<const Callable*>(ptr_.get())->Repr();
      return;
    case Kind::kObject:
      static_cast<const Object*>(ptr_.get())->AppendRepr(out, depth - 1, max_bytes);
      return;
  }
}

std::string_view Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return is_markup() ? "Markup" : "str";
    case Kind::kList:
      if (is_iterator()) return iterator_type();
      return is_tuple() ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kCallable:
      return static_cast<const Callable*>(ptr_.get())->TypeName();
    case Kind::kObject:
      return static_cast<const Object*>(ptr_.get())->TypeName();
  }
  return "object";
}

namespace {

bool EqualsDepth(const Value& a, const Value& b, int depth);

bool ListsEqual(const ValueList& a, const ValueList& b, int depth) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!EqualsDepth(a[i], b[i], depth - 1)) return false;
  }
  return true;
}

bool EqualsDepth(const Value& a, const Value& b, int depth) {
  using K = Value::Kind;
  if (depth <= 0) return a.identity() == b.identity();
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_number() == b.as_number();
    const int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
    const int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
    return x == y;
  }
  if (a.kind() != b.kind()) return false;
  // The same storage: equal without looking (Python compares elements by
  // identity first too), which keeps shared sub-structures cheap.
  if ((a.is_list() || a.is_dict() || a.is_string()) && a.identity() == b.identity()) return true;
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNone:
      return true;
    case K::kString:
      return a.as_string() == b.as_string();
    case K::kList:
      if (a.is_iterator() || b.is_iterator()) return a.identity() == b.identity();
      if (a.is_tuple() != b.is_tuple()) return false;
      return ListsEqual(a.as_list(), b.as_list(), depth);
    case K::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.items()) {
        const Value* other = y.Find(k);
        if (other == nullptr || !EqualsDepth(v, *other, depth - 1)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

}  // namespace

bool Equals(const Value& a, const Value& b) { return EqualsDepth(a, b, Value::kMaxReprDepth); }

// ---- Dict ------------------------------------------------------------------

namespace {

// Dicts this small are searched linearly; larger ones get a hash index.
constexpr size_t kIndexThreshold = 8;

uint64_t HashString(std::string_view s) { return std::hash<std::string_view>()(s); }

uint64_t Mix(uint64_t h, uint64_t x) { return (h ^ x) * 0x100000001B3ull + 0x9E3779B97F4A7C15ull; }

}  // namespace

uint64_t HashKey(const Value& v, int depth) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::kString:
      return HashString(v.as_string());
    case K::kBool:
      return static_cast<uint64_t>(v.as_bool());
    case K::kInt:
      return static_cast<uint64_t>(v.as_int());
    case K::kFloat: {
      const double d = v.as_float();
      // Equal numbers hash equal: 2.0 hashes like 2.
      if (d >= -9.2e18 && d <= 9.2e18 && d == static_cast<double>(static_cast<int64_t>(d))) {
        return static_cast<uint64_t>(static_cast<int64_t>(d));
      }
      return std::hash<double>()(d);
    }
    case K::kNone:
      return 0x6E6F6E65ull;
    case K::kList: {
      uint64_t h = 0x7475706Cull;
      if (v.is_tuple() && depth > 0) {
        for (const Value& item : v.as_list()) h = Mix(h, HashKey(item, depth - 1));
      }
      return h;
    }
    default:
      return static_cast<uint64_t>(v.kind()) * 0x51ull;
  }
}

bool IsHashable(const Value& v, int depth) {
  if (v.is_dict() || (v.is_list() && !v.is_tuple())) return false;
  if (v.is_tuple()) {
    if (depth <= 0) return false;
    for (const Value& item : v.as_list()) {
      if (!IsHashable(item, depth - 1)) return false;
    }
  }
  return true;
}

const Value* Dict::Find(std::string_view key) const {
  if (!index_.empty()) {
    auto [lo, hi] = index_.equal_range(HashString(key));
    for (auto it = lo; it != hi; ++it) {
      const Value& k = items_[it->second].first;
      if (k.is_string() && k.as_string() == key) return &items_[it->second].second;
    }
    return nullptr;
  }
  for (const auto& [k, v] : items_) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

const Value* Dict::Find(const Value& key) const {
  if (key.is_string()) return Find(std::string_view(key.as_string()));
  const std::optional<size_t> pos = Position(key);
  return pos ? &items_[*pos].second : nullptr;
}

std::optional<size_t> Dict::Position(const Value& key) const {
  if (!index_.empty()) {
    auto [lo, hi] = index_.equal_range(HashKey(key, Value::kMaxReprDepth));
    for (auto it = lo; it != hi; ++it) {
      if (Equals(items_[it->second].first, key)) return it->second;
    }
    return std::nullopt;
  }
  for (size_t i = 0; i < items_.size(); ++i) {
    if (Equals(items_[i].first, key)) return i;
  }
  return std::nullopt;
}

void Dict::Set(Value key, Value value) {
  depth_ = std::max({depth_, key.depth() + 1, value.depth() + 1});
  weight_ = SaturatingAdd(weight_, SaturatingAdd(key.weight(), value.weight()));
  if (const std::optional<size_t> pos = Position(key)) {
    items_[*pos].second = std::move(value);
    return;
  }
  items_.emplace_back(std::move(key), std::move(value));
  if (!index_.empty()) {
    index_.emplace(HashKey(items_.back().first, Value::kMaxReprDepth), items_.size() - 1);
  } else if (items_.size() >= kIndexThreshold) {
    for (size_t i = 0; i < items_.size(); ++i) {
      index_.emplace(HashKey(items_[i].first, Value::kMaxReprDepth), i);
    }
  }
}

// ---- freeing nested values ---------------------------------------------------

void Value::StealChildren(Value& v, std::vector<Value>& work) {
  if (v.ptr_.use_count() != 1) return;  // someone else still holds it: not ours to empty
  if (v.kind_ == Kind::kList) {
    auto* data = const_cast<ListData*>(static_cast<const ListData*>(v.ptr_.get()));
    for (Value& item : data->items) work.push_back(std::move(item));
    data->items.clear();
  } else if (v.kind_ == Kind::kDict) {
    auto* dict = const_cast<Dict*>(static_cast<const Dict*>(v.ptr_.get()));
    for (auto& [k, val] : dict->items_) {
      work.push_back(std::move(k));
      work.push_back(std::move(val));
    }
    dict->items_.clear();
    dict->index_.clear();
  }
}

ListData::~ListData() {
  // Only nested containers can make destruction recurse.
  if (std::none_of(items.begin(), items.end(),
                   [](const Value& v) { return v.is_list() || v.is_dict(); })) {
    return;
  }
  std::vector<Value> work = std::move(items);
  while (!work.empty()) {
    Value v = std::move(work.back());
    work.pop_back();
    Value::StealChildren(v, work);
  }
}

Dict::~Dict() {
  if (std::none_of(items_.begin(), items_.end(), [](const auto& kv) {
        return kv.first.is_list() || kv.second.is_list() || kv.second.is_dict();
      })) {
    return;
  }
  std::vector<Value> work;
  for (auto& [k, v] : items_) {
    work.push_back(std::move(k));
    work.push_back(std::move(v));
  }
  items_.clear();
  while (!work.empty()) {
    Value v = std::move(work.back());
    work.pop_back();
    Value::StealChildren(v, work);
  }
}

// ---- Namespace -----------------------------------------------------------------

std::optional<Value> Namespace::GetAttr(std::string_view name) const {
  const Value* v = attrs_.Find(name);
  if (v == nullptr) return std::nullopt;
  return *v;
}

void Namespace::AppendRepr(std::string& out, int depth, size_t max_bytes) const {
  if (in_repr_) {
    out += "<Namespace {...}>";
    return;
  }
  in_repr_ = true;
  out += "<Namespace {";
  bool first = true;
  for (const auto& [k, v] : attrs_.items()) {
    if (out.size() > max_bytes) break;
    if (!first) out += ", ";
    first = false;
    k.AppendRepr(out, depth, max_bytes);
    out += ": ";
    v.AppendRepr(out, depth, max_bytes);
  }
  out += "}>";
  in_repr_ = false;
}

}  // namespace mx::jinja
