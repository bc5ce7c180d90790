#include "tokenizer/spm.h"

#include <algorithm>

namespace mx::tokenizer::internal {
void SpmEncoder::TryAddBigram(std::string_view text, int32_t left, int32_t right) {
  if (left < 0 || right < 0) return;
  const Symbol& l = symbols_[left];
  const Symbol& r = symbols_[right];
  // Live neighbours are contiguous in the text.
  const int32_t id = model_.vocab->Find(text.substr(l.start, l.n + r.n));
  if (id < 0) return;
  queue_.Push(Bigram{(*model_.scores)[id], left, right, l.n + r.n});
}

void SpmEncoder::Encode(std::string_view text, std::vector<int32_t>* out) {
  if (text.empty()) return;
  symbols_.clear();
  queue_.clear();
  for (size_t offset = 0; offset < text.size();) {
    const size_t len = std::min(text.size() - offset, Utf8LenFromLead(text[offset]));
    const int32_t index = static_cast<int32_t>(symbols_.size());
    offset += len;
    symbols_.push_back(Symbol{static_cast<int32_t>(offset - len), static_cast<int32_t>(len),
                              index - 1, offset == text.size() ? -1 : index + 1});
  }
  for (int32_t i = 1; i < static_cast<int32_t>(symbols_.size()); ++i) {
    TryAddBigram(text, i - 1, i);
  }

  while (!queue_.empty()) {
    const Bigram bigram = queue_.Pop();
    Symbol& left = symbols_[bigram.left];
    Symbol& right = symbols_[bigram.right];
    if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols_[right.next].prev = bigram.left;
    TryAddBigram(text, left.prev, bigram.left);
    TryAddBigram(text, bigram.left, left.next);
  }

  // Every merged symbol is a vocab token by construction; only single
  // characters can miss, and those go out as bytes. (llama.cpp's rev_merge
  // re-segmentation is therefore never reached.)
  for (int32_t i = 0; i != -1; i = symbols_[i].next) {
    const std::string_view piece = text.substr(symbols_[i].start, symbols_[i].n);
    const int32_t id = model_.vocab->Find(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    for (unsigned char byte : piece) {
      const int32_t byte_id = model_.byte_tokens[byte];
      if (byte_id >= 0) out->push_back(byte_id);
    }
  }
}

}  // namespace mx::tokenizer::internal
