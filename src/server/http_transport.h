// HttpTransport: the HTTP/1.1 front of the server. One event-loop thread
// (epoll, non-blocking sockets) owns every connection; idle and slow
// connections cost no thread. A complete request (head and body read by
// RequestParser, every limit enforced as bytes arrive) goes to a worker
// pool, where the handler runs and may block; the response (whole, or
// streamed in chunks through a bounded per-connection output buffer) is
// written by the worker while the socket takes it and by the loop after.
//
// What the loop enforces:
// - connections: at most max_connections, and max_connections_per_client
//   per client address; at a limit the longest-waiting connection without a
//   request in flight is closed to make room, else the new one gets 503;
// - memory: body bytes being received, all connections together (503 over);
// - time: a request's head must arrive within head_timeout_ms of its first
//   byte and the whole request within request_timeout_ms (deadlines, not
//   per-read timeouts; 408 then); keep-alive connections close after
//   idle_timeout_ms without a request;
// - keep-alive and pipelining: requests on a connection are answered in
//   order, one at a time; bytes of the next request wait in its buffer;
// - disconnects: a client that closes (or half-closes) its socket while its
//   request is in flight marks the request's Exchange disconnected at once;
// - sockets: TCP_NODELAY, SO_REUSEADDR but never SO_REUSEPORT (a port in use
//   is an error).
//
// Thread-safety: Stop() may be called from any thread; the rest from the
// thread that owns the transport.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/env.h"
#include "core/status.h"
#include "server/http_parser.h"
#include "server/http_types.h"

namespace mx::server {

struct TransportOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port
  HttpLimits limits;
  int max_connections = 1024;
  int max_connections_per_client = 256;
  int64_t head_timeout_ms = 10000;
  int64_t request_timeout_ms = 60000;
  int64_t idle_timeout_ms = 30000;
  size_t max_output_buffer_bytes = 256 << 10;  // a stream's writer waits above this
  // A connection whose client takes none of the bytes waiting for it for
  // this long is closed (its request, if still running, is cancelled).
  int64_t write_timeout_ms = 60000;
  // Body bytes of all requests still being received, together; the request
  // that would pass it gets 503 (so many large uploads at once cannot
  // exhaust memory: the per-request limit times max_connections would be GiB).
  size_t max_receiving_bytes = 256u << 20;
  int64_t drain_timeout_ms = 10000;  // Stop(): how long replies in flight may take before they are cut
};

using HttpHandler = std::function<void(HttpRequest&, HttpResponse&)>;
// The body (and its content type) of an error the transport answers itself
// (400, 408, 413, 431, 503, ...).
using ErrorRenderer = std::function<std::string(int status, const std::string& message)>;

class HttpTransport {
 public:
  // `env` gives the clock (deadlines, log timings); it must outlive the transport.
  HttpTransport(TransportOptions options, Env* env, HttpHandler handler, ErrorRenderer render_error);
  ~HttpTransport();
  HttpTransport(const HttpTransport&) = delete;
  HttpTransport& operator=(const HttpTransport&) = delete;

  // Binds and listens, exclusively. IOError naming host:port and the reason
  // (e.g. "address already in use") when that fails.
  Status Bind();
  // The bound port (after Bind).
  int port() const;
  // Serves until Stop(): then stops accepting, closes idle connections, lets
  // replies in flight finish (up to drain_timeout_ms, then cancels them) and
  // returns once every worker is done.
  void Run();
  void Stop();

  class Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// "Not Found" for 404, ...; "Unknown" when the code has no phrase here.
const char* ReasonPhrase(int status);

}  // namespace mx::server
