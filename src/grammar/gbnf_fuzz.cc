// libFuzzer entry point for the GBNF parser and matcher (tests/fuzz/README.md).
// The input's first byte splits it: the rest up to that offset is grammar
// text, what follows is fed to the matcher of an accepted grammar in
// pieces of 1-3 bytes (so UTF-8 splits and refusals are exercised), under
// small limits so that every limit is reachable. Aborts when an error does
// not name the grammar, or a matcher answer is inconsistent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t split = 1 + static_cast<size_t>(data[0]) * (size - 1) / 255;
  std::string_view all(reinterpret_cast<const char*>(data), size);
  std::string_view text = all.substr(1, split - 1);
  std::string_view input = all.substr(split);
  mx::grammar::GbnfLimits limits;
  limits.max_rules = 2000;
  limits.max_elements = 20000;
  limits.max_repetition = 300;
  limits.max_nesting = 16;
  auto g = mx::grammar::ParseGbnf(text, limits);
  if (!g.ok()) {
    if (g.status().message().rfind("grammar", 0) != 0) std::abort();
    return 0;
  }
  mx::grammar::MatchLimits ml;
  ml.max_stacks = 64;
  ml.max_expand_steps = 4096;
  ml.soft_max_states = 64;
  ml.hard_max_states = 4096;
  auto m = mx::grammar::GrammarMatcher::Create(*g, ml);
  if (!m.ok()) return 0;
  size_t at = 0;
  while (at < input.size()) {
    const size_t n = 1 + at % 3;
    std::string_view piece = input.substr(at, n);
    const bool can = (*m)->CanAccept(piece);
    const bool did = (*m)->AcceptBytes(piece);
    if (can != did) std::abort();
    if ((*m)->CanOnlyEnd() && !(*m)->IsAccepting()) std::abort();
    at += n;
    if (!did) break;
  }
  auto clone = (*m)->Clone();
  if (clone->IsAccepting() != (*m)->IsAccepting()) std::abort();
  return 0;
}
