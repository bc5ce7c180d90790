// Helpers shared by the filter files, and the sequence filters (filters_seq.cc)
// that filters.cc lists in its table. Internal to the jinja module.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "templates/jinja/runtime.h"
#include "templates/jinja/value.h"

namespace mx::jinja::filters_internal {

using Args = std::vector<std::optional<Value>>;

inline bool IsIntLike(const Value& v) { return v.is_int() || v.is_bool(); }
inline int64_t IntOf(const Value& v) { return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int(); }
inline bool BoolParam(const std::optional<Value>& v, bool dflt) { return v ? v->Truthy() : dflt; }
// A flag Python passes to sorted(reverse=...): bool or int only.
Result<bool> StrictBoolParam(const std::optional<Value>& v, bool dflt);
// A str result that stays Markup when `like` is.
Value StrLike(const Value& like, std::string s);
// jinja2's soft_str: str(value), keeping Markup.
Result<Value> SoftStr(Runtime& rt, const Value& v);
// An integer parameter (None or absent: `dflt`).
Result<int64_t> IntParam(std::string_view filter, const std::optional<Value>& v, int64_t dflt);
// make_attrgetter: "a.b.0" looked up item by item (integer parts as ints).
Result<Value> GetPath(const Value& item, const Value& attribute);
// Lower-cases strings (jinja2's ignore_case), leaves other values.
Value IgnoreCase(const Value& v);
// Python's sorted() with keys (pair.first), stable; TypeError on unorderable keys.
Status SortByKeys(Runtime& rt, std::vector<std::pair<Value, Value>>& keyed, bool reverse);

// Sequence filters (filters_seq.cc).
Result<Value> FLength(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FList(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FFirst(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FLast(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FReverse(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FJoin(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FDefault(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FItems(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FDictsort(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FSort(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FUnique(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FMin(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FMax(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FSum(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FBatch(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FSlice(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FMap(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FSelect(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FReject(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FSelectAttr(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FRejectAttr(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FAttr(Runtime& rt, const Value& in, const CallArgs& args);
Result<Value> FGroupby(Runtime& rt, const Value& in, const CallArgs& args);

}  // namespace mx::jinja::filters_internal
