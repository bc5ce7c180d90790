// GrammarConstraint: the engine::TokenConstraint of a grammar (GBNF text, a
// JSON schema, response_format json_object): a token may come next when
// its bytes keep the reply a valid prefix of the grammar's language.
//
//   MX_ASSIGN_OR_RETURN(auto g, CompileJsonSchema(schema));       // json_schema.h
//   MX_ASSIGN_OR_RETURN(auto proto, GrammarConstraint::Create(g, vocab));
//   std::unique_ptr<engine::TokenConstraint> per_reply = proto->Clone();
//
// Rules per token kind (GrammarVocab): a text token is allowed when its
// bytes are (it may end in the middle of a UTF-8 character when some
// completion is allowed); an end-of-generation token when the grammar
// accepts the reply so far; control tokens never. Allows() and Mask() give
// the same answer for every token. MustEnd() is true when the grammar
// accepts and no character can follow. A grammar position where no token is
// allowed (the vocabulary cannot spell what the grammar needs next, or a
// MatchLimits bound refused every continuation) makes Mask() mask every
// token; the caller must then end the reply (overflowed() tells the second
// case apart).
//
// Lazy mode (CreateLazy, for tool calls in "auto" mode): everything is
// allowed, end of generation and control tokens included, until the bytes
// of the reply contain one of the trigger strings; the grammar then
// constrains what follows the trigger (the trigger itself is not grammar
// input). A token that completes a trigger: its bytes up to the trigger's
// end are free text, its bytes after the trigger are the grammar's first
// input, and the token is allowed only if the grammar accepts them (as a
// prefix). When several triggers occur, the one that ends first counts.
//
// Cost: Clone() shares the grammar and vocabulary and copies only the live
// parse stacks; Allows() walks the token's bytes through cached
// transitions; Mask() walks the vocabulary trie once per grammar position
// and keeps the last few answers, so repeated positions (inside a string)
// cost one pass over the logits. Figures: docs/structured_output.md.
//
// Thread-safety: none (engine::TokenConstraint); the shared parts are
// immutable.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/token_constraint.h"
#include "grammar/grammar.h"
#include "grammar/grammar_vocab.h"
#include "grammar/matcher.h"

namespace mx::grammar {

class GrammarConstraint final : public engine::TokenConstraint {
 public:
  // Constrains the whole reply. Errors: InvalidArgument when the grammar's
  // start exceeds `limits` (GrammarMatcher::Create).
  static Result<std::unique_ptr<GrammarConstraint>> Create(
      std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> vocab,
      const MatchLimits& limits = {});
  // Lazy mode (see above). Errors: InvalidArgument for no trigger or an
  // empty one.
  static Result<std::unique_ptr<GrammarConstraint>> CreateLazy(
      std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> vocab,
      std::vector<std::string> triggers, const MatchLimits& limits = {});

  std::unique_ptr<engine::TokenConstraint> Clone() const override;
  bool Allows(int32_t token) override;
  void Mask(std::span<float> logits) override;
  void Accept(int32_t token) override;
  bool MustEnd() const override;

  // The grammar accepts the reply so far (lazy mode: also before the trigger).
  bool IsAccepting() const;
  // Lazy mode: a trigger has appeared (always true otherwise).
  bool triggered() const { return triggered_; }
  // A MatchLimits bound refused a transition at some point.
  bool overflowed() const { return matcher_->overflowed(); }
  // Drops the remembered Mask() answers (the next Mask walks the trie);
  // for benchmarks and tests.
  void ForgetMasks() { masks_.clear(); }

 private:
  GrammarConstraint() = default;
  // Fills `bits` (one per token) with what may come next under the grammar.
  void ComputeAllowed(std::vector<uint64_t>* bits);
  // Lazy mode, not triggered: the offset in `piece` just past the first
  // trigger that the piece completes, or npos.
  size_t TriggerEnd(const std::string& piece) const;
  bool AllowsTriggered(int32_t token);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const GrammarVocab> vocab_;
  std::unique_ptr<GrammarMatcher> matcher_;

  // Lazy mode.
  std::shared_ptr<const std::vector<std::string>> triggers_;
  bool triggered_ = true;
  std::string tail_;  // the last (longest trigger - 1) bytes of the reply
  size_t max_trigger_ = 0;
  bool trigger_end_byte_[256] = {};  // last bytes of the triggers

  // Mask() answers for the last few positions.
  struct CachedMask {
    uint64_t generation = 0;
    GrammarMatcher::Pos pos;
    std::vector<uint64_t> bits;
    uint64_t last_used = 0;
  };
  std::vector<CachedMask> masks_;
  uint64_t mask_clock_ = 0;
  std::vector<GrammarMatcher::Pos> frames_;  // scratch for the trie walk
};

}  // namespace mx::grammar
