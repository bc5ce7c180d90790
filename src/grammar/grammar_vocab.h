// GrammarVocab: a model's tokens as constrained decoding sees them: each
// token's bytes, whether it is text, an end-of-generation token or a token
// a grammar never allows (control tokens), and a byte trie over the text
// tokens so that one walk finds every token a grammar position allows.
//
// Built once per loaded model and shared by every request
// (shared_ptr<const GrammarVocab>); immutable, so thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace mx::tokenizer {
class Tokenizer;
}

namespace mx::grammar {

enum class TokenKind : uint8_t {
  kText,             // allowed when its bytes keep the output a valid prefix
  kEndOfGeneration,  // allowed exactly when the grammar accepts the output so far
  kNever,            // control/special tokens, empty pieces: never allowed under a grammar
};

class GrammarVocab {
 public:
  // One trie node, in preorder. The node's tokens (those whose bytes end
  // here) are trie_tokens()[tokens_begin, next node's tokens_begin).
  struct TrieNode {
    uint32_t subtree_end;  // index of the first node after this node's subtree
    uint32_t tokens_begin;
    uint16_t depth;  // 1 for a first byte
    uint8_t byte;
  };

  // token_bytes[id] and kinds[id] for every id (same length, not empty).
  // Text tokens with an empty piece or longer than 65535 bytes become kNever.
  static Result<std::shared_ptr<const GrammarVocab>> Create(std::vector<std::string> token_bytes,
                                                            std::vector<TokenKind> kinds);

  int32_t n_vocab() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  TokenKind kind(int32_t id) const { return kinds_[id]; }
  const std::vector<int32_t>& eog_ids() const { return eog_ids_; }
  // The trie; the last node is a sentinel (depth 0) that closes the token ranges.
  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }
  size_t max_depth() const { return max_depth_; }

 private:
  GrammarVocab() = default;
  std::vector<std::string> bytes_;
  std::vector<TokenKind> kinds_;
  std::vector<int32_t> eog_ids_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> trie_tokens_;
  size_t max_depth_ = 0;
};

// From a Tokenizer: bytes = TokenToPiece(id); end-of-generation = IsEog(id);
// kNever = CONTROL and UNKNOWN tokens and tokens with an empty piece
// (UNUSED). USER_DEFINED tokens (e.g. "<tool_call>") are text: a grammar
// that allows their text allows them. `control_as_text`: texts of CONTROL
// tokens that are text here too (a tool-call syntax's markers, such as
// "[TOOL_CALLS]", which a model writes as one special token).
Result<std::shared_ptr<const GrammarVocab>> GrammarVocabFromTokenizer(
    const tokenizer::Tokenizer& tok, const std::vector<std::string>& control_as_text = {});

}  // namespace mx::grammar
