// Byte-level BPE merges for one pre-tokenized word (ENGINE-FACTS §4.5, llama.cpp
// llm_tokenizer_bpe_session).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tokenizer/merge_queue.h"
#include "tokenizer/token_index.h"

namespace mx::tokenizer::internal {

// Merge ranks keyed by the (left, right) pair of symbol texts.
class MergeRanks {
 public:
  // Parses merges[i] = "left right" (split at the first space at index >= 1);
  // rank = i, and the first occurrence of a pair wins. Keys are views into
  // `merges`, which must stay alive and unmoved. InvalidArgument if an entry
  // has no such space.
  Status Build(const std::vector<std::string>& merges);
  // Rank of merging `left` + `right`, or -1.
  int32_t Rank(std::string_view left, std::string_view right) const;
  size_t size() const { return ranks_.size(); }

 private:
  struct Key {
    std::string_view left, right;
    bool operator==(const Key& o) const { return left == o.left && right == o.right; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      const size_t a = std::hash<std::string_view>{}(k.left);
      const size_t b = std::hash<std::string_view>{}(k.right);
      return a ^ (b * 0x9E3779B97F4A7C15ull + 0x7F4A7C15ull + (a << 6) + (a >> 2));
    }
  };
  std::unordered_map<Key, int32_t, KeyHash> ranks_;
};

// Scratch space for merging words; one per Encode call (not thread-safe).
class BpeWordEncoder {
 public:
  BpeWordEncoder(const TokenIndex& vocab, const MergeRanks& ranks, bool ignore_merges)
      : vocab_(vocab), ranks_(ranks), ignore_merges_(ignore_merges) {}

  // Appends the ids of `word` (already mapped through the GPT-2 byte map) to
  // *out. A final symbol that is not a token falls back to its single bytes
  // looked up as one-character texts; bytes without a token are dropped (as
  // llama.cpp does).
  void Encode(std::string_view word, std::vector<int32_t>* out);

 private:
  struct Symbol {
    int32_t start;  // byte offset in the word
    int32_t n;      // bytes; 0 once merged into the left neighbour
    int32_t prev;   // index of the previous live symbol, -1 at the start
    int32_t next;   // index of the next live symbol, -1 at the end
  };
  struct Bigram {
    uint64_t order;  // rank << 32 | left: lowest rank first, ties -> smallest left
    int32_t right;
    int32_t size;  // bytes of left + right when queued (staleness check)
    int32_t left() const { return static_cast<int32_t>(order & 0xFFFFFFFFu); }
  };
  struct BigramBefore {
    bool operator()(const Bigram& a, const Bigram& b) const { return a.order < b.order; }
  };
  void TryAddBigram(std::string_view word, int32_t left, int32_t right);
  void EmitSymbol(std::string_view text, std::vector<int32_t>* out) const;

  const TokenIndex& vocab_;
  const MergeRanks& ranks_;
  const bool ignore_merges_;
  std::vector<Symbol> symbols_;
  MergeQueue<Bigram, BigramBefore> queue_;
};

}  // namespace mx::tokenizer::internal
