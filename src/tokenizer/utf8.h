// UTF-8 helpers for the tokenizer: strict validation, llama.cpp's lenient
// decoder (what its BPE pre-tokenizer sees), and an incremental decoder for
// streaming generated text.
//
// Two decoders on purpose:
//  * Strict (RFC 3629): used by Utf8StreamDecoder and IsValidUtf8. Overlong
//    forms, surrogates and code points > U+10FFFF are invalid; each maximal
//    ill-formed subpart becomes one U+FFFD (the Unicode/WHATWG convention).
//  * Lenient (llama.cpp unicode_cpt_from_utf8): the lead byte fixes the length,
//    continuation bytes are only checked for 10xxxxxx, so overlong forms and
//    surrogates decode to a code point. Every byte that does not start a
//    decodable sequence becomes U+FFFD on its own. llama.cpp would throw on
//    F4 90.. - F7 .. (> U+10FFFF); here those lead bytes are invalid as well.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mx::tokenizer {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// True if `s` is well-formed UTF-8 (RFC 3629). Empty is valid.
bool IsValidUtf8(std::string_view s);

// Appends the UTF-8 encoding of `cpt` (REQUIRES: cpt <= 0x10FFFF; surrogates
// are encoded as their 3-byte form) to `out`.
void AppendUtf8(uint32_t cpt, std::string* out);

// One step of llama.cpp's lenient decoder at `pos` (REQUIRES: pos < s.size()).
struct LenientChar {
  uint32_t cpt;  // decoded code point, or kReplacementChar when !valid
  uint32_t len;  // bytes consumed: 1..4 (1 when !valid)
  bool valid;
};
LenientChar DecodeLenient(std::string_view s, size_t pos);

// Re-encodes `s` the way llama.cpp's BPE pre-tokenizer does before the byte
// map: decode leniently, replace every undecodable byte with U+FFFD and encode
// each code point in its shortest form. For valid UTF-8 this is the identity.
// Decode(Encode(s)) of a byte-level BPE tokenizer returns exactly this string.
std::string NormalizeUtf8Lenient(std::string_view s);

// Incremental UTF-8 decoding for streaming token pieces to a client.
// Push() returns the longest prefix of all bytes received so far that is
// complete UTF-8 (ill-formed bytes replaced by U+FFFD), and keeps a trailing
// incomplete-but-still-possible sequence (at most 3 bytes) for the next call.
// Flush() returns what is left (an incomplete tail becomes one U+FFFD) and
// resets the decoder. Every returned string is valid UTF-8.
// Not thread-safe; use one decoder per stream.
class Utf8StreamDecoder {
 public:
  std::string Push(std::string_view bytes);
  std::string Flush();
  // Number of bytes currently held back (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::string pending_;
};

}  // namespace mx::tokenizer
