// TokenConstraint: what a reply may say next, for constrained decoding
// (structured output, GBNF grammars, forced tool calls). The sampler asks it
// whether the token it drew may come next and, only when it may not, masks
// the logits of every token that may not and draws again (rejection first,
// mask on a miss: the distribution is the masked one and the common case
// costs one check per token).
//
// One instance follows one reply; the request carries an immutable prototype
// that the scheduler clones for each reply (n > 1 choices each get one).
// Implementations: grammar/grammar_constraint.h.
//
// Thread-safety: none; an instance is used by one compute loop at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

namespace mx::engine {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;

  // A fresh copy in the current state (the prototype's: at the reply's start).
  virtual std::unique_ptr<TokenConstraint> Clone() const = 0;

  // Whether `token` may come next. For an end-of-generation token: whether
  // the reply may end here. Ids outside the vocabulary are never allowed.
  virtual bool Allows(int32_t token) = 0;

  // Sets logits[t] = -infinity for every token t that may not come next
  // (the same answer as Allows for each t, computed for all at once).
  // REQUIRES: logits.size() is the vocabulary size.
  virtual void Mask(std::span<float> logits) = 0;

  // Moves past `token`. REQUIRES: Allows(token), token not end-of-generation.
  virtual void Accept(int32_t token) = 0;

  // True when the output is complete and nothing may follow but the end
  // (the scheduler then ends the reply with finish_reason "stop").
  virtual bool MustEnd() const = 0;
};

}  // namespace mx::engine
