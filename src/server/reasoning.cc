#include "server/reasoning.h"

namespace mx::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// How many trailing bytes of `s` could be the start of `tag`.
size_t PartialTagSuffix(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

bool PromptOpensThinkBlock(std::string_view tail) {
  while (!tail.empty() && IsSpace(tail.back())) tail.remove_suffix(1);
  return tail.size() >= kOpen.size() && tail.substr(tail.size() - kOpen.size()) == kOpen;
}

ReasoningSplitter::ReasoningSplitter(bool starts_inside)
    : state_(starts_inside ? State::kReasoning : State::kStart) {}

void ReasoningSplitter::Feed(std::string_view text, std::string* reasoning, std::string* content) {
  pending_.append(text);
  Run(/*final=*/false, reasoning, content);
}

void ReasoningSplitter::Finish(std::string* reasoning, std::string* content) {
  Run(/*final=*/true, reasoning, content);
}

void ReasoningSplitter::Run(bool final, std::string* reasoning, std::string* content) {
  for (;;) {
    switch (state_) {
      case State::kStart: {
        // Leading whitespace, then either "<think>" or the answer.
        size_t i = 0;
        while (i < pending_.size() && IsSpace(pending_[i])) ++i;
        const std::string_view rest = std::string_view(pending_).substr(i);
        if (rest.substr(0, kOpen.size()) == kOpen) {
          pending_.erase(0, i + kOpen.size());
          state_ = State::kReasoning;
          continue;
        }
        if (!final && kOpen.substr(0, rest.size()) == rest) return;  // could still be the tag
        state_ = State::kContent;
        continue;
      }
      case State::kReasoning: {
        const size_t close = pending_.find(kClose);
        if (close != std::string::npos) {
          reasoning->append(pending_, 0, close);
          pending_.erase(0, close + kClose.size());
          state_ = State::kAfterClose;
          continue;
        }
        const size_t hold = final ? 0 : PartialTagSuffix(pending_, kClose);
        reasoning->append(pending_, 0, pending_.size() - hold);
        pending_.erase(0, pending_.size() - hold);
        return;
      }
      case State::kAfterClose: {
        // The whitespace between the block and the answer belongs to neither.
        size_t i = 0;
        while (i < pending_.size() && IsSpace(pending_[i])) ++i;
        pending_.erase(0, i);
        if (pending_.empty() && !final) return;
        state_ = State::kContent;
        continue;
      }
      case State::kContent:
        content->append(pending_);
        pending_.clear();
        return;
    }
  }
}

}  // namespace mx::server
