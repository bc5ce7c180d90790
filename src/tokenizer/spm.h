// SentencePiece-style BPE ("llama" vocab) for one raw text fragment, as
// llama.cpp's llm_tokenizer_spm_session (ENGINE-FACTS §4.6): symbols are UTF-8
// characters by lead byte, adjacent pairs whose text is a vocab token merge
// best-score-first, and leftover characters fall back to <0xXX> byte tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/merge_queue.h"
#include "tokenizer/token_index.h"

namespace mx::tokenizer::internal {

// Immutable SPM model data shared by all encodes.
struct SpmModel {
  const TokenIndex* vocab = nullptr;
  const std::vector<float>* scores = nullptr;  // [n_vocab]
  // Byte fallback: id of "<0xXX>", else of the one-byte text, else unk_id,
  // else -1 (byte dropped; llama.cpp would throw).
  std::array<int32_t, 256> byte_tokens{};
};

// Scratch space for one Encode call (not thread-safe).
class SpmEncoder {
 public:
  explicit SpmEncoder(const SpmModel& model) : model_(model) {}

  // Appends the ids of `text` to *out. REQUIRES: spaces already replaced by
  // "▁" (and the prefix space added) by the caller.
  void Encode(std::string_view text, std::vector<int32_t>* out);

 private:
  struct Symbol {
    int32_t start;
    int32_t n;
    int32_t prev;
    int32_t next;
  };
  struct Bigram {
    float score;
    int32_t left;
    int32_t right;
    int32_t size;
  };
  // Highest score first, ties -> smallest left index.
  struct BigramBefore {
    bool operator()(const Bigram& a, const Bigram& b) const {
      return a.score > b.score || (a.score == b.score && a.left < b.left);
    }
  };
  void TryAddBigram(std::string_view text, int32_t left, int32_t right);

  const SpmModel& model_;
  std::vector<Symbol> symbols_;
  MergeQueue<Bigram, BigramBefore> queue_;
};

}  // namespace mx::tokenizer::internal
