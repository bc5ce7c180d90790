// The JSON Schema keywords of each JSON type: strings (lengths, formats),
// numbers and integers (bounds), objects (properties in order, required,
// additionalProperties) and arrays (items, prefixItems, counts).
#include <cmath>

#include "grammar/json_schema_converter.h"

namespace mx::grammar::schema_internal {
namespace {

std::string Repeat(const std::string& item, int64_t lo, std::optional<int64_t> hi) {
  if (hi && *hi == lo) return lo == 1 ? item : item + "{" + std::to_string(lo) + "}";
  if (!hi) {
    if (lo == 0) return item + "*";
    if (lo == 1) return item + "+";
    return item + "{" + std::to_string(lo) + ",}";
  }
  if (lo == 0 && *hi == 1) return item + "?";
  return item + "{" + std::to_string(lo) + "," + std::to_string(*hi) + "}";
}

}  // namespace

Result<std::optional<int64_t>> Converter::Count(const OJson& s, const char* key,
                                                const std::string& path) {
  if (!s.contains(key)) return std::optional<int64_t>();
  const OJson& v = s[key];
  const bool whole = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0) ||
                     (v.is_number_float() && v.get<double>() >= 0 &&
                      std::floor(v.get<double>()) == v.get<double>());
  if (!whole) return Error(path + "/" + key, "must be a non-negative integer");
  const double d = v.get<double>();
  if (d > static_cast<double>(kMaxCount)) {
    return Error(path + "/" + key, "value " + Dump(v) + " exceeds the supported maximum of " +
                                       std::to_string(kMaxCount));
  }
  return std::optional<int64_t>(static_cast<int64_t>(d));
}

Status Converter::Bounds(const OJson& s, const std::string& path, bool integer,
                         std::optional<Bound>* lo, std::optional<Bound>* hi) {
  // Reads minimum / exclusiveMinimum (a number, or draft-4's boolean that
  // makes minimum exclusive), likewise for the maximum; keeps the tighter.
  auto read = [&](const char* key, bool lower, bool exclusive) -> Status {
    if (!s.contains(key)) return Status::Ok();
    const OJson& v = s[key];
    if (v.is_boolean()) return Status::Ok();  // draft 4, handled below
    if (!v.is_number()) return Error(path + "/" + key, "must be a number");
    double d = v.get<double>();
    if (!std::isfinite(d) || std::fabs(d) > 9.0e15) {
      return Error(path + "/" + key,
                   "value " + Dump(v) + " is out of the supported range (+-9e15)");
    }
    Bound b;
    if (integer) {
      // An integer range with inclusive whole bounds.
      double w = lower ? (exclusive ? std::floor(d) + 1 : std::ceil(d))
                       : (exclusive ? std::ceil(d) - 1 : std::floor(d));
      b = {static_cast<int64_t>(w), false};
    } else {
      if (std::floor(d) != d) {
        return Error(path + "/" + key,
                     "value " + Dump(v) + ": bounds on a 'number' must be whole numbers");
      }
      b = {static_cast<int64_t>(d), exclusive};
    }
    std::optional<Bound>& slot = lower ? *lo : *hi;
    const bool tighter =
        !slot || (lower ? (b.value > slot->value || (b.value == slot->value && b.exclusive))
                        : (b.value < slot->value || (b.value == slot->value && b.exclusive)));
    if (tighter) slot = b;
    return Status::Ok();
  };
  const bool draft4_min = s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_boolean() &&
                          s["exclusiveMinimum"].get<bool>();
  const bool draft4_max = s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_boolean() &&
                          s["exclusiveMaximum"].get<bool>();
  MX_RETURN_IF_ERROR(read("minimum", true, draft4_min));
  MX_RETURN_IF_ERROR(read("exclusiveMinimum", true, true));
  MX_RETURN_IF_ERROR(read("maximum", false, draft4_max));
  MX_RETURN_IF_ERROR(read("exclusiveMaximum", false, true));
  if (*lo && *hi) {
    const bool empty = (*lo)->value > (*hi)->value ||
                       ((*lo)->value == (*hi)->value && ((*lo)->exclusive || (*hi)->exclusive));
    if (empty) return Error(path, "the minimum and maximum leave no value");
  }
  return Status::Ok();
}

Result<std::string> Converter::TypeExpr(const OJson& s, const std::string& t,
                                        const std::string& path, const std::string& name,
                                        int depth) {
  if (t == "string") {
    MX_ASSIGN_OR_RETURN(auto min_len, Count(s, "minLength", path));
    MX_ASSIGN_OR_RETURN(auto max_len, Count(s, "maxLength", path));
    if (s.contains("format")) {
      if (min_len || max_len) {
        return Error(path, "minLength/maxLength together with 'format' are not supported");
      }
      if (!s["format"].is_string()) return Error(path + "/format", "must be a string");
      const std::string f = s["format"].get<std::string>();
      if (f == "date" || f == "time" || f == "date-time") return Prim(f + "-string");
      if (f == "uuid") return Prim("uuid");
      return Error(path + "/format",
                   "unsupported format '" + f + "' (supported: date, time, date-time, uuid)");
    }
    if (!min_len && !max_len) return Prim("string");
    const int64_t lo = min_len.value_or(0);
    if (max_len && *max_len < lo) return Error(path, "maxLength is less than minLength");
    return "\"\\\"\" " + Repeat(Prim("char"), lo, max_len) + " \"\\\"\"";
  }
  if (t == "integer" || t == "number") {
    std::optional<Bound> lo, hi;
    MX_RETURN_IF_ERROR(Bounds(s, path, t == "integer", &lo, &hi));
    if (!lo && !hi) return Prim(t);
    return t == "integer" ? IntegerRange(lo, hi) : NumberRange(lo, hi);
  }
  if (t == "boolean" || t == "null") return Prim(t);
  if (t == "object") return ObjectExpr(s, path, name, depth);
  if (t == "array") return ArrayExpr(s, path, name, depth);
  return Error(path + "/type", "unknown type '" + t + "'");
}

Result<std::string> Converter::ObjectExpr(const OJson& s, const std::string& path,
                                          const std::string& name, int depth) {
  struct Member {
    std::string key;
    const OJson* schema;
    std::string path;
    bool required = false;
  };
  static const OJson kAny = OJson::object();
  std::vector<Member> members;
  if (s.contains("properties")) {
    const OJson& props = s["properties"];
    if (!props.is_object()) return Error(path + "/properties", "must be an object");
    for (const auto& [key, sub] : props.items()) {
      members.push_back({key, &sub, path + "/properties/" + PointerToken(key)});
    }
  }
  if (s.contains("required")) {
    const OJson& req = s["required"];
    if (!req.is_array()) return Error(path + "/required", "must be an array of strings");
    for (const OJson& r : req) {
      if (!r.is_string()) return Error(path + "/required", "must be an array of strings");
      const std::string key = r.get<std::string>();
      bool found = false;
      for (Member& m : members) {
        if (m.key == key) found = m.required = true;
      }
      if (!found) members.push_back({key, &kAny, path + "/required", true});  // any value
    }
  }
  const OJson* additional = nullptr;
  if (s.contains("additionalProperties")) {
    const OJson& a = s["additionalProperties"];
    if (!a.is_boolean() && !a.is_object()) {
      return Error(path + "/additionalProperties", "must be a boolean or a schema");
    }
    if (!(a.is_boolean() && !a.get<bool>())) additional = &a;
  }
  const std::string space = Prim("space");
  if (members.empty() && (additional == nullptr || *additional == true)) {
    if (additional != nullptr || !s.contains("additionalProperties")) return Prim("object");
  }
  if (members.empty() && additional == nullptr) return "\"{\" " + space + " \"}\"";

  // kv_i ::= "\"key\"" space ":" space value space
  std::vector<std::string> kvs;
  for (const Member& m : members) {
    MX_ASSIGN_OR_RETURN(std::string value,
                        RuleFor(*m.schema, m.path, name + "-" + Sanitize(m.key), depth));
    std::string key_lit;
    AppendGbnfLiteral(Dump(OJson(m.key)), &key_lit);
    const std::string kv = Unique(name + "-" + Sanitize(m.key) + "-kv");
    rules_.push_back({kv, key_lit + " " + space + " \":\" " + space + " " + value + " " + space});
    kvs.push_back(kv);
  }
  std::string add_kv;
  if (additional != nullptr) {
    MX_ASSIGN_OR_RETURN(std::string value, RuleFor(*additional, path + "/additionalProperties",
                                                   name + "-additional", depth));
    std::vector<std::string> keys;
    for (const Member& m : members) {
      const std::string written = Dump(OJson(m.key));
      keys.push_back(written.substr(1, written.size() - 2));
    }
    const std::string key_rule = Unique(name + "-additional-key");
    Prim("char");
    Rules key_rules;
    NotStringsRules(
        keys, key_rule, prefix_ + "-", [&] { return Unique(key_rule); }, &key_rules);
    for (auto& r : key_rules) rules_.push_back(std::move(r));
    add_kv = Unique(name + "-additional-kv");
    rules_.push_back(
        {add_kv, key_rule + " " + space + " \":\" " + space + " " + value + " " + space});
  }
  const bool any_optional =
      additional != nullptr ||
      std::any_of(members.begin(), members.end(), [](const Member& m) { return !m.required; });
  if (!any_optional) {
    std::string body = "\"{\" " + space;
    for (size_t i = 0; i < kvs.size(); ++i) body += (i ? " \",\" " + space + " " : " ") + kvs[i];
    return body + " \"}\"";
  }
  // rest_i: the members from i on, after at least one member was written;
  // first_i: the first member written is i or later.
  const size_t k = members.size();
  std::vector<std::string> rest(k + 1), first(k + 1);
  rest[k] = Unique(name + "-rest");
  rules_.push_back({rest[k], add_kv.empty() ? "\"\"" : "( \",\" " + space + " " + add_kv + " )*"});
  if (!add_kv.empty()) {
    first[k] = Unique(name + "-first");
    rules_.push_back({first[k], add_kv + " " + rest[k]});
  }
  for (size_t i = k; i-- > 0;) {
    rest[i] = Unique(name + "-rest");
    std::string body = "\",\" " + space + " " + kvs[i] + " " + rest[i + 1];
    if (!members[i].required) body += " | " + rest[i + 1];
    rules_.push_back({rest[i], body});
    first[i] = Unique(name + "-first");
    std::string fbody = kvs[i] + " " + rest[i + 1];
    if (!members[i].required && !first[i + 1].empty()) fbody += " | " + first[i + 1];
    rules_.push_back({first[i], fbody});
  }
  const bool all_optional =
      std::none_of(members.begin(), members.end(), [](const Member& m) { return m.required; });
  return "\"{\" " + space + " " + first[0] + (all_optional ? "?" : "") + " \"}\"";
}

Result<std::string> Converter::ArrayExpr(const OJson& s, const std::string& path,
                                         const std::string& name, int depth) {
  MX_ASSIGN_OR_RETURN(auto min_items, Count(s, "minItems", path));
  MX_ASSIGN_OR_RETURN(auto max_items, Count(s, "maxItems", path));
  const int64_t lo = min_items.value_or(0);
  if (max_items && *max_items < lo) return Error(path, "maxItems is less than minItems");
  const std::string space = Prim("space");
  std::vector<std::string> prefix;
  const OJson* tuple = nullptr;
  std::string tuple_key;
  if (s.contains("prefixItems")) {
    tuple = &s["prefixItems"];
    tuple_key = "prefixItems";
  } else if (s.contains("items") && s["items"].is_array()) {
    tuple = &s["items"];  // draft-4 tuple form
    tuple_key = "items";
  }
  if (tuple != nullptr) {
    if (!tuple->is_array()) return Error(path + "/" + tuple_key, "must be an array of schemas");
    for (size_t i = 0; i < tuple->size(); ++i) {
      MX_ASSIGN_OR_RETURN(std::string item,
                          RuleFor((*tuple)[i], path + "/" + tuple_key + "/" + std::to_string(i),
                                  name + "-" + std::to_string(i), depth));
      prefix.push_back(item);
    }
  }
  // The schema of the elements after the tuple ("" = none may follow).
  std::string item;
  const bool items_schema = s.contains("items") && !s["items"].is_array();
  if (items_schema && !(s["items"].is_boolean() && !s["items"].get<bool>())) {
    MX_ASSIGN_OR_RETURN(item, RuleFor(s["items"], path + "/items", name + "-item", depth));
  } else if (!items_schema && tuple == nullptr) {
    item = Prim("value");
  }
  const auto k = static_cast<int64_t>(prefix.size());
  if (item.empty()) {
    // Exactly the tuple (as llama.cpp: every prefix item is written).
    if (lo > k || (max_items && *max_items < k)) {
      return Error(path, "minItems/maxItems cannot be met by the " + std::to_string(k) +
                             " prefixItems with no further items allowed");
    }
    std::string body = "\"[\" " + space;
    for (int64_t i = 0; i < k; ++i) {
      body += (i ? " \",\" " + space + " " : " ") + prefix[i] + " " + space;
    }
    return body + " \"]\"";
  }
  const std::string next = "(\",\" " + space + " " + item + " " + space + ")";
  std::optional<int64_t> extra_hi;
  if (max_items) extra_hi = std::max<int64_t>(0, *max_items - k);
  const int64_t extra_lo = std::max<int64_t>(0, lo - k);
  if (max_items && *max_items < k) return Error(path, "maxItems is less than the prefixItems");
  std::string body = "\"[\" " + space;
  if (k > 0) {
    for (int64_t i = 0; i < k; ++i) {
      body += (i ? " \",\" " + space + " " : " ") + prefix[i] + " " + space;
    }
    if (!extra_hi || *extra_hi > 0) body += " " + Repeat(next, extra_lo, extra_hi);
    return body + " \"]\"";
  }
  if (extra_hi && *extra_hi == 0) return body + " \"]\"";
  std::optional<int64_t> more_hi;
  if (extra_hi) more_hi = *extra_hi - 1;
  std::string elements = item + " " + space;
  if (!more_hi || *more_hi > 0) {
    elements += " " + Repeat(next, std::max<int64_t>(0, extra_lo - 1), more_hi);
  }
  if (extra_lo == 0) return body + " (" + elements + ")? \"]\"";
  return body + " " + elements + " \"]\"";
}

}  // namespace mx::grammar::schema_internal
