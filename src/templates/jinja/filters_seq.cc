// Sequence filters: length, list, first / last, join, sort, unique, map,
// select / reject, dictsort, groupby, batch, slice, sum, min / max, ...
#include <algorithm>
#include <cmath>

#include "templates/jinja/filters_impl.h"
#include "templates/jinja/ops.h"
#include "templates/jinja/pystr.h"

namespace mx::jinja::filters_internal {

// ---- sequence filters ---------------------------------------------------------

Result<Value> FLength(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("length", args, {}).status());
  MX_ASSIGN_OR_RETURN(int64_t n, Length(in));
  return Value::Int(n);
}

Result<Value> FList(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("list", args, {}).status());
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(rt, in));
  return Value::List(std::move(items));
}

Result<Value> FFirst(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("first", args, {}).status());
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(rt, in));
  if (items.empty()) return Value::Undefined("No first item, sequence was empty.");
  return items.front();
}

Result<Value> FLast(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("last", args, {}).status());
  if (in.is_iterator() && in.iterator_type() == "generator") {
    return TypeError("'generator' object is not reversible");
  }
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(rt, in));
  if (items.empty()) return Value::Undefined("No last item, sequence was empty.");
  return items.back();
}

Result<Value> FReverse(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("reverse", args, {}).status());
  if (in.is_string()) {
    std::u32string cps = py::Decode(in.as_string());
    std::reverse(cps.begin(), cps.end());
    return StrLike(in, py::Encode(cps));
  }
  if (!in.is_list() && !in.is_dict() && !in.is_undefined()) {
    return Status::InvalidArgument("argument must be iterable");
  }
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(rt, in));
  std::reverse(items.begin(), items.end());
  // Python's reversed() gives an iterator for sequences and dicts.
  if (in.is_sequence()) return Value::Iterator(std::move(items), "list_reverseiterator");
  if (in.is_dict()) return Value::Iterator(std::move(items), "dict_reversekeyiterator");
  return Value::List(std::move(items));
}

Result<Value> FJoin(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("join", args, {"d", "attribute"}));
  std::string sep;
  if (a[0]) {
    MX_ASSIGN_OR_RETURN(sep, rt.ToStr(*a[0]));
  }
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(rt, in));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    Value item = items[i];
    if (a[1] && !a[1]->is_none()) {
      MX_ASSIGN_OR_RETURN(item, GetPath(item, *a[1]));
    }
    if (i) out += sep;
    MX_ASSIGN_OR_RETURN(std::string text, rt.ToStr(item));
    out += text;
    MX_RETURN_IF_ERROR(rt.CheckString(out.size()));
  }
  return Value::String(std::move(out));
}

Result<Value> FDefault(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("default", args, {"default_value", "boolean"}));
  const Value dflt = a[0] ? *a[0] : Value::String("");
  if (in.is_undefined() || (BoolParam(a[1], false) && !in.Truthy())) return dflt;
  return in;
}

Result<Value> FItems(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_RETURN_IF_ERROR(BindArgs("items", args, {}).status());
  if (in.is_undefined()) return Value::Iterator({}, "generator");
  if (!in.is_dict()) return TypeError("Can only get item pairs from a mapping.");
  ValueList out;
  for (const auto& [k, v] : in.as_dict().items()) out.push_back(Value::Tuple({k, v}));
  return Value::Iterator(std::move(out), "generator");
}

Result<Value> FDictsort(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("dictsort", args, {"case_sensitive", "by", "reverse"}));
  const bool case_sensitive = BoolParam(a[0], false);
  const std::string by = a[1] ? a[1]->Str() : "key";
  if (by != "key" && by != "value") {
    return Status::InvalidArgument("You can only sort by either \"key\" or \"value\"");
  }
  if (!in.is_dict()) {
    return Status::InvalidArgument("'" + std::string(in.TypeName()) +
                                   "' object has no attribute 'items'");
  }
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [k, v] : in.as_dict().items()) {
    const Value& key = by == "key" ? k : v;
    keyed.emplace_back(case_sensitive ? key : IgnoreCase(key), Value::Tuple({k, v}));
  }
  MX_ASSIGN_OR_RETURN(const bool reverse, StrictBoolParam(a[2], false));
  MX_RETURN_IF_ERROR(SortByKeys(rt, keyed, reverse));
  ValueList out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::List(std::move(out));
}

Result<Value> FSort(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("sort", args, {"reverse", "case_sensitive", "attribute"}));
  const bool case_sensitive = BoolParam(a[1], false);
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(rt, in));
  MX_RETURN_IF_ERROR(rt.Charge(items.size()));
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) {
    ValueList key_parts;
    if (a[2] && !a[2]->is_none()) {
      // "a,b" sorts by several attributes.
      std::string_view spec = a[2]->is_string() ? std::string_view(a[2]->as_string()) : "";
      if (!a[2]->is_string()) {
        MX_ASSIGN_OR_RETURN(Value k, GetPath(item, *a[2]));
        key_parts.push_back(case_sensitive ? k : IgnoreCase(k));
      }
      while (a[2]->is_string()) {
        const size_t comma = spec.find(',');
        MX_ASSIGN_OR_RETURN(Value k,
                            GetPath(item, Value::String(std::string(spec.substr(0, comma)))));
        key_parts.push_back(case_sensitive ? k : IgnoreCase(k));
        if (comma == std::string_view::npos) break;
        spec.remove_prefix(comma + 1);
      }
    } else {
      key_parts.push_back(case_sensitive ? item : IgnoreCase(item));
    }
    keyed.emplace_back(Value::List(std::move(key_parts)), item);
  }
  MX_ASSIGN_OR_RETURN(const bool reverse, StrictBoolParam(a[0], false));
  MX_RETURN_IF_ERROR(SortByKeys(rt, keyed, reverse));
  ValueList out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::List(std::move(out));
}

Result<Value> FUnique(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("unique", args, {"case_sensitive", "attribute"}));
  const bool case_sensitive = BoolParam(a[0], false);
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(rt, in));
  MX_RETURN_IF_ERROR(rt.Charge(items.size()));
  Dict seen;
  ValueList out;
  for (const Value& item : items) {
    Value key = item;
    if (a[1] && !a[1]->is_none()) {
      MX_ASSIGN_OR_RETURN(key, GetPath(item, *a[1]));
    }
    if (!case_sensitive) key = IgnoreCase(key);
    if (!IsHashable(key))
      return TypeError("unhashable type: '" + std::string(key.TypeName()) + "'");
    if (seen.Find(key) == nullptr) {
      seen.Set(key, Value::None());
      out.push_back(item);
    }
  }
  return Value::Iterator(std::move(out), "generator");
}

Result<Value> MinMax(Runtime& rt, std::string_view name, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs(name, args, {"case_sensitive", "attribute"}));
  const bool case_sensitive = BoolParam(a[0], false);
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(rt, in));
  MX_RETURN_IF_ERROR(rt.Charge(items.size()));
  if (items.empty()) return Value::Undefined("No aggregated item, sequence was empty.");
  auto key_of = [&](const Value& item) -> Result<Value> {
    Value k = item;
    if (a[1] && !a[1]->is_none()) {
      MX_ASSIGN_OR_RETURN(k, GetPath(item, *a[1]));
    }
    return case_sensitive ? k : IgnoreCase(k);
  };
  size_t best = 0;
  MX_ASSIGN_OR_RETURN(Value best_key, key_of(items[0]));
  for (size_t i = 1; i < items.size(); ++i) {
    MX_ASSIGN_OR_RETURN(Value k, key_of(items[i]));
    MX_ASSIGN_OR_RETURN(bool better, name == "min" ? Less(rt, k, best_key) : Less(rt, best_key, k));
    if (better) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

Result<Value> FMin(Runtime& rt, const Value& in, const CallArgs& args) {
  return MinMax(rt, "min", in, args);
}
Result<Value> FMax(Runtime& rt, const Value& in, const CallArgs& args) {
  return MinMax(rt, "max", in, args);
}

Result<Value> FSum(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("sum", args, {"attribute", "start"}));
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(rt, in));
  Value total = a[1] ? *a[1] : Value::Int(0);
  for (const Value& item : items) {
    Value v = item;
    if (a[0] && !a[0]->is_none()) {
      MX_ASSIGN_OR_RETURN(v, GetPath(item, *a[0]));
    }
    MX_ASSIGN_OR_RETURN(total, Binary(rt, BinOp::kAdd, total, v));
  }
  return total;
}

Result<Value> FBatch(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("batch", args, {"linecount", "fill_with"}, 1));
  MX_ASSIGN_OR_RETURN(int64_t n, IntParam("batch", a[0], 1));
  if (n <= 0) return Status::InvalidArgument("batch: linecount must be positive");
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(rt, in));
  ValueList out, cur;
  for (const Value& item : items) {
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::List(std::move(cur)));
      cur.clear();
    }
    cur.push_back(item);
  }
  if (!cur.empty()) {
    if (a[1] && !a[1]->is_none()) {
      MX_RETURN_IF_ERROR(rt.CheckItems(static_cast<size_t>(n)));
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*a[1]);
    }
    out.push_back(Value::List(std::move(cur)));
  }
  return Value::Iterator(std::move(out), "generator");
}

Result<Value> FSlice(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("slice", args, {"slices", "fill_with"}, 1));
  MX_ASSIGN_OR_RETURN(int64_t slices, IntParam("slice", a[0], 1));
  if (slices <= 0) return Status::InvalidArgument("slice: slices must be positive");
  MX_RETURN_IF_ERROR(rt.CheckItems(static_cast<size_t>(std::min<int64_t>(slices, 1 << 30))));
  MX_ASSIGN_OR_RETURN(ValueList seq, Iterate(rt, in));
  const auto length = static_cast<int64_t>(seq.size());
  const int64_t per = length / slices, extra = length % slices;
  int64_t offset = 0;
  ValueList out;
  for (int64_t i = 0; i < slices; ++i) {
    const int64_t start = offset + i * per;
    if (i < extra) ++offset;
    const int64_t end = offset + (i + 1) * per;
    ValueList tmp(seq.begin() + start, seq.begin() + end);
    if (a[1] && !a[1]->is_none() && i >= extra) tmp.push_back(*a[1]);
    out.push_back(Value::List(std::move(tmp)));
  }
  return Value::Iterator(std::move(out), "generator");
}

Result<Value> FMap(Runtime& rt, const Value& in, const CallArgs& args) {
  // jinja2 maps nothing over a falsy value (None, "", []) without iterating it.
  if (!in.Truthy()) return Value::Iterator({}, "generator");
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(rt, in));
  ValueList out;
  out.reserve(items.size());
  const bool by_attribute = args.positional.empty() &&
                            std::any_of(args.keywords.begin(), args.keywords.end(),
                                        [](const auto& kv) { return kv.first == "attribute"; });
  if (by_attribute) {
    Value attribute, dflt;
    bool has_default = false;
    for (const auto& [k, v] : args.keywords) {
      if (k == "attribute") {
        attribute = v;
      } else if (k == "default") {
        dflt = v;
        has_default = !v.is_none();
      } else {
        return Status::InvalidArgument("Unexpected keyword argument '" + k + "'");
      }
    }
    for (const Value& item : items) {
      MX_ASSIGN_OR_RETURN(Value v, GetPath(item, attribute));
      if (has_default && v.is_undefined()) v = dflt;
      out.push_back(std::move(v));
    }
    return Value::Iterator(std::move(out), "generator");
  }
  if (args.positional.empty()) return Status::InvalidArgument("map requires a filter argument");
  MX_ASSIGN_OR_RETURN(const std::string name, rt.ToStr(args.positional[0]));
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keywords = args.keywords;
  for (const Value& item : items) {
    MX_ASSIGN_OR_RETURN(Value v, rt.CallFilter(name, item, rest));
    out.push_back(std::move(v));
  }
  return Value::Iterator(std::move(out), "generator");
}

// select / reject / selectattr / rejectattr.
Result<Value> SelectOrReject(Runtime& rt, const Value& in, const CallArgs& args, bool keep_if,
                             bool by_attribute) {
  // jinja2 selects nothing from a falsy value (None, "", []) without iterating it.
  if (!in.Truthy()) return Value::Iterator({}, "generator");
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(rt, in));
  size_t off = 0;
  Value attribute;
  if (by_attribute) {
    if (args.positional.empty()) {
      return Status::InvalidArgument("Missing parameter for attribute name");
    }
    attribute = args.positional[0];
    off = 1;
  }
  std::optional<std::string> test;
  CallArgs test_args;
  if (args.positional.size() > off) {
    MX_ASSIGN_OR_RETURN(test, rt.ToStr(args.positional[off]));
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(off) + 1,
                                args.positional.end());
    test_args.keywords = args.keywords;
  }
  ValueList out;
  for (const Value& item : items) {
    Value probe = item;
    if (by_attribute) {
      MX_ASSIGN_OR_RETURN(probe, GetPath(item, attribute));
    }
    bool ok = probe.Truthy();
    if (test) {
      MX_ASSIGN_OR_RETURN(ok, rt.CallTest(*test, probe, test_args));
    }
    if (ok == keep_if) out.push_back(item);
  }
  return Value::Iterator(std::move(out), "generator");
}

Result<Value> FSelect(Runtime& rt, const Value& in, const CallArgs& args) {
  return SelectOrReject(rt, in, args, true, false);
}
Result<Value> FReject(Runtime& rt, const Value& in, const CallArgs& args) {
  return SelectOrReject(rt, in, args, false, false);
}
Result<Value> FSelectAttr(Runtime& rt, const Value& in, const CallArgs& args) {
  return SelectOrReject(rt, in, args, true, true);
}
Result<Value> FRejectAttr(Runtime& rt, const Value& in, const CallArgs& args) {
  return SelectOrReject(rt, in, args, false, true);
}

Result<Value> FAttr(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a, BindArgs("attr", args, {"name"}, 1));
  if (!a[0]->is_string()) return TypeError("attribute name must be string");
  if (in.is_dict()) {
    // attr() does not fall back to items.
    bool unsafe = false;
    if (!HasMethod(in, a[0]->as_string(), &unsafe)) return MissingAttribute(in, a[0]->as_string());
  }
  return GetAttr(in, a[0]->as_string());
}

Result<Value> FGroupby(Runtime& rt, const Value& in, const CallArgs& args) {
  MX_ASSIGN_OR_RETURN(Args a,
                      BindArgs("groupby", args, {"attribute", "default", "case_sensitive"}, 1));
  const bool case_sensitive = BoolParam(a[2], false);
  MX_ASSIGN_OR_RETURN(ValueList items, Iterate(rt, in));
  auto key_of = [&](const Value& item, bool fold) -> Result<Value> {
    MX_ASSIGN_OR_RETURN(Value k, GetPath(item, *a[0]));
    if (a[1] && !a[1]->is_none() && k.is_undefined()) k = *a[1];
    return fold ? IgnoreCase(k) : k;
  };
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) {
    MX_ASSIGN_OR_RETURN(Value k, key_of(item, !case_sensitive));
    keyed.emplace_back(std::move(k), item);
  }
  MX_RETURN_IF_ERROR(SortByKeys(rt, keyed, false));
  MX_RETURN_IF_ERROR(rt.Charge(keyed.size()));
  ValueList out;
  for (size_t i = 0; i < keyed.size();) {
    size_t j = i;
    ValueList group;
    MX_RETURN_IF_ERROR(rt.ChargeWeight(keyed[i].first.weight()));
    while (j < keyed.size() && Equals(keyed[j].first, keyed[i].first))
      group.push_back(keyed[j++].second);
    MX_ASSIGN_OR_RETURN(Value grouper, key_of(group.front(), false));
    out.push_back(Value::Tuple({grouper, Value::List(std::move(group))}));
    i = j;
  }
  return Value::List(std::move(out));
}

}  // namespace mx::jinja::filters_internal
