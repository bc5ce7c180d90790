// Internal to the HTTP transport (http_transport.cc: the event loop, reading
// and parsing; http_transport_reply.cc: running handlers and writing their
// replies). Not part of the server's interface: include http_transport.h.
#pragma once

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/env.h"
#include "server/http_transport.h"
#include "server/worker_pool.h"

namespace mx::server {

// One client connection. Fields marked (loop) belong to the event loop;
// the rest are guarded by mu and shared with the worker answering it.
struct Conn {
  Conn(uint64_t id_, int fd_, const HttpLimits& limits) : id(id_), parser(limits), fd(fd_) {}

  enum class Phase { kIdle, kReading, kInFlight, kLinger };

  const uint64_t id;
  std::string peer;    // client address, for the per-client limit
  std::string remote;  // address:port, for log lines

  // (loop)
  std::string in;
  RequestParser parser;
  Phase phase = Phase::kIdle;
  uint64_t since_us = 0;  // idle since / first byte of the request / linger start
  bool read_shut = false;  // the client sent FIN
  bool sent_continue = false;
  bool wr_shut = false;    // we sent FIN (lingering)
  uint32_t interest = 0;   // registered epoll events
  size_t lingered = 0;     // bytes discarded while lingering
  size_t body_bytes = 0;   // of the request being received, counted in receiving_bytes_
  std::shared_ptr<Exchange> exchange;  // of the request in flight

  // (mu)
  std::mutex mu;
  std::condition_variable drained;  // out shrank, or the connection died
  int fd;                           // -1 once closed
  std::string out;                  // bytes not yet taken by the socket
  uint64_t out_progress_us = 0;     // when `out` last became non-empty or shrank (NowMicros)
  bool dead = false;                // closed, or a write failed
  bool reply_done = false;          // the worker queued the last byte of its reply
  bool close_after = false;         // close once the reply is out
  bool queued = false;              // on the loop's ready list
};

class HttpTransport::Impl {
 public:
  Impl(TransportOptions options, Env* env, HttpHandler handler, ErrorRenderer render_error)
      : options_(std::move(options)),
        env_(env),
        handler_(std::move(handler)),
        render_error_(std::move(render_error)),
        workers_(options_.max_connections) {}

  ~Impl() {
    if (listen_fd_ >= 0) close(listen_fd_);
    if (epoll_fd_ >= 0) close(epoll_fd_);
    if (wake_fd_ >= 0) close(wake_fd_);
  }

  Status Bind();
  void Run();
  void Stop() {
    stopping_.store(true);
    Wake();
  }
  int port() const { return port_; }

  // Worker side: queues bytes for `c`; when `last`, the reply is complete.
  // False once the client is gone.
  bool Send(const std::shared_ptr<Conn>& c, std::string_view data, bool last, bool close_after);
  bool Send(const std::shared_ptr<Conn>& c, std::string&& data, bool last, bool close_after);
  // Blocks until `c`'s output buffer is below the limit; false when it died.
  bool WaitForRoom(const std::shared_ptr<Conn>& c);

 private:
  void Wake() {
    uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof(one));
    (void)ignored;
  }
  void Accept();
  bool MakeRoom(const std::string& peer);
  void OnEvents(const std::shared_ptr<Conn>& c, uint32_t events);
  void OnReadable(const std::shared_ptr<Conn>& c, uint32_t events);
  void ProcessInput(const std::shared_ptr<Conn>& c);
  void Dispatch(const std::shared_ptr<Conn>& c);
  void RunRequest(std::shared_ptr<Conn> c, HttpRequest req, bool keep_alive, bool http10);
  void OnReady(const std::shared_ptr<Conn>& c);
  // Writes what the socket takes. REQUIRES: c->mu held.
  void FlushLocked(Conn& c);
  void AnswerError(const std::shared_ptr<Conn>& c, int status, const std::string& message);
  void StartLinger(const std::shared_ptr<Conn>& c);
  void SetInterest(Conn& c);
  // Brings c.body_bytes (and receiving_bytes_) up to date with its parser.
  void CountBody(Conn& c) {
    const size_t now = c.parser.head_done() && !c.parser.failed() ? c.parser.request().body.size() : 0;
    receiving_bytes_ = receiving_bytes_ - c.body_bytes + now;
    c.body_bytes = now;
  }
  void Close(const std::shared_ptr<Conn>& c);
  void Sweep(uint64_t now);
  std::string ErrorResponse(int status, const std::string& message, bool close);

  TransportOptions options_;
  Env* env_;  // the clock
  HttpHandler handler_;
  ErrorRenderer render_error_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  bool listening_ = true;          // (loop) the listen socket is in the epoll set
  uint64_t resume_accept_us_ = 0;  // (loop) after EMFILE
  uint64_t next_id_ = 2;
  std::unordered_map<uint64_t, std::shared_ptr<Conn>> conns_;  // (loop)
  std::map<std::string, int> per_peer_;                        // (loop)
  int in_flight_ = 0;                                          // (loop)
  size_t receiving_bytes_ = 0;  // (loop) body bytes of requests still being received
  std::mutex ready_mu_;
  std::vector<std::shared_ptr<Conn>> ready_;  // guarded by ready_mu_
  WorkerPool workers_;
};

}  // namespace mx::server
