// Server counters, rendered as Prometheus text for GET /metrics.
// Thread-safety: all methods may be called concurrently.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

namespace mx::server {

// A Prometheus label value: backslash, double quote and line feed escaped
// as the text format defines; other control characters (which the format
// would carry raw) become U+FFFD, so a name can never start a new line or
// close its label.
std::string PromLabelValue(std::string_view value);

class Metrics {
 public:
  static constexpr std::array<double, 10> kTtftBuckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};

  void CountRequest() { requests_.fetch_add(1); }
  void CountPromptTokens(int64_t n) { prompt_tokens_.fetch_add(n); }
  void CountGenerated(int64_t n) { generated_.fetch_add(n); }
  void CountReusedTokens(int64_t n) { reused_tokens_.fetch_add(n); }
  void ObserveTtft(double seconds);
  std::string Render() const;

 private:
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> prompt_tokens_{0};
  std::atomic<int64_t> generated_{0};
  std::atomic<int64_t> reused_tokens_{0};
  std::array<std::atomic<int64_t>, kTtftBuckets.size() + 1> ttft_counts_{};  // last: +Inf
  std::atomic<int64_t> ttft_sum_us_{0};
};

}  // namespace mx::server
