// GrammarMatcher: an incremental recognizer for a Grammar over UTF-8 bytes.
// It answers "is what was consumed so far a prefix of a sentence of the
// grammar" one byte at a time, so that a token may end in the middle of a
// multi-byte character (the next token completes it).
//
// How: a pushdown recognizer with a *set* of stacks (every parse still
// alive, so ambiguous grammars work), as llama.cpp's grammar engine. Stacks
// are persistent linked lists whose nodes are interned, and each distinct
// set of stacks is interned as a state, so a position is one small integer
// and transitions are cached per (state, code point): walking a token
// vocabulary trie costs a table look-up per byte once the states are warm.
//
// Bounds (MatchLimits): a transition that would keep more than max_stacks
// parses alive, or needs more than max_expand_steps expansion steps, is
// refused (the character is treated as not allowed; overflowed() turns
// true), so ambiguous grammars cannot blow up exponentially. The caches are
// rebuilt from the live stacks when they grow past their soft limits, and
// past the hard cap new states are refused the same way.
//
// Thread-safety: none (one matcher per reply). The Grammar it reads is
// shared and immutable.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"

namespace mx::grammar {

struct MatchLimits {
  size_t max_stacks = 4096;           // parses alive at once
  size_t max_expand_steps = 1 << 16;  // work for one transition
  size_t soft_max_states = 1 << 14;   // caches rebuilt past this (at the next Accept)
  size_t soft_max_nodes = 1 << 20;
  size_t hard_max_states = 1 << 17;  // new states refused past this
  size_t hard_max_nodes = 1 << 22;
};

class GrammarMatcher {
 public:
  // A position: the state plus a UTF-8 sequence begun but not finished.
  struct Pos {
    int32_t state = 0;
    uint32_t cp = 0;   // bits of the code point read so far
    uint8_t need = 0;  // continuation bytes still expected
    uint8_t len = 0;   // length of the sequence being read
  };

  // At the start of the grammar's root rule. Fails (InvalidArgument) only
  // when the start itself exceeds the limits.
  static Result<std::unique_ptr<GrammarMatcher>> Create(std::shared_ptr<const Grammar> grammar,
                                                        const MatchLimits& limits = {});
  // A copy at the same position with fresh caches (cost: the live stacks).
  std::unique_ptr<GrammarMatcher> Clone() const;

  // Consumes `bytes` if all of them keep the input a valid prefix; otherwise
  // returns false and leaves the position unchanged.
  bool AcceptBytes(std::string_view bytes);
  // Whether AcceptBytes(bytes) would succeed (the position does not move).
  bool CanAccept(std::string_view bytes);
  // The grammar accepts exactly what was consumed (no partial character).
  bool IsAccepting() const;
  // Accepting, and no character may follow.
  bool CanOnlyEnd() const;
  // Some transition was refused by a MatchLimits bound.
  bool overflowed() const { return overflowed_; }

  Pos pos() const { return pos_; }
  // Changes each time the caches are rebuilt (state ids change with it).
  uint64_t generation() const { return generation_; }
  // Advances `p` (a position of this matcher in the current generation) by
  // one byte; false when the byte cannot come next (p is then unspecified).
  bool Step(Pos* p, uint8_t byte) {
    if (p->need == 0 && byte < 0x80) {
      const State& s = states_[p->state];
      if (s.table >= 0) {
        const int32_t next = tables_[s.table][byte];
        if (next >= 0) {
          p->state = next;
          return true;
        }
        if (next == kDead) return false;
      }
    }
    return StepSlow(p, byte);
  }
  bool IsAcceptingAt(const Pos& p) const { return p.need == 0 && states_[p.state].accepting; }

  size_t n_states() const { return states_.size(); }

 private:
  static constexpr int32_t kDead = -1;
  static constexpr int32_t kUnknown = -2;
  struct Node {
    uint32_t pos;     // element to continue at
    uint32_t parent;  // node below; 0 = the empty stack
  };
  struct State {
    uint32_t tops_begin = 0, tops_count = 0;  // in tops_: node ids, sorted
    int32_t table = -1;                       // in tables_, or -1
    uint32_t lookups = 0;
    bool accepting = false;  // the empty stack (node 0) is among the tops
    bool only_end = false;   // ... and it is the only one
  };

  GrammarMatcher(std::shared_ptr<const Grammar> grammar, const MatchLimits& limits);
  // Re-interns `stacks` (each listed top first) as the current state.
  bool Install(const std::vector<std::vector<uint32_t>>& stacks, Pos partial);
  std::vector<std::vector<uint32_t>> LiveStacks() const;
  void Reset();
  void MaybeRebuild();

  bool StepSlow(Pos* p, uint8_t byte);
  int32_t Next(int32_t state, uint32_t cp);  // cached; kDead when refused
  int32_t ComputeNext(int32_t state, uint32_t cp);
  bool PartialPossible(const Pos& p) const;
  void Push(uint32_t pos, uint32_t parent);
  bool Drain();  // expands work_ into out_
  int64_t InternNode(uint32_t pos, uint32_t parent);
  int32_t InternState();  // from out_ (sorted, unique)

  std::shared_ptr<const Grammar> grammar_;
  const Element* elements_ = nullptr;
  MatchLimits limits_;

  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_index_;
  std::vector<State> states_;
  std::vector<uint32_t> tops_;
  std::unordered_multimap<uint64_t, int32_t> state_index_;  // hash of tops -> state
  std::vector<std::array<int32_t, 128>> tables_;            // hot states' ASCII transitions
  std::unordered_map<uint64_t, int32_t> transitions_;       // (state << 21 | cp) -> next

  // Scratch for ComputeNext.
  std::vector<std::pair<uint32_t, uint32_t>> work_;
  std::unordered_set<uint64_t> visited_;
  std::vector<uint32_t> out_;
  size_t steps_ = 0;
  bool failed_ = false;

  Pos pos_;
  uint64_t generation_ = 0;
  bool overflowed_ = false;
};

}  // namespace mx::grammar
