// Percentile: the nearest-rank percentile of measured values, for the bench
// commands' latency figures.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace mx::cli {

// The value at rank floor(q * n) of the sorted values (0 for none); q in [0, 1].
inline double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = static_cast<size_t>(q * static_cast<double>(values.size()));
  return values[std::min(values.size() - 1, rank)];
}

}  // namespace mx::cli
