#include "tokenizer/bpe.h"

#include <algorithm>

namespace mx::tokenizer::internal {
Status MergeRanks::Build(const std::vector<std::string>& merges) {
  ranks_.clear();
  ranks_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string_view merge = merges[i];
    const size_t space = merge.size() > 1 ? merge.find(' ', 1) : std::string_view::npos;
    if (space == std::string_view::npos) {
      return Status::InvalidArgument("BPE merge " + std::to_string(i) + " '" +
                                     std::string(merge.substr(0, 64)) +
                                     "': expected \"left right\"");
    }
    ranks_.emplace(Key{merge.substr(0, space), merge.substr(space + 1)},
                   static_cast<int32_t>(i));
  }
  return Status::Ok();
}

int32_t MergeRanks::Rank(std::string_view left, std::string_view right) const {
  auto it = ranks_.find(Key{left, right});
  return it == ranks_.end() ? -1 : it->second;
}

void BpeWordEncoder::TryAddBigram(std::string_view word, int32_t left, int32_t right) {
  if (left < 0 || right < 0) return;
  const Symbol& l = symbols_[left];
  const Symbol& r = symbols_[right];
  const int32_t rank = ranks_.Rank(word.substr(l.start, l.n), word.substr(r.start, r.n));
  if (rank < 0) return;
  queue_.Push(Bigram{(uint64_t(uint32_t(rank)) << 32) | uint32_t(left), right, l.n + r.n});
}

void BpeWordEncoder::EmitSymbol(std::string_view text, std::vector<int32_t>* out) const {
  const int32_t id = vocab_.Find(text);
  if (id >= 0) {
    out->push_back(id);
    return;
  }
  for (size_t i = 0; i < text.size(); ++i) {
    const int32_t byte_id = vocab_.Find(text.substr(i, 1));
    if (byte_id >= 0) out->push_back(byte_id);
  }
}

void BpeWordEncoder::Encode(std::string_view word, std::vector<int32_t>* out) {
  if (word.empty()) return;
  if (ignore_merges_) {
    const int32_t id = vocab_.Find(word);
    if (id >= 0) {
      out->push_back(id);
      return;
    }
  }

  // One symbol per character of the mapped word.
  symbols_.clear();
  queue_.clear();
  for (size_t offset = 0; offset < word.size();) {
    const size_t len = std::min(word.size() - offset, Utf8LenFromLead(word[offset]));
    const int32_t index = static_cast<int32_t>(symbols_.size());
    offset += len;
    symbols_.push_back(Symbol{static_cast<int32_t>(offset - len), static_cast<int32_t>(len),
                              index - 1, offset == word.size() ? -1 : index + 1});
  }
  for (int32_t i = 1; i < static_cast<int32_t>(symbols_.size()); ++i) {
    TryAddBigram(word, i - 1, i);
  }

  // Apply the best-ranked merge until none is left. A queued bigram is stale
  // when either side was merged away or the right side grew; positions never
  // move, so comparing the byte length is the same as llama.cpp's text check.
  while (!queue_.empty()) {
    const Bigram bigram = queue_.Pop();
    const int32_t left_index = bigram.left();
    Symbol& left = symbols_[left_index];
    Symbol& right = symbols_[bigram.right];
    if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols_[right.next].prev = left_index;
    TryAddBigram(word, left.prev, left_index);
    TryAddBigram(word, left_index, left.next);
  }

  // Symbol 0 is never merged away, so the live chain starts there.
  for (int32_t i = 0; i != -1; i = symbols_[i].next) {
    EmitSymbol(word.substr(symbols_[i].start, symbols_[i].n), out);
  }
}

}  // namespace mx::tokenizer::internal
