// Building blocks of the JSON Schema converter: primitive rules, integer and
// number ranges, and "a string that is none of these".
#include <algorithm>
#include <cstdio>
#include <map>

#include "grammar/grammar.h"
#include "grammar/grammar_build.h"
#include "grammar/json_schema_internal.h"

namespace mx::grammar::schema_internal {
namespace {

// '%' stands for "<prefix>-".
const std::vector<Primitive>& Primitives() {
  static const std::vector<Primitive> kPrimitives = {
      {"space", R"(| " " | "\n" [ \t]{0,20})", {}},
      {"char", R"([^"\\\x7F\x00-\x1F] | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))", {}},
      {"string", R"("\"" %char* "\"")", {"char"}},
      {"integral-part", R"([0] | [1-9] [0-9]{0,15})", {}},
      {"decimal-part", R"([0-9]{1,16})", {}},
      // Exponents of at most two digits: every number parses as a finite double.
      {"number",
       R"("-"? %integral-part ("." %decimal-part)? ([eE] [-+]? [0-9]{1,2})?)",
       {"integral-part", "decimal-part"}},
      {"integer", R"("-"? %integral-part)", {"integral-part"}},
      {"boolean", R"("true" | "false")", {}},
      {"null", R"("null")", {}},
      {"value",
       R"(%object | %array | %string | %number | %boolean | %null)",
       {"object", "array", "string", "number", "boolean", "null"}},
      {"object",
       R"("{" %space ( %string %space ":" %space %value %space ( "," %space %string %space ":" %space %value %space )* )? "}")",
       {"space", "string", "value"}},
      {"array",
       R"("[" %space ( %value %space ( "," %space %value %space )* )? "]")",
       {"space", "value"}},
      {"uuid",
       R"("\"" [0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12} "\"")",
       {}},
      {"date",
       R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))",
       {}},
      {"time",
       R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))",
       {}},
      {"date-string", R"("\"" %date "\"")", {"date"}},
      {"time-string", R"("\"" %time "\"")", {"time"}},
      {"date-time-string", R"("\"" %date "T" %time "\"")", {"date", "time"}},
  };
  return kPrimitives;
}

std::string Digits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return "[0-9]{" + std::to_string(n) + "}";
}

std::string DigitClass(char a, char b) {
  if (a == b) return std::string("\"") + a + "\"";
  return std::string("[") + a + "-" + b + "]";
}

bool All(std::string_view s, char c) {
  return std::all_of(s.begin(), s.end(), [c](char x) { return x == c; });
}

std::string Join(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? " | " : "") + alts[i];
  return out + ")";
}

// Decimal strings of the same length, x <= y.
std::string SameLength(const std::string& x, const std::string& y) {
  if (x.empty()) return "";
  if (x == y) return "\"" + x + "\"";
  const std::string xr = x.substr(1), yr = y.substr(1);
  if (x[0] == y[0]) {
    std::string rest = SameLength(xr, yr);
    return std::string("\"") + x[0] + "\"" + (rest.empty() ? "" : " " + rest);
  }
  if (All(xr, '0') && All(yr, '9')) {
    std::string d = Digits(xr.size());
    return DigitClass(x[0], y[0]) + (d.empty() ? "" : " " + d);
  }
  std::vector<std::string> alts;
  char mid_lo = x[0], mid_hi = y[0];
  if (!All(xr, '0')) {
    alts.push_back(std::string("\"") + x[0] + "\" " + SameLength(xr, std::string(xr.size(), '9')));
    ++mid_lo;
  }
  std::string high;
  if (!All(yr, '9')) {
    high = std::string("\"") + y[0] + "\" " + SameLength(std::string(yr.size(), '0'), yr);
    --mid_hi;
  }
  if (mid_lo <= mid_hi) {
    std::string d = Digits(xr.size());
    alts.push_back(DigitClass(mid_lo, mid_hi) + (d.empty() ? "" : " " + d));
  }
  if (!high.empty()) alts.push_back(high);
  return Join(alts);
}

// Non-negative integers in [a, b] (b absent: unbounded, up to 16 digits or
// a's length).
std::string NonNegative(uint64_t a, std::optional<uint64_t> b) {
  const std::string as = std::to_string(a);
  const size_t la = as.size();
  const size_t lb = b ? std::to_string(*b).size() : la;
  std::vector<std::string> alts;
  for (size_t len = la; len <= lb; ++len) {
    std::string lo = len == la ? as : "1" + std::string(len - 1, '0');
    std::string hi = (b && len == lb) ? std::to_string(*b) : std::string(len, '9');
    alts.push_back(SameLength(lo, hi));
  }
  if (!b && la < 16) alts.push_back("[1-9] [0-9]{" + std::to_string(la) + ",15}");
  return Join(alts);
}

uint64_t Magnitude(int64_t v) { return v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : v; }

// Non-negative decimals m (integer part and an optional fraction) with
// p <= m (p < m when pe) and m <= q (m < q when qe); "" when none.
std::string MagnitudeRange(uint64_t p, bool pe, std::optional<uint64_t> q, bool qe) {
  const std::string frac = R"(("." [0-9]{1,16})?)";
  const std::string zero_frac = R"(("." [0]{1,16})?)";
  const std::string nonzero_frac = R"("." [0]{0,15} [1-9] [0-9]{0,14})";
  std::vector<std::string> alts;
  const uint64_t a = pe ? p + 1 : p;
  if (!q) {
    alts.push_back(NonNegative(a, std::nullopt) + " " + frac);
  } else if (*q >= 1 && a <= *q - 1) {
    alts.push_back(NonNegative(a, *q - 1) + " " + frac);
  }
  if (pe && (!q || p < *q)) alts.push_back("\"" + std::to_string(p) + "\" " + nonzero_frac);
  if (q && !qe && (*q > p || (*q == p && !pe))) {
    alts.push_back("\"" + std::to_string(*q) + "\" " + zero_frac);
  }
  if (alts.empty()) return "";
  return Join(alts);
}

}  // namespace

const Primitive* FindPrimitive(std::string_view name) {
  for (const Primitive& p : Primitives()) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

std::string IntegerRange(std::optional<Bound> lo, std::optional<Bound> hi) {
  // Inclusive bounds (the caller checked that the range is not empty, so
  // the adjustments do not overflow).
  std::optional<int64_t> l, h;
  if (lo) l = lo->exclusive ? lo->value + 1 : lo->value;
  if (hi) h = hi->exclusive ? hi->value - 1 : hi->value;
  std::vector<std::string> alts;
  if (!l || *l < 0) {
    // Negative values: magnitudes in [max(1, -h), -l].
    const uint64_t mag_lo = (h && *h < 0) ? Magnitude(*h) : 1;
    std::optional<uint64_t> mag_hi;
    if (l) mag_hi = Magnitude(*l);
    alts.push_back("\"-\" " + NonNegative(mag_lo, mag_hi));
  }
  if (!h || *h >= 0) {
    const uint64_t a = (l && *l > 0) ? static_cast<uint64_t>(*l) : 0;
    std::optional<uint64_t> b;
    if (h) b = static_cast<uint64_t>(*h);
    alts.push_back(NonNegative(a, b));
  }
  return Join(alts);
}

std::string NumberRange(std::optional<Bound> lo, std::optional<Bound> hi) {
  std::vector<std::string> alts;
  if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) {
    uint64_t p = 0;
    bool pe = false;
    if (lo && lo->value >= 0) {
      p = static_cast<uint64_t>(lo->value);
      pe = lo->exclusive;
    }
    std::optional<uint64_t> q;
    if (hi) q = static_cast<uint64_t>(hi->value);
    std::string m = MagnitudeRange(p, pe, q, hi && hi->exclusive);
    if (!m.empty()) alts.push_back(m);
  }
  if (!lo || lo->value < 0) {
    // v = -m with m > 0.
    uint64_t p = 0;
    bool pe = true;
    if (hi && hi->value < 0) {
      p = Magnitude(hi->value);
      pe = hi->exclusive;
    }
    std::optional<uint64_t> q;
    if (lo) q = Magnitude(lo->value);
    std::string m = MagnitudeRange(p, pe, q, lo && lo->exclusive);
    if (!m.empty()) alts.push_back("\"-\" " + m);
  }
  if (alts.empty()) return R"("0" "." "1" "x")";  // unreachable when the range is not empty
  return Join(alts);
}

void NotStringsRules(const std::vector<std::string>& excluded, const std::string& name,
                     const std::string& p, const FreshName& fresh, Rules* out) {
  struct Node {
    std::map<uint32_t, std::pair<std::string, size_t>> children;  // cp -> (bytes, node)
    bool terminal = false;
  };
  std::vector<Node> nodes(1);
  for (const std::string& s : excluded) {
    size_t at = 0, node = 0;
    while (at < s.size()) {
      uint32_t cp = 0;
      size_t len = 0;
      if (!DecodeUtf8(std::string_view(s).substr(at), &cp, &len)) break;  // keys are UTF-8
      auto it = nodes[node].children.find(cp);
      if (it == nodes[node].children.end()) {
        nodes.emplace_back();
        it = nodes[node]
                 .children.emplace(cp, std::make_pair(s.substr(at, len), nodes.size() - 1))
                 .first;
      }
      node = it->second.second;
      at += len;
    }
    nodes[node].terminal = true;
  }
  std::vector<std::string> names(nodes.size());
  for (std::string& n : names) n = fresh();
  auto rule_name = [&](size_t i) { return names[i]; };
  out->push_back({name, "\"\\\"\" " + rule_name(0)});
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::vector<std::string> alts;
    if (!nodes[i].terminal) alts.push_back("\"\\\"\"");
    std::string other = R"([^"\\\x7F\x00-\x1F)";
    bool backslash_child = false;
    for (const auto& [cp, child] : nodes[i].children) {
      std::string lit;
      AppendGbnfLiteral(child.first, &lit);
      alts.push_back(lit + " " + rule_name(child.second));
      char buf[16];
      std::snprintf(buf, sizeof(buf), "\\U%08X", cp);
      other += buf;
      if (cp == '\\') backslash_child = true;
    }
    other += "]";
    if (!backslash_child) other = "(" + other + R"( | [\\] (["\\/bfnrt] | "u" [0-9a-fA-F]{4})))";
    alts.push_back(other + " " + p + "char* \"\\\"\"");
    std::string body;
    for (size_t k = 0; k < alts.size(); ++k) body += (k ? " | " : "") + alts[k];
    out->push_back({rule_name(i), body});
  }
}

std::string LiteralTrie(const std::vector<std::string>& literals, const FreshName& fresh,
                        Rules* out) {
  struct Node {
    std::map<std::string, size_t> children;  // one character (its bytes) -> node
    bool terminal = false;
  };
  std::vector<Node> nodes(1);
  for (const std::string& s : literals) {
    size_t at = 0, node = 0;
    while (at < s.size()) {
      uint32_t cp = 0;
      size_t len = 0;
      if (!DecodeUtf8(std::string_view(s).substr(at), &cp, &len)) len = 1;
      const std::string ch = s.substr(at, len);
      auto it = nodes[node].children.find(ch);
      if (it == nodes[node].children.end()) {
        nodes.emplace_back();
        it = nodes[node].children.emplace(ch, nodes.size() - 1).first;
      }
      node = it->second;
      at += len;
    }
    nodes[node].terminal = true;
  }
  // The alternatives below a node; branching nodes further down become
  // rules, processed from a queue (no recursion: literals may be long).
  std::vector<std::pair<size_t, std::string>> queue;  // node, rule name
  auto expr = [&](size_t n) {
    std::vector<std::string> alts;
    if (nodes[n].terminal) alts.push_back("\"\"");
    for (const auto& [ch, first] : nodes[n].children) {
      std::string text = ch;
      size_t at = first;
      while (!nodes[at].terminal && nodes[at].children.size() == 1) {
        text += nodes[at].children.begin()->first;
        at = nodes[at].children.begin()->second;
      }
      std::string lit;
      AppendGbnfLiteral(text, &lit);
      if (!nodes[at].children.empty()) {
        queue.push_back({at, fresh()});
        lit += " " + queue.back().second;
      }
      alts.push_back(lit);
    }
    std::string body;
    for (size_t k = 0; k < alts.size(); ++k) body += (k ? " | " : "") + alts[k];
    return body;
  };
  const std::string top = "(" + expr(0) + ")";
  for (size_t q = 0; q < queue.size(); ++q) {
    const auto [node, name] = queue[q];
    out->push_back({name, expr(node)});
  }
  return top;
}

}  // namespace mx::grammar::schema_internal
