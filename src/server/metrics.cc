#include "server/metrics.h"

#include <sstream>

namespace mx::server {

std::string PromLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\xEF\xBF\xBD";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

void Metrics::ObserveTtft(double seconds) {
  size_t i = 0;
  while (i < kTtftBuckets.size() && seconds > kTtftBuckets[i]) ++i;
  ttft_counts_[i].fetch_add(1);
  ttft_sum_us_.fetch_add(static_cast<int64_t>(seconds * 1e6));
}

std::string Metrics::Render() const {
  std::ostringstream o;
  o << "# HELP matricxon_requests_total HTTP requests received.\n"
    << "# TYPE matricxon_requests_total counter\n"
    << "matricxon_requests_total " << requests_.load() << "\n"
    << "# HELP matricxon_prompt_tokens_total Prompt tokens read.\n"
    << "# TYPE matricxon_prompt_tokens_total counter\n"
    << "matricxon_prompt_tokens_total " << prompt_tokens_.load() << "\n"
    << "# HELP matricxon_prompt_tokens_reused_total Prompt tokens taken from the prompt cache instead of read.\n"
    << "# TYPE matricxon_prompt_tokens_reused_total counter\n"
    << "matricxon_prompt_tokens_reused_total " << reused_tokens_.load() << "\n"
    << "# HELP matricxon_tokens_generated_total Tokens generated.\n"
    << "# TYPE matricxon_tokens_generated_total counter\n"
    << "matricxon_tokens_generated_total " << generated_.load() << "\n"
    << "# HELP matricxon_time_to_first_token_seconds Time from request to first generated token.\n"
    << "# TYPE matricxon_time_to_first_token_seconds histogram\n";
  int64_t cumulative = 0;
  for (size_t i = 0; i <= kTtftBuckets.size(); ++i) {
    cumulative += ttft_counts_[i].load();
    o << "matricxon_time_to_first_token_seconds_bucket{le=\"";
    if (i < kTtftBuckets.size()) {
      o << kTtftBuckets[i];
    } else {
      o << "+Inf";
    }
    o << "\"} " << cumulative << "\n";
  }
  o << "matricxon_time_to_first_token_seconds_sum " << static_cast<double>(ttft_sum_us_.load()) / 1e6 << "\n"
    << "matricxon_time_to_first_token_seconds_count " << cumulative << "\n";
  return o.str();
}

}  // namespace mx::server
