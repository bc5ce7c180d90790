// The HTTP transport's event loop: binding, accepting, reading and parsing
// requests as bytes arrive, limits and deadlines, closing. Handlers and the
// write side are in http_transport_reply.cc.
#include "server/http_transport_impl.h"

#include "core/logging.h"

namespace mx::server {
namespace {

constexpr uint64_t kListenId = 0;
constexpr uint64_t kWakeId = 1;
constexpr size_t kReadChunk = 64 << 10;
// Bytes buffered ahead while a request is in flight (pipelining); reading
// pauses above this and resumes when the reply is done.
constexpr size_t kMaxBufferedAhead = 64 << 10;
constexpr int64_t kLingerMs = 1000;
constexpr size_t kMaxLingerBytes = 16 << 20;


}  // namespace

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
  std::vector<std::shared_ptr<Conn>> stalled;
  for (auto& [id, c] : conns_) {
    {
      // A client that takes none of what waits for it (a stalled stream, a
      // whole reply it never reads) is cut at the write deadline.
      std::lock_guard<std::mutex> lock(c->mu);
      if (!c->out.empty() && now - c->out_progress_us >= static_cast<uint64_t>(options_.write_timeout_ms) * 1000) {
        stalled.push_back(c);
        continue;
      }
    }
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
  for (auto& c : stalled) {
    size_t waiting = 0;
    {
      std::lock_guard<std::mutex> lock(c->mu);
      waiting = c->out.size();
    }
    MX_LOG(kInfo) << c->remote << " took no byte of its reply for " << options_.write_timeout_ms / 1000
                  << " s (" << waiting << " bytes waiting): connection closed";
    Close(c);
  }
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

