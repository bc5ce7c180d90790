// The byte-level BPE vocabulary of synthetic models: merges learned from a
// small built-in corpus, padding tokens, and the ChatML special tokens last.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "models/synthetic_model.h"

namespace mx::models {
namespace {

// Text the tokenizer's merges are learned from (written for this project).
constexpr std::string_view kCorpus =
    "The prompt cache keeps the processed state of every conversation, so that the next turn "
    "of a chat only reads the new tokens. A chat front end sends the whole conversation with "
    "every message: the system prompt, the notes, every question and every answer. Without a "
    "cache the model reads all of it again, and long chats become slower with every turn. "
    "With the cache, the server compares the new prompt with the conversations it already "
    "holds, finds the one that shares the longest start, and continues from there. "
    "When two chats share only their beginning, the shared part is copied and both go on. "
    "When memory is full, the conversation that was used least recently leaves first and is "
    "written to disk, sealed with a key, so that it can come back after a restart. "
    "The engine reads model files in the GGUF format, maps their weights into memory and "
    "runs the transformer layers: attention with rotary positions, a gated feed-forward "
    "network, and normalisation before each block. Numbers are stored as 32-bit floats, "
    "16-bit halves or 8-bit blocks with a shared scale. Each token's result must not depend "
    "on how the prompt was split into batches, because a reply computed from a cached state "
    "must equal, token for token, the reply computed by reading everything again.\n"
    "Hello! How are you today? I would like to know more about the weather in the mountains, "
    "the history of the old town, and the best way to cook rice. Thank you for your help.\n"
    "def add(a, b):\n    return a + b\n\nfor i in range(10):\n    print(i, add(i, 2))\n"
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 100 1000 2024 3.14 42%.\n";

// GPT-2's byte -> code point map (printable bytes map to themselves, the rest
// to U+0100 upwards), as UTF-8 strings.
std::vector<std::string> ByteToUnicode() {
  std::vector<std::string> out(256);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae);
    int cp = printable ? b : next++;
    std::string s;
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xc0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
    out[static_cast<size_t>(b)] = s;
  }
  return out;
}


}  // namespace

SyntheticVocab BuildSyntheticVocab(int64_t n_vocab) {
  SyntheticVocab v;
  const std::vector<std::string> byte_map = ByteToUnicode();
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(byte_map[static_cast<size_t>(b)]);
    v.types.push_back(1);
  }
  const int64_t n_special = 3;
  const int64_t max_merges = std::max<int64_t>(0, n_vocab - 256 - n_special);

  // Pre-split the corpus GPT-2 style: a word keeps its leading space.
  std::map<std::vector<std::string>, int> words;
  auto alnum = [](char c) { return std::isalnum(static_cast<uint8_t>(c)) != 0; };
  for (size_t i = 0; i < kCorpus.size();) {
    const size_t start = i;
    if (kCorpus[i] == ' ' && i + 1 < kCorpus.size() && alnum(kCorpus[i + 1])) ++i;
    if (alnum(kCorpus[i])) {
      while (i < kCorpus.size() && alnum(kCorpus[i])) ++i;
    } else {
      ++i;
    }
    std::vector<std::string> word;
    for (size_t j = start; j < i; ++j) word.push_back(byte_map[static_cast<uint8_t>(kCorpus[j])]);
    ++words[word];
  }

  std::set<std::string> known(v.tokens.begin(), v.tokens.end());
  for (int64_t m = 0; m < max_merges; ++m) {
    std::map<std::pair<std::string, std::string>, int> counts;
    for (const auto& [w, n] : words) {
      for (size_t i = 0; i + 1 < w.size(); ++i) counts[{w[i], w[i + 1]}] += n;
    }
    auto best = counts.end();
    for (auto it = counts.begin(); it != counts.end(); ++it) {
      if (best == counts.end() || it->second > best->second) best = it;
    }
    if (best == counts.end() || best->second < 2) break;
    const auto [left, right] = best->first;
    v.merges.push_back(left + " " + right);
    std::string merged = left + right;
    if (known.insert(merged).second) {
      v.tokens.push_back(merged);
      v.types.push_back(1);
    }
    std::map<std::vector<std::string>, int> next;
    for (const auto& [w, n] : words) {
      std::vector<std::string> out;
      for (size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == left && w[i + 1] == right) {
          out.push_back(merged);
          ++i;
        } else {
          out.push_back(w[i]);
        }
      }
      next[out] += n;
    }
    words = std::move(next);
  }
  // Pad to the requested size with unused tokens, then the three specials.
  for (int64_t i = 0; static_cast<int64_t>(v.tokens.size()) < n_vocab - n_special; ++i) {
    v.tokens.push_back("<|unused_" + std::to_string(i) + "|>");
    v.types.push_back(5);
  }
  for (const char* s : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    v.tokens.push_back(s);
    v.types.push_back(3);
  }
  return v;
}

}  // namespace mx::models
