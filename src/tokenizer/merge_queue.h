// A 4-ary min-heap for the BPE/SPM merge queues. Same pop order as a binary
// heap with the same comparator (entries that compare equal are
// interchangeable for the callers), but half the depth and all children of a
// node in one cache line, which matters for very long words.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace mx::tokenizer::internal {

// Before(a, b) is true when `a` must be popped before `b`.
template <typename T, typename Before>
class MergeQueue {
 public:
  bool empty() const { return items_.empty(); }
  void clear() { items_.clear(); }

  void Push(const T& item) {
    size_t i = items_.size();
    items_.push_back(item);
    while (i > 0) {
      const size_t parent = (i - 1) / 4;
      if (!before_(item, items_[parent])) break;
      items_[i] = items_[parent];
      i = parent;
    }
    items_[i] = item;
  }

  // REQUIRES: !empty().
  T Pop() {
    const T top = items_[0];
    const T last = items_.back();
    items_.pop_back();
    const size_t n = items_.size();
    if (n == 0) return top;
    size_t i = 0;
    while (true) {
      const size_t first = 4 * i + 1;
      if (first >= n) break;
      size_t best = first;
      const size_t end = first + 4 < n ? first + 4 : n;
      for (size_t c = first + 1; c < end; ++c) {
        if (before_(items_[c], items_[best])) best = c;
      }
      if (!before_(items_[best], last)) break;
      items_[i] = items_[best];
      i = best;
    }
    items_[i] = last;
    return top;
  }

 private:
  std::vector<T> items_;
  Before before_;
};

}  // namespace mx::tokenizer::internal
