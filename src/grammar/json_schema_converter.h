// Internal to mx_grammar: the JSON Schema converter behind json_schema.h.
// Visit() turns a schema node into a GBNF expression, emitting named rules
// for properties, items, $defs and primitives on the way. The schema
// keywords of one JSON type (TypeExpr, ObjectExpr, ArrayExpr) are in
// json_schema_types.cc; the rest is here. Not a public header.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"
#include "grammar/json_schema_internal.h"

namespace mx::grammar::schema_internal {

using OJson = nlohmann::ordered_json;

inline constexpr int kMaxDepth = 64;
inline constexpr int64_t kMaxCount = 1 << 16;  // minLength, maxLength, minItems, maxItems
inline constexpr int64_t kMaxEnumValues = 1 << 14;  // values of one enum

inline const std::set<std::string, std::less<>>& Supported() {
  static const std::set<std::string, std::less<>> k = {"type",
                                                       "properties",
                                                       "required",
                                                       "additionalProperties",
                                                       "enum",
                                                       "const",
                                                       "items",
                                                       "prefixItems",
                                                       "minItems",
                                                       "maxItems",
                                                       "minLength",
                                                       "maxLength",
                                                       "format",
                                                       "minimum",
                                                       "maximum",
                                                       "exclusiveMinimum",
                                                       "exclusiveMaximum",
                                                       "anyOf",
                                                       "oneOf",
                                                       "allOf",
                                                       "$ref",
                                                       "nullable",
                                                       "$defs",
                                                       "definitions"};
  return k;
}

inline bool IsAnnotation(std::string_view k) {
  static const std::set<std::string, std::less<>> kAnnotations = {
      "title", "description", "examples", "default",   "$schema",
      "$id",   "$comment",    "readOnly", "writeOnly", "deprecated"};
  return kAnnotations.count(k) > 0;
}

inline std::string Dump(const OJson& j) {
  return j.dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace);
}

inline std::string Literal(const OJson& value) {
  std::string out;
  AppendGbnfLiteral(Dump(value), &out);
  return out;
}

inline std::string Sanitize(std::string_view s) {
  std::string out;
  for (char c : s) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (word) {
      out.push_back(c);
    } else if (!out.empty() && out.back() != '-') {
      out.push_back('-');
    }
    if (out.size() >= 40) break;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out.empty() ? "x" : out;
}

inline std::string PointerToken(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out.push_back(c);
  }
  return out;
}

class Converter {
 public:
  Converter(const OJson& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {}

  Status Run(std::string* out) {
    used_.insert(prefix_);
    MX_ASSIGN_OR_RETURN(std::string expr, Visit(root_, "", prefix_, 0));
    std::string text = prefix_ + " ::= " + expr + "\n";
    for (const auto& [name, body] : rules_) text += name + " ::= " + body + "\n";
    *out += text;
    return Status::Ok();
  }

 private:
  Status Error(const std::string& path, const std::string& what) const {
    return Status::InvalidArgument("json schema at " + (path.empty() ? "/" : path) + ": " + what);
  }

  // A fresh rule name "<hint>" or "<hint>-<n>".
  std::string Unique(const std::string& hint) {
    std::string name = hint.size() > 120 ? hint.substr(0, 120) : hint;
    while (!name.empty() && name.back() == '-') name.pop_back();
    if (used_.insert(name).second) return name;
    // Numbered from where this hint left off: a long enum asks for one name
    // per trie branch, and trying every number from 2 again is quadratic.
    for (int& n = next_suffix_[name];;) {
      std::string candidate = name + "-" + std::to_string(n < 2 ? (n = 2) : n);
      ++n;
      if (used_.insert(candidate).second) return candidate;
    }
  }

  std::string Prim(const std::string& name) {
    const std::string full = prefix_ + "-" + name;
    if (prims_.insert(name).second) {
      const schema_internal::Primitive* p = schema_internal::FindPrimitive(name);
      std::string body;
      for (const char* c = p->body; *c; ++c) {
        if (*c == '%')
          body += prefix_ + "-";
        else
          body.push_back(*c);
      }
      used_.insert(full);
      rules_.push_back({full, body});
      for (const char* dep : p->deps) Prim(dep);
    }
    return full;
  }

  // Emits `name ::= <s>` under a fresh name near `hint`; returns the name.
  Result<std::string> RuleFor(const OJson& s, const std::string& path, const std::string& hint,
                              int depth) {
    const std::string name = Unique(hint);
    const size_t slot = rules_.size();
    rules_.push_back({name, ""});
    MX_ASSIGN_OR_RETURN(std::string expr, Visit(s, path, name, depth + 1));
    rules_[slot].second = std::move(expr);
    return name;
  }

  Result<std::string> Visit(const OJson& s, const std::string& path, const std::string& name,
                            int depth) {
    if (depth > kMaxDepth) {
      return Error(path, "schema nested deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    if (s.is_boolean()) {
      if (s.get<bool>()) return Prim("value");
      return Error(path, "the schema 'false' matches nothing");
    }
    if (!s.is_object()) {
      return Error(path,
                   std::string("a schema must be an object or a boolean, found ") + s.type_name());
    }
    for (const auto& [key, unused] : s.items()) {
      if (IsAnnotation(key)) continue;
      if (!Supported().count(key)) return Error(path, "unsupported keyword '" + key + "'");
    }
    if (s.contains("$ref")) {
      for (const auto& [key, unused] : s.items()) {
        if (key != "$ref" && key != "$defs" && key != "definitions" && !IsAnnotation(key)) {
          return Error(path, "keyword '" + key + "' beside '$ref' is not supported");
        }
      }
      return Ref(s["$ref"], path + "/$ref", depth);
    }
    MX_ASSIGN_OR_RETURN(std::string expr, VisitNonNull(s, path, name, depth));
    if (s.contains("nullable")) {
      if (!s["nullable"].is_boolean()) return Error(path + "/nullable", "must be a boolean");
      if (s["nullable"].get<bool>()) expr = "(" + expr + " | " + Prim("null") + ")";
    }
    return expr;
  }

  Result<std::string> Ref(const OJson& ref, const std::string& path, int depth) {
    if (!ref.is_string()) return Error(path, "must be a string");
    const std::string r = ref.get<std::string>();
    auto it = refs_.find(r);
    if (it != refs_.end()) return it->second;
    if (r != "#" && r.rfind("#/", 0) != 0) {
      return Error(path, "only local references ('#/$defs/...') are supported, not '" + r + "'");
    }
    MX_ASSIGN_OR_RETURN(const OJson* target, Resolve(ref, path));
    const std::string target_path = r.substr(1);
    const size_t slash = r.rfind('/');
    const std::string last = slash == std::string::npos ? "root" : r.substr(slash + 1);
    const std::string name = Unique(prefix_ + "-ref-" + Sanitize(last));
    refs_.emplace(r, name);  // before visiting: recursive references resolve to the name
    const size_t slot = rules_.size();
    rules_.push_back({name, ""});
    MX_ASSIGN_OR_RETURN(std::string expr, Visit(*target, target_path, name, depth + 1));
    rules_[slot].second = std::move(expr);
    return name;
  }

  Result<std::string> VisitNonNull(const OJson& s, const std::string& path, const std::string& name,
                                   int depth) {
    const char* kCombinators[] = {"const", "enum", "anyOf", "oneOf", "allOf"};
    const char* used = nullptr;
    for (const char* k : kCombinators) {
      if (!s.contains(k)) continue;
      if (used != nullptr) {
        return Error(path,
                     std::string("combining '") + used + "' with '" + k + "' is not supported");
      }
      used = k;
    }
    if (s.contains("const")) return Literal(s["const"]);
    if (s.contains("enum")) return Enum(s, path, name);
    if (s.contains("anyOf") || s.contains("oneOf")) {
      const std::string key = s.contains("anyOf") ? "anyOf" : "oneOf";
      for (const auto& [k, unused] : s.items()) {
        if (k != key && k != "type" && k != "nullable" && k != "$defs" && k != "definitions" &&
            !IsAnnotation(k)) {
          return Error(path, "keyword '" + k + "' beside '" + key + "' is not supported");
        }
      }
      const OJson& list = s[key];
      if (!list.is_array() || list.empty()) {
        return Error(path + "/" + key, "must be a non-empty array of schemas");
      }
      std::string expr;
      for (size_t i = 0; i < list.size(); ++i) {
        MX_ASSIGN_OR_RETURN(std::string alt,
                            RuleFor(list[i], path + "/" + key + "/" + std::to_string(i),
                                    name + "-" + std::to_string(i), depth));
        expr += (i ? " | " : "") + alt;
      }
      return "(" + expr + ")";
    }
    if (s.contains("allOf")) {
      MX_ASSIGN_OR_RETURN(OJson merged, MergeAllOf(s, path, depth));
      return Visit(merged, path, name, depth + 1);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const OJson& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const OJson& x : t) {
          if (!x.is_string())
            return Error(path + "/type", "must be a string or an array of strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        return Error(path + "/type", "must be a string or a non-empty array of strings");
      }
    } else if (s.contains("properties") || s.contains("additionalProperties") ||
               s.contains("required")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") ||
               s.contains("maxItems")) {
      types.push_back("array");
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("format")) {
      types.push_back("string");
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
               s.contains("exclusiveMaximum")) {
      types.push_back("number");
    } else {
      return Prim("value");
    }
    std::string expr;
    for (size_t i = 0; i < types.size(); ++i) {
      MX_ASSIGN_OR_RETURN(std::string alt, TypeExpr(s, types[i], path, name, depth));
      expr += (i ? " | " : "") + alt;
    }
    return types.size() > 1 ? "(" + expr + ")" : expr;
  }

  static bool HasType(const OJson& v, const std::string& t) {
    if (t == "string") return v.is_string();
    if (t == "number") return v.is_number();
    if (t == "integer") {
      return v.is_number_integer() ||
             (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
    }
    if (t == "boolean") return v.is_boolean();
    if (t == "null") return v.is_null();
    if (t == "object") return v.is_object();
    if (t == "array") return v.is_array();
    return false;
  }

  Result<std::string> Enum(const OJson& s, const std::string& path, const std::string& name) {
    const OJson& values = s["enum"];
    if (!values.is_array() || values.empty()) {
      return Error(path + "/enum", "must be a non-empty array");
    }
    // Sizes first: the grammar of a huge enum would be refused anyway, after
    // seconds of building it.
    if (values.size() > static_cast<size_t>(kMaxEnumValues)) {
      return Error(path + "/enum", std::to_string(values.size()) + " values exceed the supported maximum of " +
                                       std::to_string(kMaxEnumValues));
    }
    std::vector<std::string> types;
    if (s.contains("type") && s["type"].is_string()) types.push_back(s["type"].get<std::string>());
    if (s.contains("type") && s["type"].is_array()) {
      for (const OJson& t : s["type"]) {
        if (t.is_string()) types.push_back(t.get<std::string>());
      }
    }
    std::vector<std::string> literals;
    for (const OJson& v : values) {
      bool fits = types.empty();
      for (const std::string& t : types) fits = fits || HasType(v, t);
      if (fits) literals.push_back(Dump(v));
    }
    if (literals.empty()) return Error(path + "/enum", "no value has the schema's 'type'");
    const std::string base = Unique(name + "-enum");
    return LiteralTrie(
        literals, [&] { return Unique(base); }, &rules_);
  }

  Result<OJson> MergeAllOf(const OJson& s, const std::string& path, int depth) {
    if (depth > kMaxDepth) return Error(path, "allOf nested too deeply");
    const OJson& list = s["allOf"];
    if (!list.is_array() || list.empty()) {
      return Error(path + "/allOf", "must be a non-empty array of schemas");
    }
    std::vector<std::pair<const OJson*, std::string>> members;
    OJson self = s;
    self.erase("allOf");
    members.push_back({&self, path});
    std::vector<OJson> resolved;  // keeps nested merges alive
    resolved.reserve(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string p = path + "/allOf/" + std::to_string(i);
      const OJson* m = &list[i];
      for (int hops = 0; m->is_object() && m->contains("$ref") && hops < kMaxDepth; ++hops) {
        MX_ASSIGN_OR_RETURN(const OJson* t, Resolve((*m)["$ref"], p));
        m = t;
      }
      if (m->is_object() && m->contains("allOf")) {
        MX_ASSIGN_OR_RETURN(OJson inner, MergeAllOf(*m, p, depth + 1));
        resolved.push_back(std::move(inner));
        m = &resolved.back();
      }
      members.push_back({m, p});
    }
    OJson merged = OJson::object();
    merged["type"] = "object";
    OJson props = OJson::object();
    std::vector<std::string> required;
    std::optional<OJson> additional;
    for (const auto& [m, p] : members) {
      if (!m->is_object()) return Error(p, "allOf is supported only for object schemas");
      for (const auto& [key, value] : m->items()) {
        if (IsAnnotation(key) || key == "$defs" || key == "definitions") continue;
        if (key == "type") {
          if (value != "object") return Error(p, "allOf is supported only for object schemas");
        } else if (key == "properties") {
          if (!value.is_object()) return Error(p + "/properties", "must be an object");
          for (const auto& [prop, sub] : value.items()) {
            if (props.contains(prop)) {
              props[prop] = OJson{{"allOf", OJson::array({props[prop], sub})}};
            } else {
              props[prop] = sub;
            }
          }
        } else if (key == "required") {
          if (!value.is_array()) return Error(p + "/required", "must be an array of strings");
          for (const OJson& r : value) {
            if (!r.is_string()) return Error(p + "/required", "must be an array of strings");
            required.push_back(r.get<std::string>());
          }
        } else if (key == "additionalProperties") {
          if (!additional || value == false) additional = value;
        } else {
          return Error(p, "allOf is supported only for object schemas (found '" + key + "')");
        }
      }
    }
    merged["properties"] = std::move(props);
    merged["required"] = required;
    if (additional) merged["additionalProperties"] = *additional;
    return merged;
  }

  // The schema a local reference ("#", "#/$defs/name", any JSON pointer
  // into the root) points to.
  Result<const OJson*> Resolve(const OJson& ref, const std::string& path) {
    if (!ref.is_string()) return Error(path, "$ref must be a string");
    const std::string r = ref.get<std::string>();
    if (r != "#" && r.rfind("#/", 0) != 0) {
      return Error(path, "only local references ('#/$defs/...') are supported, not '" + r + "'");
    }
    const OJson* target = &root_;
    size_t at = 1;
    while (at < r.size()) {
      size_t next = r.find('/', at + 1);
      if (next == std::string::npos) next = r.size();
      const std::string token = r.substr(at + 1, next - at - 1);
      std::string key;
      for (size_t i = 0; i < token.size(); ++i) {
        if (token[i] == '~' && i + 1 < token.size() &&
            (token[i + 1] == '0' || token[i + 1] == '1')) {
          key.push_back(token[i + 1] == '0' ? '~' : '/');
          ++i;
        } else {
          key.push_back(token[i]);
        }
      }
      if (target->is_object() && target->contains(key)) {
        target = &(*target)[key];
      } else if (target->is_array() && !key.empty() && key.size() < 9 &&
                 key.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoul(key) < target->size()) {
        target = &(*target)[std::stoul(key)];
      } else {
        return Error(path, "reference '" + r + "' does not resolve");
      }
      at = next;
    }
    return target;
  }

  Result<std::string> TypeExpr(const OJson& s, const std::string& t, const std::string& path,
                               const std::string& name, int depth);
  Result<std::string> ObjectExpr(const OJson& s, const std::string& path, const std::string& name,
                                 int depth);
  Result<std::string> ArrayExpr(const OJson& s, const std::string& path, const std::string& name,
                                int depth);
  Result<std::optional<int64_t>> Count(const OJson& s, const char* key, const std::string& path);
  Status Bounds(const OJson& s, const std::string& path, bool integer, std::optional<Bound>* lo,
                std::optional<Bound>* hi);

  const OJson& root_;
  const std::string prefix_;
  std::vector<std::pair<std::string, std::string>> rules_;
  std::set<std::string> used_;
  std::map<std::string, int> next_suffix_;  // Unique: the next number to try per hint
  std::set<std::string> prims_;
  std::map<std::string, std::string> refs_;
};

}  // namespace mx::grammar::schema_internal
