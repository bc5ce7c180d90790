// Test helpers for mx_grammar: parse or fail the test, and whole-string /
// prefix checks through a fresh GrammarMatcher.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/matcher.h"

namespace mx::grammar {

inline std::shared_ptr<const Grammar> MustParse(std::string_view text) {
  auto g = ParseGbnf(text);
  EXPECT_TRUE(g.ok()) << g.status().ToString() << "\n" << text;
  return g.ok() ? *g : nullptr;
}

// The grammar accepts exactly `s`.
inline bool Accepts(const std::shared_ptr<const Grammar>& g, std::string_view s) {
  if (g == nullptr) return false;
  auto m = GrammarMatcher::Create(g);
  if (!m.ok()) return false;
  return (*m)->AcceptBytes(s) && (*m)->IsAccepting();
}

// `s` is a prefix of some sentence of the grammar.
inline bool IsPrefix(const std::shared_ptr<const Grammar>& g, std::string_view s) {
  if (g == nullptr) return false;
  auto m = GrammarMatcher::Create(g);
  if (!m.ok()) return false;
  return (*m)->AcceptBytes(s);
}

// The error message of parsing `text` ("" when it parses).
inline std::string ParseError(std::string_view text, const GbnfLimits& limits = {}) {
  auto g = ParseGbnf(text, limits);
  return g.ok() ? "" : g.status().message();
}

}  // namespace mx::grammar
