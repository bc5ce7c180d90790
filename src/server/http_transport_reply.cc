// The HTTP transport's reply side: running a request's handler on a worker,
// serializing its response (whole or as chunks, with back-pressure), and
// writing queued bytes when the socket takes them.
#include "server/http_transport_impl.h"

#include "core/logging.h"

namespace mx::server {

const char* ReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

namespace {

// Header values from handlers never carry line breaks onto the wire.
std::string CleanHeaderValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (static_cast<unsigned char>(c) >= 0x20 || c == '\t') out.push_back(c);
  }
  return out;
}


// Writes a streamed body as HTTP/1.1 chunks, or raw for HTTP/1.0 (whose
// body then ends when the connection closes).
class ChunkWriter : public BodyWriter {
 public:
  ChunkWriter(HttpTransport::Impl* impl, std::shared_ptr<Conn> c, bool chunked)
      : impl_(impl), c_(std::move(c)), chunked_(chunked) {}
  bool Write(std::string_view data) override;

 private:
  HttpTransport::Impl* impl_;
  std::shared_ptr<Conn> c_;
  bool chunked_;
};

}  // namespace

bool ChunkWriter::Write(std::string_view data) {
  if (data.empty()) return true;
  if (!impl_->WaitForRoom(c_)) return false;
  if (!chunked_) return impl_->Send(c_, data, false, false);
  char size[24];
  const int n = std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
  std::string framed;
  framed.reserve(static_cast<size_t>(n) + data.size() + 2);
  framed.append(size, static_cast<size_t>(n));
  framed.append(data);
  framed.append("\r\n");
  return impl_->Send(c_, std::move(framed), false, false);
}

void HttpTransport::Impl::RunRequest(std::shared_ptr<Conn> c, HttpRequest req, bool keep_alive, bool http10) {
  const uint64_t t0 = env_->NowMicros();
  HttpResponse res;
  try {
    handler_(req, res);
  } catch (const std::exception& e) {
    res = HttpResponse();
    res.status = 500;
    res.set_content(render_error_(500, std::string("internal error: ") + e.what()), "application/json");
  } catch (...) {
    res = HttpResponse();
    res.status = 500;
    res.set_content(render_error_(500, "internal error"), "application/json");
  }
  const bool head_only = req.method == "HEAD";
  const bool no_body = head_only || res.status == 204 || res.status == 304 || res.status < 200;
  const bool stream = res.stream != nullptr && !no_body;
  // HTTP/1.0 clients get a whole body, or a stream that ends when the connection closes.
  const bool chunked = stream && !http10;
  if (http10 && keep_alive && !stream) res.set_header("Connection", "keep-alive");
  std::string head = "HTTP/1.1 " + std::to_string(res.status) + " " + ReasonPhrase(res.status) + "\r\n";
  for (const auto& [k, v] : res.headers) head += k + ": " + CleanHeaderValue(v) + "\r\n";
  if (!res.content_type.empty()) head += "Content-Type: " + CleanHeaderValue(res.content_type) + "\r\n";
  if (res.stream != nullptr) {
    if (chunked) head += "Transfer-Encoding: chunked\r\n";
  } else if (res.status != 204 && res.status != 304 && res.status >= 200) {
    head += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
  }
  const bool close = !keep_alive || (stream && !chunked);
  if (close) head += "Connection: close\r\n";
  head += "\r\n";
  if (!stream) {
    // The body is handed over, not copied (a large reply would otherwise
    // be held two or three times over).
    Send(c, head, no_body, no_body && close);
    if (!no_body) Send(c, std::move(res.body), true, close);
  } else {
    Send(c, head, false, false);
    ChunkWriter writer(this, c, chunked);
    res.stream(writer);
    Send(c, std::string_view(chunked ? "0\r\n\r\n" : ""), true, close);
  }
  const double ms = static_cast<double>(env_->NowMicros() - t0) / 1000.0;
  MX_LOG(kInfo) << req.remote_addr << " " << req.method << " " << req.path << " -> " << res.status << " ("
                << static_cast<int64_t>(ms) << " ms" << (req.exchange->disconnected() ? ", client gone" : "")
                << (res.log_note.empty() ? "" : ", ") << res.log_note << ")";
}

bool HttpTransport::Impl::WaitForRoom(const std::shared_ptr<Conn>& c) {
  std::unique_lock<std::mutex> lock(c->mu);
  c->drained.wait(lock, [&] { return c->dead || c->out.size() <= options_.max_output_buffer_bytes; });
  return !c->dead;
}

bool HttpTransport::Impl::Send(const std::shared_ptr<Conn>& c, std::string_view data, bool last, bool close_after) {
  return Send(c, std::string(data), last, close_after);
}

bool HttpTransport::Impl::Send(const std::shared_ptr<Conn>& c, std::string&& data, bool last, bool close_after) {
  bool wake = false;
  bool alive = true;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    if (last) {
      c->reply_done = true;
      c->close_after = c->close_after || close_after;
      wake = true;
    }
    if (c->dead) {
      alive = false;
    } else {
      if (c->out.empty()) {
        c->out_progress_us = env_->NowMicros();
        c->out = std::move(data);
      } else {
        c->out.append(data);
      }
      FlushLocked(*c);  // straight to the socket when it takes it
      alive = !c->dead;
      if (!c->out.empty() || c->dead) wake = true;  // the loop waits for EPOLLOUT, or cleans up
    }
    if (wake && !c->queued) {
      c->queued = true;
    } else {
      wake = false;
    }
  }
  if (wake) {
    {
      std::lock_guard<std::mutex> lock(ready_mu_);
      ready_.push_back(c);
    }
    Wake();
  }
  return alive;
}

void HttpTransport::Impl::FlushLocked(Conn& c) {
  size_t off = 0;
  while (off < c.out.size() && !c.dead) {
    const ssize_t n = send(c.fd, c.out.data() + off, c.out.size() - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else {
      c.dead = true;
    }
  }
  if (off > 0) {
    c.out.erase(0, off);
    c.out_progress_us = env_->NowMicros();
  }
  if (c.dead) c.out.clear();
  if (off > 0 || c.dead) c.drained.notify_all();
}

// Loop side: after a worker queued bytes or finished, or after socket events.
std::string HttpTransport::Impl::ErrorResponse(int status, const std::string& message, bool close) {
  const std::string body = render_error_(status, message);
  std::string r = "HTTP/1.1 " + std::to_string(status) + " " + ReasonPhrase(status) +
                  "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  if (close) r += "Connection: close\r\n";
  return r + "\r\n" + body;
}

// Answers a request the parser refused (or that ran out of time), then
// closes gracefully: the rest of what the client sends is read and dropped
// for a moment, so that the answer is not lost to a reset.
void HttpTransport::Impl::AnswerError(const std::shared_ptr<Conn>& c, int status, const std::string& message) {
  MX_LOG(kInfo) << c->remote << " " << (c->parser.head_done() ? c->parser.request().method : std::string("-"))
                << " " << (c->parser.head_done() ? c->parser.request().path : std::string("-")) << " -> " << status
                << " (" << message << ")";
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->out += ErrorResponse(status, message, true);
    FlushLocked(*c);
  }
  StartLinger(c);
  OnReady(c);
}


}  // namespace mx::server
