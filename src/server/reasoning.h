// ReasoningSplitter: separates a thinking model's reasoning from its answer
// in a reply's text, as llama.cpp's server ("reasoning_format": "deepseek")
// and DeepSeek's API do: what the model writes inside <think>...</think>
// goes to `reasoning_content`, the rest to `content`. The reply is inside the
// block from its start when the prompt opened one (Qwen 3.5's generation
// prompt ends with "<think>\n"), or when the reply begins with "<think>".
// Works on streamed text: a tag split across pieces is held back until it
// is known to be one.
//
// Thread-safety: none (one per reply).
#pragma once

#include <string>
#include <string_view>

namespace mx::server {

// Whether prompt text ending with `tail` leaves the reply inside an open
// think block ("<think>" then only spaces and newlines).
bool PromptOpensThinkBlock(std::string_view tail);

class ReasoningSplitter {
 public:
  // starts_inside: the prompt ended inside an open think block.
  explicit ReasoningSplitter(bool starts_inside);
  // Feeds the next piece of reply text; appends what can be released.
  void Feed(std::string_view text, std::string* reasoning, std::string* content);
  // The reply ended: releases what was held back (an unfinished block's text
  // stays reasoning).
  void Finish(std::string* reasoning, std::string* content);

 private:
  enum class State { kStart, kReasoning, kAfterClose, kContent };
  void Run(bool final, std::string* reasoning, std::string* content);
  State state_;
  std::string pending_;  // text not released yet
};

}  // namespace mx::server
