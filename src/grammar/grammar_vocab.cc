// GrammarVocab: the byte trie, built from the sorted token pieces.
#include "grammar/grammar_vocab.h"

#include <algorithm>
#include <numeric>

#include "tokenizer/tokenizer.h"

namespace mx::grammar {

Result<std::shared_ptr<const GrammarVocab>> GrammarVocab::Create(
    std::vector<std::string> token_bytes, std::vector<TokenKind> kinds) {
  if (token_bytes.empty()) return Status::InvalidArgument("grammar vocab: no tokens");
  if (kinds.size() != token_bytes.size()) {
    return Status::InvalidArgument("grammar vocab: " + std::to_string(token_bytes.size()) +
                                   " token pieces but " + std::to_string(kinds.size()) + " kinds");
  }
  std::shared_ptr<GrammarVocab> v(new GrammarVocab());
  v->bytes_ = std::move(token_bytes);
  v->kinds_ = std::move(kinds);
  std::vector<int32_t> text;
  for (int32_t id = 0; id < v->n_vocab(); ++id) {
    TokenKind& k = v->kinds_[id];
    if (k == TokenKind::kText && (v->bytes_[id].empty() || v->bytes_[id].size() > 65535)) {
      k = TokenKind::kNever;
    }
    if (k == TokenKind::kText) text.push_back(id);
    if (k == TokenKind::kEndOfGeneration) v->eog_ids_.push_back(id);
  }
  std::sort(text.begin(), text.end(), [&](int32_t a, int32_t b) {
    return v->bytes_[a] != v->bytes_[b] ? v->bytes_[a] < v->bytes_[b] : a < b;
  });
  // Sorted pieces visited in order give the trie in preorder: keep the path
  // shared with the previous piece, close the nodes below it, open the rest.
  std::vector<uint32_t> path;  // node index per depth - 1
  const std::string* prev = nullptr;
  for (int32_t id : text) {
    const std::string& s = v->bytes_[id];
    if (prev != nullptr && *prev == s) {
      v->trie_tokens_.push_back(id);  // same bytes as the previous token: same node
      continue;
    }
    size_t lcp = 0;
    if (prev != nullptr) {
      while (lcp < prev->size() && lcp < s.size() && (*prev)[lcp] == s[lcp]) ++lcp;
    }
    while (path.size() > lcp) {
      v->trie_[path.back()].subtree_end = static_cast<uint32_t>(v->trie_.size());
      path.pop_back();
    }
    for (size_t d = lcp; d < s.size(); ++d) {
      path.push_back(static_cast<uint32_t>(v->trie_.size()));
      v->trie_.push_back({0, static_cast<uint32_t>(v->trie_tokens_.size()),
                          static_cast<uint16_t>(d + 1), static_cast<uint8_t>(s[d])});
    }
    v->trie_tokens_.push_back(id);
    v->max_depth_ = std::max(v->max_depth_, s.size());
    prev = &s;
  }
  while (!path.empty()) {
    v->trie_[path.back()].subtree_end = static_cast<uint32_t>(v->trie_.size());
    path.pop_back();
  }
  const auto end = static_cast<uint32_t>(v->trie_.size());
  v->trie_.push_back({end + 1, static_cast<uint32_t>(v->trie_tokens_.size()), 0, 0});
  return std::shared_ptr<const GrammarVocab>(std::move(v));
}

Result<std::shared_ptr<const GrammarVocab>> GrammarVocabFromTokenizer(
    const tokenizer::Tokenizer& tok, const std::vector<std::string>& control_as_text) {
  const int32_t n = tok.n_vocab();
  std::vector<std::string> bytes(n);
  std::vector<TokenKind> kinds(n, TokenKind::kText);
  for (int32_t id = 0; id < n; ++id) {
    bytes[id] = tok.TokenToPiece(id);
    const tokenizer::TokenType type = tok.token_type(id);
    if (tok.IsEog(id)) {
      kinds[id] = TokenKind::kEndOfGeneration;
    } else if (tok.IsControl(id) && std::find(control_as_text.begin(), control_as_text.end(),
                                              bytes[id]) != control_as_text.end()) {
      kinds[id] = TokenKind::kText;
    } else if (tok.IsControl(id) || type == tokenizer::TokenType::kUnknown ||
               type == tokenizer::TokenType::kUnused) {
      kinds[id] = TokenKind::kNever;
    }
  }
  return GrammarVocab::Create(std::move(bytes), std::move(kinds));
}

}  // namespace mx::grammar
