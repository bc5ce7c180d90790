// The GPT-2 byte <-> unicode map used by byte-level BPE vocabularies
// (ENGINE-FACTS §4.3): bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF map to the code
// point of the same value; the other 68 bytes, in increasing order, map to
// U+0100..U+0143 (space -> U+0120 "Ġ", newline -> U+010A "Ċ").
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace mx::tokenizer::internal {

class ByteMap {
 public:
  // The process-wide immutable map. Thread-safe.
  static const ByteMap& Get();

  // UTF-8 text (1 or 2 bytes) of the character byte `b` maps to.
  std::string_view Encode(uint8_t b) const {
    const Entry& e = encoded_[b];
    return std::string_view(e.utf8, e.len);
  }
  // Appends the mapped characters of every byte of `bytes` to `out`.
  void AppendMapped(std::string_view bytes, std::string* out) const;
  // The byte a mapped code point stands for, or -1 if `cpt` is not in the map.
  int ByteForCodepoint(uint32_t cpt) const {
    return cpt < decoded_.size() ? decoded_[cpt] : -1;
  }
  // Raw bytes of a BPE token text, as llama.cpp's llama_decode_text: each
  // character goes back through the inverse map; a character outside the map
  // yields "[UNK_BYTE_0x<hex of its UTF-8>" + text + "]".
  std::string DecodeTokenText(std::string_view text) const;

 private:
  ByteMap();
  struct Entry {
    char utf8[2];
    uint8_t len;
  };
  std::array<Entry, 256> encoded_;
  std::array<int16_t, 0x144> decoded_;  // code point -> byte, -1 if unmapped
};

}  // namespace mx::tokenizer::internal
