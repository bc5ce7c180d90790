// HttpRequest / HttpResponse: what a route handler sees and fills in,
// independent of the transport below (http_transport.h).
//
// A handler runs on a worker thread and may block (e.g. on generation). A
// response is either a whole body, or a stream: a function that the worker
// calls after the handler returns, writing body pieces through a BodyWriter
// (sent with chunked transfer coding). BodyWriter::Write blocks while the
// connection's output buffer is full (back-pressure) and returns false once
// the client has gone.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mx::server {

// ASCII lower case (header names, schemes, hosts; HTTP is case-insensitive
// only over ASCII).
std::string AsciiLower(std::string_view s);
// Without leading and trailing spaces and tabs (HTTP's optional whitespace).
std::string_view TrimOws(std::string_view s);

// Shared between the transport (which sees the socket) and the worker that
// answers the request: whether the client went away, and what to run then.
// Thread-safety: all methods may be called from any thread.
class Exchange {
 public:
  // Runs `fn` once when the client disconnects, on the transport's thread (so
  // `fn` must be quick and must not block), or at once when it already has.
  void OnDisconnect(std::function<void()> fn);
  bool disconnected() const;
  // Transport: marks the client gone and runs the callbacks (once).
  void MarkDisconnected();

 private:
  mutable std::mutex mu_;
  bool disconnected_ = false;
  std::vector<std::function<void()>> callbacks_;
};

// Who made a request, as its API key says (HttpServer::Handle sets it; see
// api_keys.h). Without API keys the tenant is "" and nothing is trusted.
struct Caller {
  std::string tenant;
  bool trusted = false;  // may name its end users in the OpenAI `user` field
};

struct HttpRequest {
  std::string method;   // GET, POST, HEAD, ... (HEAD runs the GET handler; its body is not sent)
  std::string path;     // percent-encoded, as sent, without the query
  std::string query;    // after '?', without it
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-case
  std::string body;
  std::vector<std::string> matches;  // [0] the path, [1..] the decoded {param} segments of the route
  std::string remote_addr;           // "127.0.0.1:54321"
  Caller caller;                     // set by the server before the route's handler runs
  std::shared_ptr<Exchange> exchange;

  // The first value of header `name` (any case), "" when absent.
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  // See Exchange::OnDisconnect; nothing happens when there is no exchange.
  void OnDisconnect(std::function<void()> fn) const {
    if (exchange) exchange->OnDisconnect(std::move(fn));
  }
};

class BodyWriter {
 public:
  virtual ~BodyWriter() = default;
  // Queues `data` for the client; blocks while the output buffer is full.
  // False once the client is gone (nothing more will be sent).
  virtual bool Write(std::string_view data) = 0;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // besides Content-Length/Type and framing
  std::string content_type;
  std::string body;
  // Appended to the request's log line when not empty (e.g. "tenant acme").
  std::string log_note;
  // Set for a streamed body: called once on the worker after the handler.
  std::function<void(BodyWriter&)> stream;

  void set_header(std::string name, std::string value);
  void set_content(std::string body_text, std::string type) {
    body = std::move(body_text);
    content_type = std::move(type);
  }
  void set_stream(std::string type, std::function<void(BodyWriter&)> fn) {
    content_type = std::move(type);
    stream = std::move(fn);
  }
};

}  // namespace mx::server
