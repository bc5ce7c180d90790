// Internal to mx_grammar: the building blocks of the JSON Schema converter
// (json_schema.cc): primitive rules, integer and number ranges, "any string
// but these". Not a public header.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mx::grammar::schema_internal {

// The body of primitive rule `name` ("space", "string", "value", "date", ...)
// with '%' standing for "<prefix>-", and the primitives it refers to;
// nullptr when there is no such primitive.
struct Primitive {
  const char* name;
  const char* body;
  std::vector<const char*> deps;
};
const Primitive* FindPrimitive(std::string_view name);

// Bounds on a number; exclusive = the bound itself is outside.
struct Bound {
  int64_t value = 0;
  bool exclusive = false;
};

// A GBNF expression for the integers in [lo, hi] (either side open when
// absent), in JSON's form (no leading zeros, '-' for negatives), at most
// max(16, digits of the bound) digits when a side is open.
// REQUIRES: the range is not empty.
std::string IntegerRange(std::optional<Bound> lo, std::optional<Bound> hi);

// A GBNF expression for JSON numbers (no exponent) in the range; fractions of
// up to 16 digits (31 when the fraction must be non-zero).
// REQUIRES: the range is not empty.
std::string NumberRange(std::optional<Bound> lo, std::optional<Bound> hi);

using Rules = std::vector<std::pair<std::string, std::string>>;
using FreshName = std::function<std::string()>;  // a rule name not used yet

// Rules (name, body) for a JSON string, quotes included, that is none of
// `excluded` (each as written between the quotes); the first rule is `name`,
// the others are named by `fresh`. `p` is "<prefix>-" for the primitives
// used (char).
void NotStringsRules(const std::vector<std::string>& excluded, const std::string& name,
                     const std::string& p, const FreshName& fresh, Rules* out);

// An expression matching exactly one of `literals` (UTF-8 texts), factored
// as a trie (shared prefixes are written once), so that a long enum keeps
// one parse alive instead of one per value. Helper rules go to *out.
// REQUIRES: literals not empty.
std::string LiteralTrie(const std::vector<std::string>& literals, const FreshName& fresh,
                        Rules* out);

}  // namespace mx::grammar::schema_internal
