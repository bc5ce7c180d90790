// A small JSON Schema validator for the subset json_schema.h supports, so
// that tests can check what constrained decoding produced independently of
// the grammar that produced it.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

namespace mx::grammar {

class SubsetValidator {
 public:
  using OJson = nlohmann::ordered_json;
  explicit SubsetValidator(const OJson& root) : root_(root) {}

  // "" when `v` is valid, else what is wrong and where.
  std::string Check(const OJson& v) const { return Check(v, root_, "/"); }

 private:
  static size_t CodePoints(const std::string& s) {
    size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
  }
  static bool Digits(const std::string& s, size_t at, size_t n) {
    for (size_t i = at; i < at + n; ++i) {
      if (i >= s.size() || s[i] < '0' || s[i] > '9') return false;
    }
    return true;
  }
  static bool IsDate(const std::string& s) {
    if (s.size() != 10 || !Digits(s, 0, 4) || s[4] != '-' || !Digits(s, 5, 2) || s[7] != '-' ||
        !Digits(s, 8, 2)) {
      return false;
    }
    int m = std::stoi(s.substr(5, 2)), d = std::stoi(s.substr(8, 2));
    return m >= 1 && m <= 12 && d >= 1 && d <= 31;
  }
  static bool IsTime(const std::string& s) {
    if (s.size() < 9 || !Digits(s, 0, 2) || s[2] != ':' || !Digits(s, 3, 2) || s[5] != ':' ||
        !Digits(s, 6, 2)) {
      return false;
    }
    if (std::stoi(s.substr(0, 2)) > 23 || std::stoi(s.substr(3, 2)) > 59 ||
        std::stoi(s.substr(6, 2)) > 59) {
      return false;
    }
    size_t at = 8;
    if (s[at] == '.') {
      ++at;
      while (at < s.size() && s[at] >= '0' && s[at] <= '9') ++at;
    }
    std::string zone = s.substr(at);
    return zone == "Z" || (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') &&
                           Digits(zone, 1, 2) && zone[3] == ':' && Digits(zone, 4, 2));
  }
  static bool IsUuid(const std::string& s) {
    if (s.size() != 36) return false;
    for (size_t i = 0; i < 36; ++i) {
      const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
      if (dash != (s[i] == '-')) return false;
      if (!dash && !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
    }
    return true;
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
  const OJson& Resolve(const std::string& ref) const {
    const OJson* t = &root_;
    size_t at = 1;
    while (at < ref.size()) {
      size_t next = ref.find('/', at + 1);
      if (next == std::string::npos) next = ref.size();
      t = &(*t)[ref.substr(at + 1, next - at - 1)];
      at = next;
    }
    return *t;
  }

  std::string Check(const OJson& v, const OJson& s, const std::string& at) const {
    if (s.is_boolean()) return s.get<bool>() ? "" : at + ": false schema";
    if (s.contains("$ref")) return Check(v, Resolve(s["$ref"].get<std::string>()), at);
    if (s.value("nullable", false) && v.is_null()) return "";
    if (s.contains("const") && v != s["const"]) return at + ": not the const";
    if (s.contains("enum")) {
      bool found = false;
      for (const OJson& e : s["enum"]) found = found || e == v;
      if (!found) return at + ": not in enum";
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      bool any = false;
      for (const OJson& alt : s[key]) any = any || Check(v, alt, at).empty();
      if (!any) return at + ": no " + key + " alternative";
    }
    if (s.contains("allOf")) {
      for (const OJson& part : s["allOf"]) {
        std::string e = Check(v, part, at);
        if (!e.empty()) return e;
      }
    }
    if (s.contains("type")) {
      bool ok = false;
      if (s["type"].is_string()) ok = HasType(v, s["type"].get<std::string>());
      if (s["type"].is_array()) {
        for (const OJson& t : s["type"]) ok = ok || HasType(v, t.get<std::string>());
      }
      if (!ok) return at + ": wrong type";
    }
    if (v.is_string()) {
      const std::string str = v.get<std::string>();
      const size_t n = CodePoints(str);
      if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return at + ": too short";
      if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return at + ": too long";
      const std::string f = s.value("format", "");
      if (f == "date" && !IsDate(str)) return at + ": not a date";
      if (f == "time" && !IsTime(str)) return at + ": not a time";
      if (f == "date-time" && (str.size() < 11 || !IsDate(str.substr(0, 10)) || str[10] != 'T' ||
                               !IsTime(str.substr(11)))) {
        return at + ": not a date-time";
      }
      if (f == "uuid" && !IsUuid(str)) return at + ": not a uuid";
    }
    if (v.is_number()) {
      const double d = v.get<double>();
      if (s.contains("minimum") && d < s["minimum"].get<double>()) return at + ": below minimum";
      if (s.contains("maximum") && d > s["maximum"].get<double>()) return at + ": above maximum";
      if (s.contains("exclusiveMinimum") && d <= s["exclusiveMinimum"].get<double>()) {
        return at + ": not above exclusiveMinimum";
      }
      if (s.contains("exclusiveMaximum") && d >= s["exclusiveMaximum"].get<double>()) {
        return at + ": not below exclusiveMaximum";
      }
    }
    if (v.is_object()) {
      for (const OJson& r : s.value("required", OJson::array())) {
        if (!v.contains(r.get<std::string>())) return at + ": missing " + r.get<std::string>();
      }
      const OJson props = s.value("properties", OJson::object());
      for (const auto& [key, value] : v.items()) {
        if (props.contains(key)) {
          std::string e = Check(value, props[key], at + key + "/");
          if (!e.empty()) return e;
        } else if (s.contains("additionalProperties")) {
          std::string e = Check(value, s["additionalProperties"], at + key + "/");
          if (!e.empty()) return e;
        }
      }
    }
    if (v.is_array()) {
      const size_t n = v.size();
      if (s.contains("minItems") && n < s["minItems"].get<size_t>()) return at + ": too few items";
      if (s.contains("maxItems") && n > s["maxItems"].get<size_t>()) return at + ": too many items";
      const OJson prefix = s.value("prefixItems", OJson::array());
      for (size_t i = 0; i < n; ++i) {
        const std::string where = at + std::to_string(i) + "/";
        std::string e;
        if (i < prefix.size()) {
          e = Check(v[i], prefix[i], where);
        } else if (s.contains("items")) {
          e = Check(v[i], s["items"], where);
        }
        if (!e.empty()) return e;
      }
    }
    return "";
  }

  const OJson& root_;
};

}  // namespace mx::grammar
