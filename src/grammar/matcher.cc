// GrammarMatcher: stack sets, interning, cached transitions, UTF-8 steps.
#include "grammar/matcher.h"

#include <algorithm>

namespace mx::grammar {
namespace {

uint64_t HashTops(const uint32_t* v, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= v[i];
    h *= 1099511628211ull;
  }
  return h ^ (n * 0x9E3779B97F4A7C15ull);
}

constexpr uint32_t kMinForLen[5] = {0, 0, 0x80, 0x800, 0x10000};
// Lookups of a state's ASCII transitions before it gets a table of its own.
constexpr uint32_t kTableAfterLookups = 4;
constexpr size_t kMaxTables = 1 << 13;

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar, const MatchLimits& limits)
    : grammar_(std::move(grammar)), elements_(grammar_->elements.data()), limits_(limits) {}

Result<std::unique_ptr<GrammarMatcher>> GrammarMatcher::Create(
    std::shared_ptr<const Grammar> grammar, const MatchLimits& limits) {
  std::unique_ptr<GrammarMatcher> m(new GrammarMatcher(std::move(grammar), limits));
  m->Reset();
  m->failed_ = false;
  m->steps_ = 0;
  m->work_.clear();
  m->visited_.clear();
  m->out_.clear();
  for (uint32_t alt : m->grammar_->rules[m->grammar_->root].alts) m->Push(alt, 0);
  int32_t start = m->Drain() ? m->InternState() : kDead;
  if (start < 0) {
    return Status::InvalidArgument(
        "grammar: the start of rule 'root' exceeds the matcher's limits (more than " +
        std::to_string(limits.max_stacks) + " parses alive at once (MatchLimits::max_stacks) or " +
        std::to_string(limits.max_expand_steps) +
        " expansion steps (MatchLimits::max_expand_steps))");
  }
  m->pos_ = Pos{start, 0, 0, 0};
  return m;
}

std::unique_ptr<GrammarMatcher> GrammarMatcher::Clone() const {
  std::unique_ptr<GrammarMatcher> m(new GrammarMatcher(grammar_, limits_));
  m->Install(LiveStacks(), pos_);
  m->overflowed_ = overflowed_;
  return m;
}

void GrammarMatcher::Reset() {
  nodes_.clear();
  node_index_.clear();
  states_.clear();
  tops_.clear();
  state_index_.clear();
  tables_.clear();
  transitions_.clear();
  nodes_.push_back({0, 0});  // node 0: the empty stack
  ++generation_;
}

std::vector<std::vector<uint32_t>> GrammarMatcher::LiveStacks() const {
  std::vector<std::vector<uint32_t>> stacks;
  const State& s = states_[pos_.state];
  for (uint32_t i = 0; i < s.tops_count; ++i) {
    std::vector<uint32_t> chain;
    for (uint32_t n = tops_[s.tops_begin + i]; n != 0; n = nodes_[n].parent) {
      chain.push_back(nodes_[n].pos);
    }
    stacks.push_back(std::move(chain));
  }
  return stacks;
}

bool GrammarMatcher::Install(const std::vector<std::vector<uint32_t>>& stacks, Pos partial) {
  Reset();
  out_.clear();
  for (const auto& chain : stacks) {
    uint32_t parent = 0;
    for (size_t i = chain.size(); i-- > 0;) {
      int64_t id = InternNode(chain[i], parent);
      if (id < 0) return false;
      parent = static_cast<uint32_t>(id);
    }
    out_.push_back(parent);
  }
  std::sort(out_.begin(), out_.end());
  out_.erase(std::unique(out_.begin(), out_.end()), out_.end());
  pos_ = partial;
  pos_.state = InternState();
  return pos_.state >= 0;
}

void GrammarMatcher::MaybeRebuild() {
  if (states_.size() <= limits_.soft_max_states && nodes_.size() <= limits_.soft_max_nodes) return;
  Install(LiveStacks(), pos_);
}

bool GrammarMatcher::AcceptBytes(std::string_view bytes) {
  MaybeRebuild();
  Pos p = pos_;
  for (char c : bytes) {
    if (!Step(&p, static_cast<uint8_t>(c))) return false;
  }
  pos_ = p;
  return true;
}

bool GrammarMatcher::CanAccept(std::string_view bytes) {
  Pos p = pos_;
  for (char c : bytes) {
    if (!Step(&p, static_cast<uint8_t>(c))) return false;
  }
  return true;
}

bool GrammarMatcher::IsAccepting() const { return IsAcceptingAt(pos_); }

bool GrammarMatcher::CanOnlyEnd() const { return pos_.need == 0 && states_[pos_.state].only_end; }

bool GrammarMatcher::StepSlow(Pos* p, uint8_t b) {
  if (p->need == 0) {
    if (b < 0x80) {
      const int32_t next = Next(p->state, b);
      if (next < 0) return false;
      p->state = next;
      return true;
    }
    if (b >= 0xC2 && b <= 0xDF) {
      *p = Pos{p->state, static_cast<uint32_t>(b & 0x1F), 1, 2};
    } else if (b >= 0xE0 && b <= 0xEF) {
      *p = Pos{p->state, static_cast<uint32_t>(b & 0x0F), 2, 3};
    } else if (b >= 0xF0 && b <= 0xF4) {
      *p = Pos{p->state, static_cast<uint32_t>(b & 0x07), 3, 4};
    } else {
      return false;  // a continuation byte without a lead, or never valid in UTF-8
    }
    return PartialPossible(*p);
  }
  if ((b & 0xC0) != 0x80) return false;
  p->cp = (p->cp << 6) | (b & 0x3F);
  if (--p->need > 0) return PartialPossible(*p);
  const uint32_t cp = p->cp;
  if (cp < kMinForLen[p->len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  const int32_t next = Next(p->state, cp);
  if (next < 0) return false;
  *p = Pos{next, 0, 0, 0};
  return true;
}

bool GrammarMatcher::PartialPossible(const Pos& p) const {
  const unsigned shift = 6u * p.need;
  uint32_t lo = p.cp << shift;
  uint32_t hi = lo | ((1u << shift) - 1);
  lo = std::max(lo, kMinForLen[p.len]);
  hi = std::min<uint32_t>(hi, 0x10FFFF);
  if (lo > hi) return false;
  const State& s = states_[p.state];
  for (uint32_t i = 0; i < s.tops_count; ++i) {
    const uint32_t top = tops_[s.tops_begin + i];
    if (top == 0) continue;
    const Element& e = elements_[nodes_[top].pos];
    if (grammar_->classes[e.arg].MatchesAnyIn(lo, hi)) return true;
  }
  return false;
}

int32_t GrammarMatcher::Next(int32_t state, uint32_t cp) {
  if (cp < 128) {
    State& s = states_[state];
    if (s.table >= 0) {
      int32_t v = tables_[s.table][cp];
      if (v != kUnknown) return v;
    } else if (++s.lookups >= kTableAfterLookups && tables_.size() < kMaxTables) {
      s.table = static_cast<int32_t>(tables_.size());
      tables_.emplace_back();
      tables_.back().fill(kUnknown);
      // Move what the map already knows into the table.
      for (uint32_t c = 0; c < 128; ++c) {
        auto it = transitions_.find((static_cast<uint64_t>(state) << 21) | c);
        if (it != transitions_.end()) tables_.back()[c] = it->second;
      }
      int32_t v = tables_.back()[cp];
      if (v != kUnknown) return v;
    }
  }
  const uint64_t key = (static_cast<uint64_t>(state) << 21) | cp;
  if (cp >= 128 || states_[state].table < 0) {
    auto it = transitions_.find(key);
    if (it != transitions_.end()) return it->second;
  }
  const int32_t next = ComputeNext(state, cp);
  const State& s = states_[state];  // ComputeNext may have grown states_
  if (cp < 128 && s.table >= 0) {
    tables_[s.table][cp] = next;
  } else {
    transitions_.emplace(key, next);
  }
  return next;
}

void GrammarMatcher::Push(uint32_t pos, uint32_t parent) {
  if (visited_.insert((static_cast<uint64_t>(pos) << 32) | parent).second) {
    work_.push_back({pos, parent});
  }
}

int64_t GrammarMatcher::InternNode(uint32_t pos, uint32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(pos) << 32) | parent;
  auto it = node_index_.find(key);
  if (it != node_index_.end()) return it->second;
  if (nodes_.size() >= limits_.hard_max_nodes) return -1;
  const auto id = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back({pos, parent});
  node_index_.emplace(key, id);
  return id;
}

bool GrammarMatcher::Drain() {
  const Grammar& g = *grammar_;
  while (!work_.empty()) {
    const auto [pos, parent] = work_.back();
    work_.pop_back();
    if (++steps_ > limits_.max_expand_steps) return false;
    const Element& e = elements_[pos];
    if (e.op == Op::kEnd) {
      if (parent == 0) {
        out_.push_back(0);
      } else {
        const Node below = nodes_[parent];
        Push(below.pos, below.parent);
      }
    } else if (e.op == Op::kChar) {
      const int64_t id = InternNode(pos, parent);
      if (id < 0) return false;
      out_.push_back(static_cast<uint32_t>(id));
    } else {
      uint32_t ret = parent;
      if (elements_[pos + 1].op != Op::kEnd) {  // a reference in tail position pushes nothing
        const int64_t id = InternNode(pos + 1, parent);
        if (id < 0) return false;
        ret = static_cast<uint32_t>(id);
      }
      for (uint32_t alt : g.rules[e.arg].alts) Push(alt, ret);
    }
  }
  std::sort(out_.begin(), out_.end());
  out_.erase(std::unique(out_.begin(), out_.end()), out_.end());
  return out_.size() <= limits_.max_stacks;
}

int32_t GrammarMatcher::ComputeNext(int32_t state, uint32_t cp) {
  work_.clear();
  visited_.clear();
  out_.clear();
  steps_ = 0;
  const State s = states_[state];
  for (uint32_t i = 0; i < s.tops_count; ++i) {
    const uint32_t top = tops_[s.tops_begin + i];
    if (top == 0) continue;
    const Node n = nodes_[top];
    if (grammar_->classes[elements_[n.pos].arg].Matches(cp)) Push(n.pos + 1, n.parent);
  }
  if (!Drain()) {
    overflowed_ = true;
    return kDead;
  }
  if (out_.empty()) return kDead;
  const int32_t next = InternState();
  if (next < 0) overflowed_ = true;
  return next < 0 ? kDead : next;
}

int32_t GrammarMatcher::InternState() {
  const uint64_t h = HashTops(out_.data(), out_.size());
  auto range = state_index_.equal_range(h);
  for (auto it = range.first; it != range.second; ++it) {
    const State& s = states_[it->second];
    if (s.tops_count == out_.size() &&
        std::equal(out_.begin(), out_.end(), tops_.begin() + s.tops_begin)) {
      return it->second;
    }
  }
  if (states_.size() >= limits_.hard_max_states) return kDead;
  State s;
  s.tops_begin = static_cast<uint32_t>(tops_.size());
  s.tops_count = static_cast<uint32_t>(out_.size());
  s.accepting = !out_.empty() && out_[0] == 0;
  s.only_end = s.accepting && out_.size() == 1;
  tops_.insert(tops_.end(), out_.begin(), out_.end());
  const auto id = static_cast<int32_t>(states_.size());
  states_.push_back(s);
  state_index_.emplace(h, id);
  return id;
}

}  // namespace mx::grammar
