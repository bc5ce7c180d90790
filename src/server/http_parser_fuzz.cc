// libFuzzer target: the HTTP request parser (tests/fuzz/README.md). The
// input is fed in pieces whose sizes come from its first byte, requests are
// parsed one after another as on a keep-alive connection, and every parsed
// request's fields are read, so AddressSanitizer sees any bad access.
// Invariants checked: the parser never consumes more than it was given, and
// never holds a head or body over its limits.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/http_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = 1 + data[0] % 64;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  mx::server::HttpLimits limits;
  limits.max_head_bytes = 2048;
  limits.max_request_line_bytes = 512;
  limits.max_headers = 16;
  limits.max_body_bytes = 4096;
  mx::server::RequestParser p(limits);
  size_t pos = 0;
  int requests = 0;
  while (pos < in.size() && requests < 64) {
    const std::string_view piece = in.substr(pos, std::min(step, in.size() - pos));
    const size_t used = p.Feed(piece);
    if (used > piece.size()) std::abort();
    pos += used;
    if (p.failed()) {
      if (p.error_status() < 400 || p.error_status() > 505) std::abort();
      break;
    }
    if (p.done()) {
      const mx::server::ParsedRequest& r = p.request();
      if (r.body.size() > limits.max_body_bytes || r.headers.size() > limits.max_headers) std::abort();
      size_t total = r.method.size() + r.path.size() + r.query.size();
      for (const auto& [k, v] : r.headers) total += k.size() + v.size();
      if (total > limits.max_head_bytes) std::abort();
      std::string decoded;
      (void)mx::server::PercentDecode(r.path, &decoded);
      ++requests;
      p.Reset();
    } else if (used == 0) {
      break;
    }
  }
  return 0;
}
