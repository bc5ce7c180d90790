// Internal to mx_grammar: the grammar under construction, shared by the GBNF
// parser (gbnf_parser.cc) and the whole-grammar checks and flattening
// (grammar.cc). Not a public header.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"

namespace mx::grammar {

inline constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();

using Seq = std::vector<Element>;  // one alternative, without its kEnd

struct RawRule {
  std::string name;
  std::vector<Seq> alts;
  bool defined = false;  // false: only referenced so far
  size_t def_pos = 0;    // byte offset of the definition (or first reference)
};

// "L:C" (1-based) of byte offset `pos` in `text`.
std::string LineCol(std::string_view text, size_t pos);

// Decodes one UTF-8 sequence at the start of `s` (no overlongs, surrogates
// or values past U+10FFFF). False when `s` does not start with one.
bool DecodeUtf8(std::string_view s, uint32_t* cp, size_t* len);

class RawGrammar {
 public:
  std::vector<RawRule> rules;
  std::vector<CharClass> classes;

  // The rule named `name`, created (undefined) on first use.
  Result<uint32_t> RuleId(const std::string& name, size_t pos, const GbnfLimits& limits);
  // A new generated rule "<parent>_<n>".
  Result<uint32_t> NewRule(const std::string& parent, size_t pos, const GbnfLimits& limits);
  uint32_t AddClass(CharClass cls);
  uint32_t CharLiteral(uint32_t cp);  // a one-code-point class, shared
  // Counts `n` more elements against GbnfLimits::max_elements.
  Status AddElements(size_t n, const GbnfLimits& limits, size_t pos);

  // Replaces (*seq)[from..] (the last item) by `lo` to `hi` repetitions
  // (hi = kUnbounded: no upper bound), as llama.cpp expands them: lo copies,
  // then a right-recursive star rule or a chain of nested optional rules.
  Status Repeat(const std::string& rule_name, Seq* seq, size_t from, uint32_t lo, uint32_t hi,
                size_t pos, const GbnfLimits& limits);

  // Checks that every referenced rule is defined, that "root" exists and
  // that no rule is left-recursive, then flattens.
  Result<std::shared_ptr<const Grammar>> Finish(std::string_view text);

 private:
  std::string text_error_prefix_;
  std::unordered_map<std::string, uint32_t> by_name_;
  std::unordered_map<uint32_t, uint32_t> literal_class_;
  std::map<std::string, uint32_t> generated_count_;
  size_t n_elements_ = 0;
};

}  // namespace mx::grammar
