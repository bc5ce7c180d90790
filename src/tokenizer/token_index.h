// Text -> token id lookup without allocations: keys are views into the
// vocabulary strings, which must stay alive and unmoved while the index is
// used (they live in Tokenizer::Impl, which is never moved).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mx::tokenizer::internal {

class TokenIndex {
 public:
  // Indexes texts[i] -> i. Returns the first duplicate id pair found, if any,
  // as {earlier id, later id}; {-1, -1} when all texts are distinct.
  std::pair<int32_t, int32_t> Build(const std::vector<std::string>& texts) {
    ids_.clear();
    ids_.reserve(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) {
      auto [it, inserted] = ids_.emplace(std::string_view(texts[i]), static_cast<int32_t>(i));
      if (!inserted) return {it->second, static_cast<int32_t>(i)};
    }
    return {-1, -1};
  }
  // Id of the token whose text is exactly `text`, or -1.
  int32_t Find(std::string_view text) const {
    auto it = ids_.find(text);
    return it == ids_.end() ? -1 : it->second;
  }

 private:
  std::unordered_map<std::string_view, int32_t> ids_;
};

// Number of bytes of the UTF-8 sequence a lead byte announces, as llama.cpp's
// unicode_len_utf8 (top nibble: 0x0-0xB -> 1, 0xC-0xD -> 2, 0xE -> 3, 0xF -> 4).
inline size_t Utf8LenFromLead(char lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[static_cast<uint8_t>(lead) >> 4];
}

}  // namespace mx::tokenizer::internal
