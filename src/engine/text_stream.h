// TextStream: turns generated token pieces into the text a client sees.
// Pieces go through a UTF-8 stream decoder (so a character split across
// tokens is sent whole), then through the stop-string filter: text that could
// be the start of a stop string is held back until it either completes the
// stop string (generation ends; the stop string and everything after it are
// never sent) or can no longer become one (it is released).
//
// Thread-safety: none; one TextStream per reply.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/utf8.h"

namespace mx::engine {

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stop);

  // Adds the raw bytes of one token. Returns the text that is now safe to
  // send. After a stop string was found, stopped() is true and Push returns "".
  std::string Push(std::string_view piece);
  // Ends the reply: returns whatever is held back (empty once stopped()).
  std::string Flush();
  bool stopped() const { return stopped_; }

 private:
  // Moves the releasable part of held_ to the result.
  std::string Release();

  std::vector<std::string> stop_;  // empty strings removed
  tokenizer::Utf8StreamDecoder utf8_;
  std::string held_;  // decoded text not yet sent
  bool stopped_ = false;
};

}  // namespace mx::engine
