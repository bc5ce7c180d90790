// ConstantTimeEquals: compares a secret (a bearer token, an API key) with a
// candidate in time that depends only on the candidate's length, never on
// where the two first differ, so a client cannot find a secret byte by byte
// by timing its guesses.
#pragma once

#include <cstddef>
#include <string_view>

namespace mx {

inline bool ConstantTimeEquals(std::string_view secret, std::string_view candidate) {
  // Every byte of the candidate is looked at; the secret is read cyclically
  // (an empty secret only equals an empty candidate).
  unsigned char diff = static_cast<unsigned char>(secret.size() != candidate.size());
  if (secret.empty()) return candidate.empty();
  for (size_t i = 0; i < candidate.size(); ++i) {
    diff |= static_cast<unsigned char>(candidate[i] ^ secret[i % secret.size()]);
  }
  // Keep the compiler from ending the loop early on a nonzero diff.
  volatile unsigned char result = diff;
  return result == 0;
}

}  // namespace mx
