// GrammarConstraint: Allows/Mask/Accept over a GrammarMatcher and the
// vocabulary trie; lazy triggers.
#include "grammar/grammar_constraint.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <limits>

namespace mx::grammar {
namespace {

constexpr size_t kCachedMasks = 4;

bool SamePos(const GrammarMatcher::Pos& a, const GrammarMatcher::Pos& b) {
  return a.state == b.state && a.cp == b.cp && a.need == b.need && a.len == b.len;
}

}  // namespace

Result<std::unique_ptr<GrammarConstraint>> GrammarConstraint::Create(
    std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> vocab,
    const MatchLimits& limits) {
  if (grammar == nullptr || vocab == nullptr) {
    return Status::InvalidArgument("grammar constraint: no grammar or no vocabulary");
  }
  MX_ASSIGN_OR_RETURN(auto matcher, GrammarMatcher::Create(grammar, limits));
  std::unique_ptr<GrammarConstraint> c(new GrammarConstraint());
  c->grammar_ = std::move(grammar);
  c->vocab_ = std::move(vocab);
  c->matcher_ = std::move(matcher);
  return c;
}

Result<std::unique_ptr<GrammarConstraint>> GrammarConstraint::CreateLazy(
    std::shared_ptr<const Grammar> grammar, std::shared_ptr<const GrammarVocab> vocab,
    std::vector<std::string> triggers, const MatchLimits& limits) {
  if (triggers.empty())
    return Status::InvalidArgument("grammar constraint: lazy mode without a trigger");
  size_t longest = 0;
  for (const std::string& t : triggers) {
    if (t.empty()) return Status::InvalidArgument("grammar constraint: an empty trigger");
    longest = std::max(longest, t.size());
  }
  MX_ASSIGN_OR_RETURN(auto c, Create(std::move(grammar), std::move(vocab), limits));
  c->triggers_ = std::make_shared<const std::vector<std::string>>(std::move(triggers));
  c->triggered_ = false;
  c->max_trigger_ = longest;
  for (const std::string& t : *c->triggers_) {
    c->trigger_end_byte_[static_cast<unsigned char>(t.back())] = true;
  }
  return c;
}

std::unique_ptr<engine::TokenConstraint> GrammarConstraint::Clone() const {
  std::unique_ptr<GrammarConstraint> c(new GrammarConstraint());
  c->grammar_ = grammar_;
  c->vocab_ = vocab_;
  c->matcher_ = matcher_->Clone();
  c->triggers_ = triggers_;
  c->triggered_ = triggered_;
  c->tail_ = tail_;
  c->max_trigger_ = max_trigger_;
  std::copy(std::begin(trigger_end_byte_), std::end(trigger_end_byte_), c->trigger_end_byte_);
  return c;
}

bool GrammarConstraint::IsAccepting() const { return !triggered_ || matcher_->IsAccepting(); }

bool GrammarConstraint::MustEnd() const { return triggered_ && matcher_->CanOnlyEnd(); }

bool GrammarConstraint::AllowsTriggered(int32_t token) {
  switch (vocab_->kind(token)) {
    case TokenKind::kEndOfGeneration:
      return matcher_->IsAccepting();
    case TokenKind::kNever:
      return false;
    case TokenKind::kText:
      return matcher_->CanAccept(vocab_->bytes(token));
  }
  return false;
}

size_t GrammarConstraint::TriggerEnd(const std::string& piece) const {
  // tail_ never holds a whole trigger (it would have fired), so any
  // occurrence in tail_ + piece ends inside the piece, on a trigger's last byte.
  bool may_end = false;
  for (char ch : piece) may_end = may_end || trigger_end_byte_[static_cast<unsigned char>(ch)];
  if (!may_end) return std::string::npos;
  std::string buf = tail_;
  buf += piece;
  size_t best = std::string::npos;
  for (const std::string& t : *triggers_) {
    const size_t at = buf.find(t);
    if (at != std::string::npos) best = std::min(best, at + t.size());
  }
  return best == std::string::npos ? best : best - tail_.size();
}

bool GrammarConstraint::Allows(int32_t token) {
  if (token < 0 || token >= vocab_->n_vocab()) return false;
  if (triggered_) return AllowsTriggered(token);
  const std::string& piece = vocab_->bytes(token);
  const size_t end = TriggerEnd(piece);
  if (end == std::string::npos) return true;
  return matcher_->CanAccept(std::string_view(piece).substr(end));
}

void GrammarConstraint::Accept(int32_t token) {
  if (token < 0 || token >= vocab_->n_vocab()) return;
  const std::string& piece = vocab_->bytes(token);
  if (!triggered_) {
    const size_t end = TriggerEnd(piece);
    if (end == std::string::npos) {
      tail_ += piece;
      if (tail_.size() >= max_trigger_) tail_.erase(0, tail_.size() - (max_trigger_ - 1));
      return;
    }
    triggered_ = true;
    tail_.clear();
    matcher_->AcceptBytes(std::string_view(piece).substr(end));
    return;
  }
  // REQUIRES Allows(token); a token that is not allowed leaves the state as it is.
  if (vocab_->kind(token) == TokenKind::kText) matcher_->AcceptBytes(piece);
}

void GrammarConstraint::ComputeAllowed(std::vector<uint64_t>* bits) {
  const size_t n = static_cast<size_t>(vocab_->n_vocab());
  bits->assign((n + 63) / 64, 0);
  uint64_t* out = bits->data();
  const auto& trie = vocab_->trie();
  const auto& tokens = vocab_->trie_tokens();
  frames_.resize(vocab_->max_depth() + 1);
  frames_[0] = matcher_->pos();
  GrammarMatcher& m = *matcher_;
  const size_t n_nodes = trie.size() - 1;  // the last one is the sentinel
  for (size_t i = 0; i < n_nodes;) {
    const GrammarVocab::TrieNode& node = trie[i];
    GrammarMatcher::Pos p = frames_[node.depth - 1];
    if (!m.Step(&p, node.byte)) {
      i = node.subtree_end;
      continue;
    }
    frames_[node.depth] = p;
    for (uint32_t k = node.tokens_begin, e = trie[i + 1].tokens_begin; k < e; ++k) {
      const auto t = static_cast<uint32_t>(tokens[k]);
      out[t >> 6] |= uint64_t{1} << (t & 63);
    }
    ++i;
  }
  if (m.IsAccepting()) {
    for (int32_t t : vocab_->eog_ids()) out[t >> 6] |= uint64_t{1} << (t & 63);
  }
}

void GrammarConstraint::Mask(std::span<float> logits) {
  const float kNegInf = -std::numeric_limits<float>::infinity();
  const size_t n = std::min(logits.size(), static_cast<size_t>(vocab_->n_vocab()));
  for (size_t t = n; t < logits.size(); ++t) logits[t] = kNegInf;  // outside the vocabulary
  if (!triggered_) {
    for (size_t t = 0; t < n; ++t) {
      if (!Allows(static_cast<int32_t>(t))) logits[t] = kNegInf;
    }
    return;
  }
  const GrammarMatcher::Pos pos = matcher_->pos();
  const uint64_t gen = matcher_->generation();
  CachedMask* hit = nullptr;
  for (CachedMask& c : masks_) {
    if (c.generation == gen && SamePos(c.pos, pos)) hit = &c;
  }
  if (hit == nullptr) {
    if (masks_.size() < kCachedMasks) {
      masks_.emplace_back();
      hit = &masks_.back();
    } else {
      hit = &*std::min_element(masks_.begin(), masks_.end(), [](const auto& a, const auto& b) {
        return a.last_used < b.last_used;
      });
    }
    ComputeAllowed(&hit->bits);
    hit->generation = gen;
    hit->pos = pos;
  }
  hit->last_used = ++mask_clock_;
  const uint64_t* bits = hit->bits.data();
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t word = bits[w];
    if (word == ~uint64_t{0}) continue;
    const size_t end = std::min(n, w * 64 + 64);
    for (size_t t = w * 64; t < end; ++t) {
      if (!((word >> (t & 63)) & 1)) logits[t] = kNegInf;
    }
  }
}

}  // namespace mx::grammar
