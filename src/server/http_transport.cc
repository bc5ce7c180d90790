#include "server/http_transport.h"

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

constexpr uint64_t kListenId = 0;
constexpr uint64_t kWakeId = 1;
constexpr size_t kReadChunk = 64 << 10;
// Bytes buffered ahead while a request is in flight (pipelining); reading
// pauses above this and resumes when the reply is done.
constexpr size_t kMaxBufferedAhead = 64 << 10;
constexpr int64_t kLingerMs = 1000;
constexpr size_t kMaxLingerBytes = 16 << 20;

// Header values from handlers never carry line breaks onto the wire.
std::string CleanHeaderValue(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (static_cast<unsigned char>(c) >= 0x20 || c == '\t') out.push_back(c);
  }
  return out;
}

// A fixed-capacity pool whose threads start when the work needs them.
class WorkerPool {
 public:
  explicit WorkerPool(int max_threads) : max_threads_(max_threads) {}
  ~WorkerPool() { Join(); }

  void Submit(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    tasks_.push_back(std::move(task));
    // Idle threads that were notified but have not taken their task yet
    // still count as idle: compare with the tasks waiting, or a request can
    // queue behind a long one (a reply) with no thread to run it.
    if (static_cast<int>(tasks_.size()) > idle_ && static_cast<int>(threads_.size()) < max_threads_) {
      threads_.emplace_back([this] { Work(); });
    }
    cv_.notify_one();
  }
  // Runs the queued tasks to the end and stops the threads.
  void Join() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    threads_.clear();
  }
  int busy() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(threads_.size()) - idle_ + static_cast<int>(tasks_.size());
  }

 private:
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      --idle_;
      if (tasks_.empty()) return;  // stop_
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      lock.lock();
    }
  }

  const int max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  int idle_ = 0;
  bool stop_ = false;
};

}  // namespace

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

Status HttpTransport::Impl::Bind() {
  const std::string where = options_.host + ":" + std::to_string(options_.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(options_.port);
  if (int rc = getaddrinfo(options_.host.c_str(), port.c_str(), &hints, &res); rc != 0) {
    return Status::IOError("cannot listen on " + where + ": " + gai_strerror(rc));
  }
  std::string error = "no address";
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    // SO_REUSEADDR lets a restarted server bind past TIME_WAIT; it never lets
    // two listeners share a port on Linux (that is SO_REUSEPORT, not set).
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
      error = std::strerror(errno);
      if (errno == EADDRINUSE) error += " (is another server running on this port?)";
      close(fd);
      continue;
    }
    listen_fd_ = fd;
    break;
  }
  freeaddrinfo(res);
  if (listen_fd_ < 0) return Status::IOError("cannot listen on " + where + ": " + error);
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len);
  port_ = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                   : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) return Status::IOError(std::string("epoll/eventfd: ") + std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = kWakeId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  return Status::Ok();
}

void HttpTransport::Impl::Run() {
  std::vector<epoll_event> events(256);
  uint64_t last_sweep = env_->NowMicros();
  uint64_t drain_deadline = 0;
  for (;;) {
    const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), 100);
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kListenId) {
        Accept();
      } else if (id == kWakeId) {
        uint64_t v;
        ssize_t ignored = read(wake_fd_, &v, sizeof(v));
        (void)ignored;
      } else if (auto it = conns_.find(id); it != conns_.end()) {
        std::shared_ptr<Conn> c = it->second;  // a copy: Close() erases the map's
        OnEvents(c, events[i].events);
      }
    }
    std::vector<std::shared_ptr<Conn>> ready;
    {
      std::lock_guard<std::mutex> lock(ready_mu_);
      ready.swap(ready_);
    }
    for (auto& c : ready) OnReady(c);
    const uint64_t now = env_->NowMicros();
    if (now - last_sweep >= 100000) {
      last_sweep = now;
      Sweep(now);
    }
    if (stopping_.load()) {
      if (drain_deadline == 0) {
        drain_deadline = now + static_cast<uint64_t>(options_.drain_timeout_ms) * 1000;
        if (listening_) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        close(listen_fd_);
        listen_fd_ = -1;
        listening_ = false;
      }
      std::vector<std::shared_ptr<Conn>> all;
      for (auto& [id, c] : conns_) all.push_back(c);
      for (auto& c : all) {
        if (c->phase != Conn::Phase::kInFlight || now > drain_deadline) Close(c);
      }
      if (conns_.empty()) break;
    }
  }
  workers_.Join();
}

void HttpTransport::Impl::Accept() {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop accepting for a moment instead of spinning.
        MX_LOG(kWarn) << "http: cannot accept a connection: " << std::strerror(errno);
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
        listening_ = false;
        resume_accept_us_ = env_->NowMicros() + 100000;
      }
      return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss.ss_family == AF_INET) {
      auto* a = reinterpret_cast<sockaddr_in*>(&ss);
      inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
      port = ntohs(a->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
      inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
      port = ntohs(a->sin6_port);
    }
    const std::string peer = host;
    if (!MakeRoom(peer)) {
      const std::string busy = ErrorResponse(503, "too many connections; try again later", true);
      ssize_t ignored = send(fd, busy.data(), busy.size(), MSG_NOSIGNAL);
      (void)ignored;
      close(fd);
      continue;
    }
    auto c = std::make_shared<Conn>(next_id_++, fd, options_.limits);
    c->peer = peer;
    c->remote = ss.ss_family == AF_INET6 ? "[" + peer + "]:" + std::to_string(port) : peer + ":" + std::to_string(port);
    c->since_us = env_->NowMicros();
    c->interest = EPOLLIN | EPOLLRDHUP;
    epoll_event ev{};
    ev.events = c->interest;
    ev.data.u64 = c->id;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      close(fd);
      continue;
    }
    conns_[c->id] = c;
    ++per_peer_[peer];
  }
}

// At a connection limit, closes the connection without a request in flight
// that has waited longest (of the same client when its own limit is hit).
bool HttpTransport::Impl::MakeRoom(const std::string& peer) {
  const bool total_full = static_cast<int>(conns_.size()) >= options_.max_connections;
  auto pp = per_peer_.find(peer);
  const bool peer_full = pp != per_peer_.end() && pp->second >= options_.max_connections_per_client;
  if (!total_full && !peer_full) return true;
  std::shared_ptr<Conn> victim;
  for (auto& [id, c] : conns_) {
    if (c->phase == Conn::Phase::kInFlight) continue;
    if (peer_full && c->peer != peer) continue;
    if (victim == nullptr || c->since_us < victim->since_us) victim = c;
  }
  if (victim == nullptr) return false;
  Close(victim);
  return true;
}

void HttpTransport::Impl::OnEvents(const std::shared_ptr<Conn>& c, uint32_t events) {
  if (events & (EPOLLERR | EPOLLHUP)) {
    Close(c);
    return;
  }
  if (events & EPOLLOUT) {
    std::lock_guard<std::mutex> lock(c->mu);
    FlushLocked(*c);
  }
  if (events & (EPOLLIN | EPOLLRDHUP)) OnReadable(c, events);
  if (conns_.count(c->id) != 0) OnReady(c);
}

void HttpTransport::Impl::OnReadable(const std::shared_ptr<Conn>& c, uint32_t events) {
  char buf[kReadChunk];
  for (;;) {
    if (c->phase == Conn::Phase::kInFlight && c->in.size() >= kMaxBufferedAhead) break;
    const ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
    if (n > 0) {
      if (c->phase == Conn::Phase::kLinger) {
        c->lingered += static_cast<size_t>(n);
        if (c->lingered > kMaxLingerBytes) {
          Close(c);
          return;
        }
        continue;
      }
      c->in.append(buf, static_cast<size_t>(n));
      if (c->phase != Conn::Phase::kInFlight) {
        ProcessInput(c);
        if (conns_.count(c->id) == 0) return;
      }
      continue;
    }
    if (n == 0) {
      c->read_shut = true;
      break;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      Close(c);
      return;
    }
    break;
  }
  // The client shut its side; bytes it sent before may still be unread
  // (reading is paused while a request is in flight): they are dropped.
  if (events & EPOLLRDHUP) c->read_shut = true;
  if (c->read_shut) {
    if (c->phase == Conn::Phase::kInFlight) {
      // The client is gone (or will send nothing more): whatever answers it
      // may stop now. The reply, if any, is still written; then we close.
      c->exchange->MarkDisconnected();
      std::lock_guard<std::mutex> lock(c->mu);
      c->close_after = true;
    } else {
      Close(c);
      return;
    }
  }
  SetInterest(*c);
}

void HttpTransport::Impl::ProcessInput(const std::shared_ptr<Conn>& c) {
  while (c->phase == Conn::Phase::kIdle || c->phase == Conn::Phase::kReading) {
    if (c->in.empty()) return;
    const size_t used = c->parser.Feed(c->in);
    c->in.erase(0, used);
    CountBody(*c);
    if (receiving_bytes_ > options_.max_receiving_bytes && !c->parser.failed()) {
      AnswerError(c, 503, "the server is receiving too many request bodies at once; try again later");
      return;
    }
    if (c->phase == Conn::Phase::kIdle && c->parser.started()) {
      c->phase = Conn::Phase::kReading;
      c->since_us = env_->NowMicros();
    }
    if (c->parser.failed()) {
      AnswerError(c, c->parser.error_status(), c->parser.error_message());
      return;
    }
    if (c->parser.head_done() && c->parser.request().expect_continue && !c->sent_continue &&
        !c->parser.done()) {
      c->sent_continue = true;
      static const std::string kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      std::lock_guard<std::mutex> lock(c->mu);
      c->out += kContinue;
      FlushLocked(*c);
    }
    if (c->parser.done()) {
      Dispatch(c);
      return;
    }
    if (used == 0) return;
  }
}

void HttpTransport::Impl::Dispatch(const std::shared_ptr<Conn>& c) {
  ParsedRequest& p = c->parser.request();
  HttpRequest req;
  req.method = std::move(p.method);
  req.path = std::move(p.path);
  req.query = std::move(p.query);
  req.headers = std::move(p.headers);
  req.body = std::move(p.body);
  req.remote_addr = c->remote;
  req.exchange = std::make_shared<Exchange>();
  const bool keep_alive = p.keep_alive && !stopping_.load();
  const bool http10 = p.version_minor == 0;
  c->exchange = req.exchange;
  c->phase = Conn::Phase::kInFlight;
  c->parser.Reset();
  CountBody(*c);
  c->sent_continue = false;
  ++in_flight_;
  SetInterest(*c);
  workers_.Submit([this, c, r = std::move(req), keep_alive, http10]() mutable {
    RunRequest(c, std::move(r), keep_alive, http10);
  });
}

namespace {

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
  return impl_->Send(c_, framed, false, false);
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
    if (!no_body) head += res.body;
    Send(c, head, true, close);
  } else {
    Send(c, head, false, false);
    ChunkWriter writer(this, c, chunked);
    res.stream(writer);
    Send(c, chunked ? "0\r\n\r\n" : "", true, close);
  }
  const double ms = static_cast<double>(env_->NowMicros() - t0) / 1000.0;
  MX_LOG(kInfo) << req.remote_addr << " " << req.method << " " << req.path << " -> " << res.status << " ("
                << static_cast<int64_t>(ms) << " ms" << (req.exchange->disconnected() ? ", client gone" : "")
                << ")";
}

bool HttpTransport::Impl::WaitForRoom(const std::shared_ptr<Conn>& c) {
  std::unique_lock<std::mutex> lock(c->mu);
  c->drained.wait(lock, [&] { return c->dead || c->out.size() <= options_.max_output_buffer_bytes; });
  return !c->dead;
}

bool HttpTransport::Impl::Send(const std::shared_ptr<Conn>& c, std::string_view data, bool last, bool close_after) {
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
      c->out.append(data);
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
  if (off > 0) c.out.erase(0, off);
  if (c.dead) c.out.clear();
  if (off > 0 || c.dead) c.drained.notify_all();
}

// Loop side: after a worker queued bytes or finished, or after socket events.
void HttpTransport::Impl::OnReady(const std::shared_ptr<Conn>& c) {
  if (conns_.count(c->id) == 0) return;  // closed already
  bool dead, pending, done, close_after;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    c->queued = false;
    if (!c->dead) FlushLocked(*c);
    dead = c->dead;
    pending = !c->out.empty();
    done = c->reply_done;
    close_after = c->close_after;
  }
  if (dead) {
    Close(c);
    return;
  }
  if (c->phase == Conn::Phase::kLinger) {
    if (!pending && !c->wr_shut) {
      c->wr_shut = true;
      shutdown(c->fd, SHUT_WR);
    }
    if (!pending && c->read_shut) {
      Close(c);
      return;
    }
    SetInterest(*c);
    return;
  }
  if (c->phase == Conn::Phase::kInFlight && done && !pending) {
    {
      std::lock_guard<std::mutex> lock(c->mu);
      c->reply_done = false;
      c->close_after = false;
    }
    --in_flight_;
    c->exchange.reset();
    if (close_after || c->read_shut || stopping_.load()) {
      StartLinger(c);
      if (conns_.count(c->id) != 0) OnReady(c);
      return;
    }
    c->phase = Conn::Phase::kIdle;
    c->since_us = env_->NowMicros();
    SetInterest(*c);
    ProcessInput(c);  // a pipelined request may be waiting
    return;
  }
  SetInterest(*c);
}

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

void HttpTransport::Impl::StartLinger(const std::shared_ptr<Conn>& c) {
  c->phase = Conn::Phase::kLinger;
  c->since_us = env_->NowMicros();
  c->in.clear();
  c->in.shrink_to_fit();
  c->parser.Reset();
  CountBody(*c);
}

void HttpTransport::Impl::SetInterest(Conn& c) {
  if (c.fd < 0) return;
  uint32_t want = 0;
  const bool reading = !c.read_shut &&
                       !(c.phase == Conn::Phase::kInFlight && c.in.size() >= kMaxBufferedAhead);
  if (reading) want |= EPOLLIN;
  if (!c.read_shut) want |= EPOLLRDHUP;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (!c.out.empty()) want |= EPOLLOUT;
  }
  if (want == c.interest) return;
  c.interest = want;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
}

void HttpTransport::Impl::Close(const std::shared_ptr<Conn>& c) {
  if (conns_.erase(c->id) == 0) return;
  receiving_bytes_ -= c->body_bytes;
  c->body_bytes = 0;
  if (auto it = per_peer_.find(c->peer); it != per_peer_.end() && --it->second <= 0) per_peer_.erase(it);
  if (c->phase == Conn::Phase::kInFlight) --in_flight_;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
    close(c->fd);
    c->fd = -1;
    c->dead = true;
    c->out.clear();
    c->drained.notify_all();
  }
  if (c->exchange) c->exchange->MarkDisconnected();
  c->exchange.reset();
}

void HttpTransport::Impl::Sweep(uint64_t now) {
  if (!listening_ && listen_fd_ >= 0 && now >= resume_accept_us_) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenId;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev) == 0) listening_ = true;
  }
  std::vector<std::shared_ptr<Conn>> expired;
  std::vector<std::shared_ptr<Conn>> late;
  for (auto& [id, c] : conns_) {
    const int64_t age_ms = static_cast<int64_t>((now - c->since_us) / 1000);
    switch (c->phase) {
      case Conn::Phase::kIdle:
        if (age_ms >= options_.idle_timeout_ms) expired.push_back(c);
        break;
      case Conn::Phase::kReading:
        if (age_ms >= options_.request_timeout_ms ||
            (!c->parser.head_done() && age_ms >= options_.head_timeout_ms)) {
          late.push_back(c);
        }
        break;
      case Conn::Phase::kLinger:
        if (age_ms >= kLingerMs) expired.push_back(c);
        break;
      case Conn::Phase::kInFlight:
        break;
    }
  }
  for (auto& c : expired) Close(c);
  for (auto& c : late) {
    AnswerError(c, 408,
                c->parser.head_done() ? "the request body did not arrive in time"
                                      : "the request head did not arrive in time (" +
                                            std::to_string(options_.head_timeout_ms) + " ms)");
  }
}

HttpTransport::HttpTransport(TransportOptions options, Env* env, HttpHandler handler, ErrorRenderer render_error)
    : impl_(std::make_unique<Impl>(std::move(options), env, std::move(handler), std::move(render_error))) {}
HttpTransport::~HttpTransport() = default;
Status HttpTransport::Bind() { return impl_->Bind(); }
int HttpTransport::port() const { return impl_->port(); }
void HttpTransport::Run() { impl_->Run(); }
void HttpTransport::Stop() { impl_->Stop(); }

}  // namespace mx::server
