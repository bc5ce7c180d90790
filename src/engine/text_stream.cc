#include "engine/text_stream.h"

#include <algorithm>

namespace mx::engine {

TextStream::TextStream(std::vector<std::string> stop) {
  for (auto& s : stop) {
    if (!s.empty()) stop_.push_back(std::move(s));
  }
}

std::string TextStream::Push(std::string_view piece) {
  if (stopped_) return "";
  held_ += utf8_.Push(piece);
  return Release();
}

std::string TextStream::Flush() {
  if (stopped_) return "";
  held_ += utf8_.Flush();
  std::string out = Release();
  if (stopped_) return out;
  out += held_;
  held_.clear();
  return out;
}

std::string TextStream::Release() {
  // A complete stop string: send what precedes the earliest one, drop the rest.
  size_t first = std::string::npos;
  for (const auto& s : stop_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    std::string out = held_.substr(0, first);
    held_.clear();
    stopped_ = true;
    return out;
  }
  // Hold back the longest tail of held_ that is a proper prefix of a stop string.
  size_t keep = 0;
  for (const auto& s : stop_) {
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n) {
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

}  // namespace mx::engine
