// Grammar construction shared by the parser: rules, classes, repetition
// expansion, the whole-grammar checks (undefined rules, root, left
// recursion) and flattening into Grammar.
#include <algorithm>

#include "grammar/grammar_build.h"

namespace mx::grammar {

bool CharClass::MatchesSlow(uint32_t cp) const {
  bool in = false;
  for (const auto& [lo, hi] : ranges) {
    if (cp >= lo && cp <= hi) {
      in = true;
      break;
    }
  }
  return in != negated;
}

bool CharClass::MatchesAnyIn(uint32_t lo, uint32_t hi) const {
  if (lo > hi) return false;
  if (!negated) {
    for (const auto& [a, b] : ranges) {
      if (a <= hi && b >= lo) return true;
    }
    return false;
  }
  // Negated: some point of [lo, hi] is outside every range. Walk the points
  // not yet covered from lo upwards (ranges are few).
  uint32_t at = lo;
  bool moved = true;
  while (moved) {
    moved = false;
    for (const auto& [a, b] : ranges) {
      if (a <= at && b >= at) {
        if (b >= hi) return false;
        at = b + 1;
        moved = true;
      }
    }
  }
  return true;
}

void CharClass::Finish() {
  ascii[0] = ascii[1] = 0;
  for (uint32_t c = 0; c < 128; ++c) {
    if (MatchesSlow(c)) ascii[c >> 6] |= uint64_t{1} << (c & 63);
  }
}

int32_t Grammar::FindRule(std::string_view name) const {
  for (size_t i = 0; i < rules.size(); ++i) {
    if (rules[i].name == name) return static_cast<int32_t>(i);
  }
  return -1;
}

std::string LineCol(std::string_view text, size_t pos) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

bool DecodeUtf8(std::string_view s, uint32_t* cp, size_t* len) {
  if (s.empty()) return false;
  const auto b0 = static_cast<unsigned char>(s[0]);
  size_t n = 0;
  uint32_t v = 0, min = 0;
  if (b0 < 0x80) {
    *cp = b0;
    *len = 1;
    return true;
  } else if ((b0 & 0xE0) == 0xC0) {
    n = 2, v = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, v = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, v = b0 & 0x07, min = 0x10000;
  } else {
    return false;
  }
  if (s.size() < n) return false;
  for (size_t i = 1; i < n; ++i) {
    const auto b = static_cast<unsigned char>(s[i]);
    if ((b & 0xC0) != 0x80) return false;
    v = (v << 6) | (b & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return false;
  *cp = v;
  *len = n;
  return true;
}

Result<uint32_t> RawGrammar::RuleId(const std::string& name, size_t pos, const GbnfLimits& limits) {
  auto it = by_name_.find(name);
  if (it != by_name_.end()) return it->second;
  if (rules.size() >= limits.max_rules) {
    return Status::InvalidArgument("grammar: more than " + std::to_string(limits.max_rules) +
                                   " rules (GbnfLimits::max_rules)");
  }
  const auto id = static_cast<uint32_t>(rules.size());
  rules.push_back({name, {}, false, pos});
  by_name_.emplace(name, id);
  return id;
}

Result<uint32_t> RawGrammar::NewRule(const std::string& parent, size_t pos,
                                     const GbnfLimits& limits) {
  if (rules.size() >= limits.max_rules) {
    return Status::InvalidArgument("grammar: more than " + std::to_string(limits.max_rules) +
                                   " rules once groups and repetitions are expanded "
                                   "(GbnfLimits::max_rules)");
  }
  const uint32_t n = ++generated_count_[parent];
  const auto id = static_cast<uint32_t>(rules.size());
  // '_' cannot appear in a written rule name, so generated names never clash.
  rules.push_back({parent + "_" + std::to_string(n), {}, true, pos});
  return id;
}

uint32_t RawGrammar::AddClass(CharClass cls) {
  cls.Finish();
  classes.push_back(std::move(cls));
  return static_cast<uint32_t>(classes.size() - 1);
}

uint32_t RawGrammar::CharLiteral(uint32_t cp) {
  auto it = literal_class_.find(cp);
  if (it != literal_class_.end()) return it->second;
  CharClass cls;
  cls.ranges.push_back({cp, cp});
  const uint32_t id = AddClass(std::move(cls));
  literal_class_.emplace(cp, id);
  return id;
}

Status RawGrammar::AddElements(size_t n, const GbnfLimits& limits, size_t pos) {
  n_elements_ += n;
  if (n_elements_ > limits.max_elements) {
    return Status::InvalidArgument("grammar: more than " + std::to_string(limits.max_elements) +
                                   " elements once repetitions are expanded "
                                   "(GbnfLimits::max_elements)");
  }
  return Status::Ok();
}

Status RawGrammar::Repeat(const std::string& rule_name, Seq* seq, size_t from, uint32_t lo,
                          uint32_t hi, size_t pos, const GbnfLimits& limits) {
  Seq item(seq->begin() + static_cast<ptrdiff_t>(from), seq->end());
  seq->resize(from);
  if (item.empty()) return Status::Ok();  // ""* and the like: nothing to repeat
  if (item.size() > 1 && !(lo == 1 && hi == 1)) {
    // A multi-character literal: repeat one reference to it, not its copies.
    MX_ASSIGN_OR_RETURN(uint32_t id, NewRule(rule_name, pos, limits));
    MX_RETURN_IF_ERROR(AddElements(item.size() + 1, limits, pos));
    rules[id].alts.push_back(std::move(item));
    item = {{Op::kRef, id}};
  }
  MX_RETURN_IF_ERROR(AddElements(static_cast<size_t>(lo) * item.size(), limits, pos));
  for (uint32_t i = 0; i < lo; ++i) seq->insert(seq->end(), item.begin(), item.end());
  if (hi == kUnbounded) {
    // star ::= item star |
    MX_ASSIGN_OR_RETURN(uint32_t id, NewRule(rule_name, pos, limits));
    MX_RETURN_IF_ERROR(AddElements(item.size() + 3, limits, pos));
    Seq loop = item;
    loop.push_back({Op::kRef, id});
    rules[id].alts.push_back(std::move(loop));
    rules[id].alts.push_back({});
    seq->push_back({Op::kRef, id});
  } else if (hi > lo) {
    // opt_k ::= item opt_(k-1) | ; opt_1 ::= item |   (no ambiguity, no stack growth)
    int64_t prev = -1;
    for (uint32_t k = 0; k < hi - lo; ++k) {
      MX_ASSIGN_OR_RETURN(uint32_t id, NewRule(rule_name, pos, limits));
      MX_RETURN_IF_ERROR(AddElements(item.size() + 3, limits, pos));
      Seq one = item;
      if (prev >= 0) one.push_back({Op::kRef, static_cast<uint32_t>(prev)});
      rules[id].alts.push_back(std::move(one));
      rules[id].alts.push_back({});
      prev = id;
    }
    seq->push_back({Op::kRef, static_cast<uint32_t>(prev)});
  }
  return Status::Ok();
}

Result<std::shared_ptr<const Grammar>> RawGrammar::Finish(std::string_view text) {
  for (const RawRule& r : rules) {
    if (!r.defined) {
      return Status::InvalidArgument("grammar line " + LineCol(text, r.def_pos) +
                                     ": undefined rule '" + r.name + "'");
    }
  }
  auto root_it = by_name_.find("root");
  if (root_it == by_name_.end()) {
    return Status::InvalidArgument(
        "grammar: no 'root' rule (the grammar starts at 'root ::= ...')");
  }
  const size_t n = rules.size();

  // Nullable rules (fixed point), then the "may begin with" graph: rule r
  // may begin with rule s when s is referenced after only nullable items.
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (nullable[r]) continue;
      for (const Seq& alt : rules[r].alts) {
        bool all = std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
          return e.op == Op::kRef && nullable[e.arg];
        });
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<uint32_t>> begins(n);
  for (size_t r = 0; r < n; ++r) {
    for (const Seq& alt : rules[r].alts) {
      for (const Element& e : alt) {
        if (e.op != Op::kRef) break;
        begins[r].push_back(e.arg);
        if (!nullable[e.arg]) break;
      }
    }
  }
  // Iterative DFS (grammars may have 100k generated rules): 0 new, 1 on the
  // path, 2 done.
  std::vector<char> color(n, 0);
  std::vector<std::pair<uint32_t, size_t>> path;
  for (size_t start = 0; start < n; ++start) {
    if (color[start]) continue;
    path.push_back({static_cast<uint32_t>(start), 0});
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == begins[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t s = begins[r][next++];
      if (color[s] == 1) {
        std::string chain;
        bool on = false;
        for (const auto& [p, unused] : path) {
          if (p == s) on = true;
          if (on) chain += rules[p].name + " -> ";
        }
        chain += rules[s].name;
        return Status::InvalidArgument("grammar line " + LineCol(text, rules[s].def_pos) +
                                       ": left recursion: rule '" + rules[s].name +
                                       "' can begin with itself (" + chain + ")");
      }
      if (color[s] == 0) {
        color[s] = 1;
        path.push_back({s, 0});
      }
    }
  }

  // Productive rules (fixed point): those that can finish, deriving some
  // text (an empty class never matches). A root that cannot would let
  // nothing through: refused here instead of ending every reply at once.
  std::vector<char> productive(n, 0);
  std::vector<char> class_empty(classes.size(), 0);
  for (size_t c = 0; c < classes.size(); ++c) class_empty[c] = !classes[c].MatchesAnyIn(0, 0x10FFFF);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (productive[r]) continue;
      for (const Seq& alt : rules[r].alts) {
        const bool all = std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
          return e.op == Op::kRef ? productive[e.arg] != 0 : !class_empty[e.arg];
        });
        if (all) {
          productive[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  if (!productive[root_it->second]) {
    return Status::InvalidArgument("grammar line " + LineCol(text, rules[root_it->second].def_pos) +
                                   ": the grammar allows no text: rule 'root' can never be completed (every "
                                   "alternative needs a character no class matches, or a rule that never ends)");
  }
  auto g = std::make_shared<Grammar>();
  g->classes = std::move(classes);
  g->root = root_it->second;
  g->rules.resize(n);
  for (size_t r = 0; r < n; ++r) {
    g->rules[r].name = rules[r].name;
    for (const Seq& alt : rules[r].alts) {
      g->rules[r].alts.push_back(static_cast<uint32_t>(g->elements.size()));
      g->elements.insert(g->elements.end(), alt.begin(), alt.end());
      g->elements.push_back({Op::kEnd, 0});
    }
  }
  return std::shared_ptr<const Grammar>(std::move(g));
}

}  // namespace mx::grammar
