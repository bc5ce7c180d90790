// RequestParser: an incremental HTTP/1.1 request parser over bytes, with
// every limit enforced as the bytes arrive (never after buffering them).
//
//   RequestParser p(limits);
//   size_t used = p.Feed(bytes);        // call again with more bytes
//   if (p.failed()) answer p.error_status() and close;
//   if (p.done())   handle p.request(); keep bytes[used..] for the next
//                   (pipelined) request; p.Reset();
//
// What it accepts (RFC 9112, strictly where leniency invites smuggling):
// - request line `METHOD SP /origin-form SP HTTP/1.0|1.1` (or `*` for
//   OPTIONS); lines end in CRLF or a bare LF; empty lines before a request
//   are skipped;
// - header fields `name: value`: token names, no space before the colon, no
//   obsolete line folding, no control characters but HTAB in values;
// - bodies framed by one Content-Length, or by `Transfer-Encoding: chunked`
//   (chunk extensions skipped, trailers read and dropped); both at once is
//   an error; a request with neither has an empty body.
// Limits: head bytes (request line + headers; trailers count too), header
// count, body bytes after decoding for every framing. A Content-Length over
// the limit fails as soon as the head is read.
//
// Errors: 400 malformed, 413 body too large, 414 request line too long, 431
// head too large or too many fields, 417 unknown expectation, 501 unknown
// transfer coding, 505 other HTTP versions. After an error the parser stays
// failed until Reset(); the connection should be closed.
//
// Thread-safety: none (one parser per connection, used by one thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mx::server {

struct HttpLimits {
  size_t max_request_line_bytes = 8 << 10;
  size_t max_head_bytes = 32 << 10;  // request line + header fields (+ trailers)
  size_t max_headers = 64;
  size_t max_body_bytes = 8u << 20;  // after chunked decoding too
};

struct ParsedRequest {
  std::string method;   // e.g. GET
  std::string target;   // as sent: /path?query
  std::string path;     // target before '?', still percent-encoded
  std::string query;    // after '?', without it
  int version_minor = 1;  // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed
  std::string body;
  bool keep_alive = true;       // from the version and Connection
  bool expect_continue = false;  // Expect: 100-continue
  bool chunked = false;
};

class RequestParser {
 public:
  explicit RequestParser(const HttpLimits& limits) : limits_(limits) {}

  // Consumes a prefix of `data` and returns its length. Stops right after a
  // complete request (bytes after it belong to the next one) or at an error.
  size_t Feed(std::string_view data);

  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kError; }
  // The head has been read (the body may still be coming): the request line,
  // headers and framing of request() are final.
  bool head_done() const { return state_ != State::kHead && state_ != State::kError; }
  // Some bytes of a request have arrived (not just empty lines).
  bool started() const { return started_; }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }
  // REQUIRES: head_done(). Valid until Reset().
  ParsedRequest& request() { return req_; }
  // Ready for the next request on the same connection.
  void Reset();

 private:
  enum class State { kHead, kBody, kChunkSize, kChunkData, kChunkDataEnd, kTrailers, kDone, kError };

  size_t FeedHead(std::string_view data);
  void ParseHead();
  bool ParseRequestLine(std::string_view line);
  bool ParseHeaderLine(std::string_view line);
  void ApplyFraming();
  // Reads one line (up to LF) into line_; true when complete. Fails with
  // `status` once the line exceeds `max` bytes.
  bool TakeLine(std::string_view data, size_t* used, size_t max, int status);
  void Fail(int status, std::string message);

  HttpLimits limits_;
  State state_ = State::kHead;
  ParsedRequest req_;
  std::string head_;       // head bytes so far, up to and including the blank line
  size_t scan_from_ = 0;   // where to look for the end of the head in head_
  std::string line_;       // a chunk-size or trailer line being read
  uint64_t remaining_ = 0;  // body or chunk bytes still to read
  size_t trailer_bytes_ = 0;
  size_t trailer_count_ = 0;
  bool started_ = false;
  int error_status_ = 0;
  std::string error_message_;
};

// Decodes %XX escapes (and nothing else: '+' stays '+'). False on a bad escape.
bool PercentDecode(std::string_view in, std::string* out);

}  // namespace mx::server
