#include "server/http_parser.h"

#include <algorithm>

#include "server/http_types.h"

namespace mx::server {
namespace {

bool IsTokenChar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-': case '.':
    case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return IsTokenChar(static_cast<unsigned char>(c)); });
}

// Strips the line's LF and an optional CR before it.
std::string_view Chomp(std::string_view line) {
  if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

bool EndsWithCrlf(std::string_view line) { return line.size() >= 2 && line.substr(line.size() - 2) == "\r\n"; }

// RFC 9112 §7.1.1: *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] ),
// `ext` starting at its first ';'. Quoted strings must close; their escapes
// take any visible byte.
bool ValidChunkExtensions(std::string_view ext) {
  size_t i = 0;
  auto skip_ws = [&] {
    while (i < ext.size() && (ext[i] == ' ' || ext[i] == '\t')) ++i;
  };
  auto token = [&] {
    const size_t from = i;
    while (i < ext.size() && IsTokenChar(static_cast<unsigned char>(ext[i]))) ++i;
    return i > from;
  };
  while (true) {
    skip_ws();
    if (i == ext.size()) return true;
    if (ext[i] != ';') return false;
    ++i;
    skip_ws();
    if (!token()) return false;
    skip_ws();
    if (i == ext.size() || ext[i] != '=') continue;
    ++i;
    skip_ws();
    if (i < ext.size() && ext[i] == '"') {
      ++i;
      bool closed = false;
      while (i < ext.size() && !closed) {
        const auto c = static_cast<unsigned char>(ext[i]);
        if (c == '"') {
          closed = true;
        } else if (c == '\\') {
          if (++i == ext.size()) return false;
        } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
          return false;
        }
        ++i;
      }
      if (!closed) return false;
    } else if (!token()) {
      return false;
    }
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// True when `list` (a comma-separated header value) holds `token`, case-insensitively.
bool ListHas(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = TrimOws(list.substr(0, comma));
    if (AsciiLower(item) == token) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

bool PercentDecode(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    const int hi = HexValue(in[i + 1]);
    const int lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

void RequestParser::Reset() {
  state_ = State::kHead;
  req_ = ParsedRequest();
  head_.clear();
  scan_from_ = 0;
  line_.clear();
  remaining_ = 0;
  trailer_bytes_ = 0;
  trailer_count_ = 0;
  started_ = false;
  error_status_ = 0;
  error_message_.clear();
}

void RequestParser::Fail(int status, std::string message) {
  state_ = State::kError;
  error_status_ = status;
  error_message_ = std::move(message);
}

size_t RequestParser::Feed(std::string_view data) {
  size_t used = 0;
  while (used < data.size() && state_ != State::kDone && state_ != State::kError) {
    std::string_view rest = data.substr(used);
    switch (state_) {
      case State::kHead:
        used += FeedHead(rest);
        break;
      case State::kBody: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, rest.size()));
        req_.body.append(rest.data(), n);
        remaining_ -= n;
        used += n;
        if (remaining_ == 0) state_ = State::kDone;
        break;
      }
      case State::kChunkSize: {
        size_t n = 0;
        const bool complete = TakeLine(rest, &n, 4096, 400);
        used += n;
        if (!complete) break;
        if (!EndsWithCrlf(line_)) {
          Fail(400, "a chunk size line must end with CRLF");
          break;
        }
        std::string_view line = Chomp(line_);
        const size_t semicolon = line.find(';');
        if (semicolon != std::string_view::npos && !ValidChunkExtensions(line.substr(semicolon))) {
          Fail(400, "malformed chunk extension");
          break;
        }
        line = line.substr(0, semicolon);  // well-formed chunk extensions are skipped
        line = TrimOws(line);
        if (line.empty() || line.size() > 16) {
          Fail(400, "bad chunk size line");
          break;
        }
        uint64_t size = 0;
        for (char c : line) {
          const int v = HexValue(c);
          if (v < 0) {
            Fail(400, "bad chunk size line");
            break;
          }
          size = size * 16 + static_cast<uint64_t>(v);
        }
        if (failed()) break;
        line_.clear();
        if (size > limits_.max_body_bytes - req_.body.size()) {
          Fail(413, "the request body is larger than the server accepts (" + std::to_string(limits_.max_body_bytes) +
                        " bytes)");
          break;
        }
        if (size == 0) {
          state_ = State::kTrailers;
        } else {
          remaining_ = size;
          state_ = State::kChunkData;
        }
        break;
      }
      case State::kChunkData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, rest.size()));
        req_.body.append(rest.data(), n);
        remaining_ -= n;
        used += n;
        if (remaining_ == 0) state_ = State::kChunkDataEnd;
        break;
      }
      case State::kChunkDataEnd: {
        size_t n = 0;
        const bool complete = TakeLine(rest, &n, 2, 400);
        used += n;
        if (!complete) break;
        if (line_ != "\r\n") {
          Fail(400, "chunk data is not followed by CRLF");
          break;
        }
        line_.clear();
        state_ = State::kChunkSize;
        break;
      }
      case State::kTrailers: {
        size_t n = 0;
        const size_t room = limits_.max_head_bytes > head_.size() + trailer_bytes_
                                ? limits_.max_head_bytes - head_.size() - trailer_bytes_
                                : 0;
        const bool complete = TakeLine(rest, &n, room, 431);
        used += n;
        if (!complete) break;
        trailer_bytes_ += line_.size();
        if (!EndsWithCrlf(line_)) {
          Fail(400, "a trailer line must end with CRLF");
          break;
        }
        std::string_view line = Chomp(line_);
        if (line.empty()) {
          line_.clear();
          state_ = State::kDone;
          break;
        }
        // Trailer fields are checked like header fields, counted, then dropped.
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
          Fail(400, "bad trailer field");
          break;
        }
        if (++trailer_count_ + req_.headers.size() > limits_.max_headers) {
          Fail(431, "too many header fields (at most " + std::to_string(limits_.max_headers) + ")");
          break;
        }
        line_.clear();
        break;
      }
      case State::kDone:
      case State::kError:
        break;
    }
  }
  return used;
}

bool RequestParser::TakeLine(std::string_view data, size_t* used, size_t max, int status) {
  const size_t lf = data.find('\n');
  const size_t take = lf == std::string_view::npos ? data.size() : lf + 1;
  if (line_.size() + take > max) {
    Fail(status, status == 431 ? "the request head is larger than the server accepts" : "line too long");
    *used = take;
    return false;
  }
  line_.append(data.data(), take);
  *used = take;
  return lf != std::string_view::npos;
}

size_t RequestParser::FeedHead(std::string_view data) {
  size_t used = 0;
  // Empty lines before a request line are skipped (RFC 9112 §2.2).
  if (head_.empty()) {
    while (used < data.size() && (data[used] == '\r' || data[used] == '\n')) ++used;
    if (used == data.size()) return used;
  }
  started_ = true;
  // Copy no more than the head may hold, plus one byte to tell "too large".
  const size_t room = limits_.max_head_bytes + 1 - std::min(head_.size(), limits_.max_head_bytes + 1);
  const size_t take = std::min(room, data.size() - used);
  head_.append(data.data() + used, take);
  // The head ends at the first empty line: "\n\n" or "\n\r\n".
  size_t end = std::string::npos;
  for (size_t i = scan_from_; i < head_.size(); ++i) {
    if (head_[i] != '\n') continue;
    if (i + 1 < head_.size() && head_[i + 1] == '\n') {
      end = i + 2;
      break;
    }
    if (i + 2 < head_.size() && head_[i + 1] == '\r' && head_[i + 2] == '\n') {
      end = i + 3;
      break;
    }
  }
  if (end == std::string::npos) {
    const size_t line_end = head_.find('\n');
    if (line_end == std::string::npos && head_.size() > limits_.max_request_line_bytes) {
      Fail(414, "the request line is longer than the server accepts (" +
                    std::to_string(limits_.max_request_line_bytes) + " bytes)");
    } else if (head_.size() > limits_.max_head_bytes) {
      Fail(431, "the request head is larger than the server accepts (" + std::to_string(limits_.max_head_bytes) +
                    " bytes)");
    }
    // Resume the search where an end could still start (the last 2 bytes).
    scan_from_ = head_.size() >= 2 ? head_.size() - 2 : 0;
    return used + take;
  }
  // Bytes copied past the head's end belong to the body: give them back.
  const size_t extra = head_.size() - end;
  head_.resize(end);
  if (head_.size() > limits_.max_head_bytes) {
    Fail(431, "the request head is larger than the server accepts (" + std::to_string(limits_.max_head_bytes) +
                  " bytes)");
    return used + take - extra;
  }
  ParseHead();
  return used + take - extra;
}

void RequestParser::ParseHead() {
  std::string_view head = head_;
  bool first = true;
  while (!head.empty()) {
    const size_t lf = head.find('\n');
    std::string_view line = Chomp(head.substr(0, lf + 1));
    head.remove_prefix(lf + 1);
    if (line.empty()) break;  // the blank line that ends the head
    if (first) {
      first = false;
      if (line.size() > limits_.max_request_line_bytes) {
        Fail(414, "the request line is longer than the server accepts (" +
                      std::to_string(limits_.max_request_line_bytes) + " bytes)");
        return;
      }
      if (!ParseRequestLine(line)) return;
    } else if (!ParseHeaderLine(line)) {
      return;
    }
  }
  ApplyFraming();
}

bool RequestParser::ParseRequestLine(std::string_view line) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    Fail(400, "malformed request line");
    return false;
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) {
    Fail(400, "malformed request method");
    return false;
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/") {
    Fail(400, "malformed HTTP version");
    return false;
  }
  if (version == "HTTP/1.1") {
    req_.version_minor = 1;
  } else if (version == "HTTP/1.0") {
    req_.version_minor = 0;
  } else {
    Fail(505, "only HTTP/1.0 and HTTP/1.1 are served");
    return false;
  }
  for (char c : target) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) {
      Fail(400, "the request target holds a byte that is not visible ASCII");
      return false;
    }
  }
  if (target.empty() || (target[0] != '/' && !(target == "*" && method == "OPTIONS"))) {
    Fail(400, "the request target must be a path starting with '/'");
    return false;
  }
  req_.method = std::string(method);
  req_.target = std::string(target);
  const size_t q = target.find('?');
  req_.path = std::string(target.substr(0, q));
  req_.query = q == std::string_view::npos ? "" : std::string(target.substr(q + 1));
  const size_t hash = req_.query.find('#');
  if (hash != std::string::npos) req_.query.resize(hash);
  return true;
}

bool RequestParser::ParseHeaderLine(std::string_view line) {
  if (line[0] == ' ' || line[0] == '\t') {
    Fail(400, "obsolete header line folding is not accepted");
    return false;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
    Fail(400, "malformed header field");
    return false;
  }
  std::string_view value = TrimOws(line.substr(colon + 1));
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f) {
      Fail(400, "a header value holds a control character");
      return false;
    }
  }
  if (req_.headers.size() >= limits_.max_headers) {
    Fail(431, "too many header fields (at most " + std::to_string(limits_.max_headers) + ")");
    return false;
  }
  req_.headers.emplace_back(AsciiLower(line.substr(0, colon)), std::string(value));
  return true;
}

void RequestParser::ApplyFraming() {
  const std::string* content_length = nullptr;
  const std::string* transfer_encoding = nullptr;
  const std::string* connection = nullptr;
  int hosts = 0;
  for (const auto& [name, value] : req_.headers) {
    if (name == "content-length") {
      if (content_length != nullptr && *content_length != value) {
        Fail(400, "conflicting Content-Length fields");
        return;
      }
      content_length = &value;
    } else if (name == "transfer-encoding") {
      if (transfer_encoding != nullptr) {
        Fail(400, "more than one Transfer-Encoding field");
        return;
      }
      transfer_encoding = &value;
    } else if (name == "connection") {
      connection = &value;
    } else if (name == "host") {
      ++hosts;
    } else if (name == "authorization" || name == "origin") {
      // The server decides on these: a proxy that reads the other copy
      // would see another caller or another page.
      if (std::count_if(req_.headers.begin(), req_.headers.end(), [&](const auto& h) { return h.first == name; }) > 1) {
        Fail(400, "more than one " + std::string(name == "origin" ? "Origin" : "Authorization") + " field");
        return;
      }
    } else if (name == "expect") {
      if (AsciiLower(value) != "100-continue") {
        Fail(417, "only 'Expect: 100-continue' is understood");
        return;
      }
      req_.expect_continue = req_.version_minor >= 1;
    }
  }
  if (hosts > 1 || (hosts == 0 && req_.version_minor >= 1)) {
    Fail(400, hosts > 1 ? "more than one Host field" : "HTTP/1.1 requests need a Host field");
    return;
  }
  if (req_.version_minor >= 1) {
    req_.keep_alive = connection == nullptr || !ListHas(*connection, "close");
  } else {
    req_.keep_alive = connection != nullptr && ListHas(*connection, "keep-alive");
  }
  if (transfer_encoding != nullptr) {
    if (content_length != nullptr) {
      Fail(400, "a request may not carry both Content-Length and Transfer-Encoding");
      return;
    }
    if (AsciiLower(*transfer_encoding) != "chunked" || req_.version_minor == 0) {
      Fail(501, "only 'Transfer-Encoding: chunked' is understood");
      return;
    }
    req_.chunked = true;
    state_ = State::kChunkSize;
    return;
  }
  if (content_length != nullptr) {
    const std::string& v = *content_length;
    if (v.empty() || v.size() > 18 ||
        !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      Fail(400, "malformed Content-Length");
      return;
    }
    const uint64_t n = std::stoull(v);
    if (n > limits_.max_body_bytes) {
      Fail(413, "the request body is larger than the server accepts (" + std::to_string(limits_.max_body_bytes) +
                    " bytes)");
      return;
    }
    remaining_ = n;
    req_.body.reserve(static_cast<size_t>(n));
    state_ = n == 0 ? State::kDone : State::kBody;
    return;
  }
  state_ = State::kDone;  // no framing: an empty body
}

}  // namespace mx::server
