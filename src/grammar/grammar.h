// Grammar: a GBNF grammar (llama.cpp's grammar syntax, docs/structured_output.md)
// parsed and compiled into flat rules over Unicode code points.
//
//   MX_ASSIGN_OR_RETURN(auto g, ParseGbnf("root ::= \"yes\" | \"no\""));
//   GrammarMatcher m(g);  // grammar/matcher.h
//
// Compiled form: every rule is a list of alternatives; an alternative is a
// run of elements (a character class or a reference to a rule) closed by
// kEnd. Repetitions ({m,n}, *, +, ?) and parenthesised groups are expanded
// into generated rules at parse time, the way llama.cpp does it, so that the
// matcher only knows sequences, alternatives and references.
//
// Thread-safety: a Grammar is immutable once built; share it freely
// (shared_ptr<const Grammar>) across threads and requests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace mx::grammar {

// Bounds on what one grammar may cost; every limit that is hit fails the
// parse with InvalidArgument naming the limit. The defaults take any
// realistic hand-written grammar and the grammars SchemaToGbnf writes.
struct GbnfLimits {
  size_t max_text_bytes = 1 << 20;    // grammar text
  size_t max_rules = 1 << 17;         // named rules plus generated ones (groups, repetitions)
  size_t max_elements = 1 << 21;      // total elements once repetitions are expanded
  int max_nesting = 64;               // depth of parenthesised groups
  uint32_t max_repetition = 1 << 16;  // m and n of {m,n}
};

// A set of code points: inclusive ranges, or their complement.
struct CharClass {
  bool negated = false;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  uint64_t ascii[2] = {0, 0};  // Matches(c) for c < 128, filled by Finish()

  bool Matches(uint32_t cp) const {
    if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
    return MatchesSlow(cp);
  }
  // Whether some code point in [lo, hi] matches.
  bool MatchesAnyIn(uint32_t lo, uint32_t hi) const;
  bool MatchesSlow(uint32_t cp) const;
  void Finish();  // fills ascii[]
};

enum class Op : uint8_t {
  kEnd,   // closes an alternative
  kChar,  // one code point of class `arg`
  kRef,   // rule `arg`
};

struct Element {
  Op op = Op::kEnd;
  uint32_t arg = 0;
};

struct Grammar {
  struct Rule {
    std::string name;            // as written; generated rules are "<parent>_<n>"
    std::vector<uint32_t> alts;  // index in `elements` of each alternative's first element
  };
  std::vector<CharClass> classes;
  std::vector<Element> elements;
  std::vector<Rule> rules;
  uint32_t root = 0;  // index of the rule named "root"

  // The rule named `name`, or -1.
  int32_t FindRule(std::string_view name) const;
};

// Parses GBNF text. Errors (InvalidArgument) read
// "grammar line L:C: <problem>" (1-based; the column counts bytes), for
// example "grammar line 3:9: undefined rule 'valu'", "grammar line 1:9:
// unterminated string literal", "grammar line 2:1: left recursion: rule
// 'expr' can begin with itself (expr -> term -> expr)", "grammar: no 'root'
// rule", "grammar line 1:20: repetition {0,100000} exceeds the limit of
// 65536 (GbnfLimits::max_repetition)".
Result<std::shared_ptr<const Grammar>> ParseGbnf(std::string_view text,
                                                 const GbnfLimits& limits = {});

// Appends `text` to `out` as a GBNF string literal ("..." with \" \\ \n \r
// \t and \xHH for other control characters; other bytes unchanged).
void AppendGbnfLiteral(std::string_view text, std::string* out);

}  // namespace mx::grammar
