#include "server/metrics/admin_http_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/metrics/bearer_token.h"
#include "server/metrics/listen_socket.h"
#include "spdlog/spdlog.h"

namespace tessera::server {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunkBytes = 16 * 1024;
// After an error response, how long the client's remaining bytes are read and dropped before
// the socket closes (closing with unread data would reset the connection and could lose the
// response on its way).
constexpr auto kLingerTime = std::chrono::seconds(2);
// How long accept() pauses when the process is out of file descriptors.
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!(absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
          std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos)) {
      return false;
    }
  }
  return true;
}

}  // namespace

struct AdminHttpServer::Connection {
  enum class State { kReading, kWriting, kLingering, kClosed };

  int fd = -1;
  State state = State::kReading;
  std::string in;   // received, not yet answered
  std::string out;  // being sent
  size_t sent = 0;
  bool close_after_write = false;
  bool interim = false;          // `out` is a "100 Continue": reading resumes after it
  bool continue_sent = false;    // for the request being received
  bool request_started = false;  // bytes of a request (or a fresh connection) are pending
  bool any_bytes = false;        // the connection has sent something since its last response
  Clock::time_point deadline;
  Clock::time_point request_deadline;  // kept across an interim response
  Clock::time_point last_active;
};

AdminHttpServer::AdminHttpServer(AdminHttpOptions options) : options_(std::move(options)) {}

AdminHttpServer::~AdminHttpServer() {
  stop();
}

absl::Status AdminHttpServer::add_route(std::string_view method, std::string_view path,
                                        HttpHandler handler, bool token_required) {
  if (started_) return absl::FailedPreconditionError("admin HTTP: routes are added before start()");
  if (!is_token(method)) {
    return absl::InvalidArgumentError(
        absl::StrCat("admin HTTP: \"", std::string(method), "\" is not an HTTP method"));
  }
  if (path.empty() || path[0] != '/' || path.find('?') != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("admin HTTP: route path \"", std::string(path),
                                                   "\" must start with / and hold no query"));
  }
  std::map<std::string, Route>& methods = routes_[std::string(path)];
  if (methods.contains(std::string(method))) {
    return absl::InvalidArgumentError(absl::StrCat("admin HTTP: ", std::string(method), " ",
                                                   std::string(path), " is already routed"));
  }
  const bool read_only = method == "GET" || method == "HEAD";
  methods[std::string(method)] = Route{std::move(handler), token_required || !read_only};
  return absl::OkStatus();
}

absl::Status AdminHttpServer::start() {
  if (started_) return absl::FailedPreconditionError("admin HTTP: already started");
  absl::StatusOr<ListenSocket> sock = open_listen_socket(options_.listen);
  if (!sock.ok()) return sock.status();
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    close(sock->fd);
    return absl::InternalError(absl::StrCat("admin HTTP: eventfd: ", std::strerror(errno)));
  }
  listen_fd_ = sock->fd;
  port_.store(sock->port, std::memory_order_release);
  started_ = true;
  thread_ = std::thread([this] { run(); });
  return absl::OkStatus();
}

void AdminHttpServer::stop() {
  if (!started_ || stopping_.exchange(true)) return;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(wake_fd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
  close(wake_fd_);
  listen_fd_ = wake_fd_ = -1;
}

void AdminHttpServer::run() {
  std::vector<pollfd> fds;
  while (!stopping_.load(std::memory_order_acquire)) {
    Clock::time_point now = Clock::now();
    for (auto& c : connections_) {
      if (now >= c->deadline) on_deadline(*c);
    }
    std::erase_if(connections_,
                  [](const auto& c) { return c->state == Connection::State::kClosed; });

    const bool accepting = now >= accept_paused_until_;
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    Clock::time_point next = accepting ? Clock::time_point::max() : accept_paused_until_;
    for (const auto& c : connections_) {
      fds.push_back({c->fd,
                     static_cast<short>(c->state == Connection::State::kWriting ? POLLOUT : POLLIN),
                     0});
      next = std::min(next, c->deadline);
    }
    int timeout_ms = -1;
    if (next != Clock::time_point::max()) {
      const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
      timeout_ms = static_cast<int>(std::clamp<int64_t>(wait, 0, 60'000));
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("admin HTTP: poll: {}; the listener stops", std::strerror(errno));
      break;
    }
    if (fds[0].revents != 0) break;  // stop()
    // Connections first: fds[2 + i] is connections_[i] (accepting appends to connections_).
    const size_t n = connections_.size();
    for (size_t i = 0; i < n; ++i) {
      Connection& c = *connections_[i];
      const short revents = fds[2 + i].revents;
      if (revents == 0) continue;
      if (revents & POLLNVAL) {
        close_connection(c);
      } else if (c.state == Connection::State::kWriting) {
        if (revents & (POLLOUT | POLLERR | POLLHUP)) on_writable(c);
      } else if (revents & (POLLIN | POLLERR | POLLHUP)) {
        on_readable(c);
      }
    }
    if (fds[1].revents & POLLIN) accept_connections();
    std::erase_if(connections_,
                  [](const auto& c) { return c->state == Connection::State::kClosed; });
  }
  for (auto& c : connections_) close_connection(*c);
  connections_.clear();
}

void AdminHttpServer::accept_connections() {
  while (true) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        spdlog::warn("admin HTTP: accept: {}; pausing new connections", std::strerror(errno));
        accept_paused_until_ = Clock::now() + kAcceptBackoff;
      } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        spdlog::warn("admin HTTP: accept: {}", std::strerror(errno));
      }
      return;
    }
    const Clock::time_point now = Clock::now();
    size_t open = 0;
    Connection* idlest = nullptr;
    for (auto& c : connections_) {
      if (c->state == Connection::State::kClosed) continue;
      ++open;
      const bool idle = c->state == Connection::State::kReading && !c->any_bytes;
      if (idle && (idlest == nullptr || c->last_active < idlest->last_active)) idlest = c.get();
    }
    if (open >= static_cast<size_t>(std::max(1, options_.max_connections))) {
      if (idlest == nullptr) {
        close(fd);  // every connection is busy with a request: refuse this one
        continue;
      }
      close_connection(*idlest);
    }
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->last_active = now;
    c->request_started = true;  // the first request must arrive within request_timeout
    c->request_deadline = c->deadline = now + seconds(options_.request_timeout_seconds);
    connections_.push_back(std::move(c));
  }
}

void AdminHttpServer::on_readable(Connection& c) {
  if (c.state == Connection::State::kLingering) {
    char drop[kReadChunkBytes];
    const ssize_t n = recv(c.fd, drop, sizeof(drop), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      close_connection(c);
    }
    return;
  }
  char buf[kReadChunkBytes];
  const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
  if (n < 0) {
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) close_connection(c);
    return;
  }
  if (n == 0) {  // the client closed: nothing more to answer
    close_connection(c);
    return;
  }
  const Clock::time_point now = Clock::now();
  c.last_active = now;
  if (!c.request_started) {
    c.request_started = true;
    c.request_deadline = c.deadline = now + seconds(options_.request_timeout_seconds);
  }
  c.any_bytes = true;
  c.in.append(buf, static_cast<size_t>(n));
  process_input(c);
}

void AdminHttpServer::process_input(Connection& c) {
  HttpRequest request;
  const HttpParseResult parsed = parse_http_request(c.in, options_.limits, &request);
  switch (parsed.state) {
    case HttpParseState::kIncomplete:
      if (parsed.expect_continue && !c.continue_sent) {
        c.continue_sent = true;
        c.interim = true;
        c.out = "HTTP/1.1 100 Continue\r\n\r\n";
        c.sent = 0;
        c.state = Connection::State::kWriting;
        c.deadline = Clock::now() + seconds(options_.write_timeout_seconds);
        on_writable(c);
      }
      return;
    case HttpParseState::kError:
      respond(c, HttpResponse::text(parsed.error_status, parsed.error), false, true);
      return;
    case HttpParseState::kComplete: {
      c.in.erase(0, parsed.consumed);
      const HttpResponse response = dispatch(request);
      const bool keep_alive = request.keep_alive && !stopping_.load(std::memory_order_relaxed);
      respond(c, response, keep_alive, request.method != "HEAD");
      return;
    }
  }
}

void AdminHttpServer::respond(Connection& c, const HttpResponse& response, bool keep_alive,
                              bool include_body) {
  c.out = serialize_http_response(response, keep_alive, include_body);
  c.sent = 0;
  c.interim = false;
  c.close_after_write = !keep_alive;
  c.state = Connection::State::kWriting;
  c.deadline = Clock::now() + seconds(options_.write_timeout_seconds);
  on_writable(c);
}

void AdminHttpServer::on_writable(Connection& c) {
  while (c.sent < c.out.size()) {
    const ssize_t n = send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
    if (n > 0) {
      c.sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;  // poll for POLLOUT
    close_connection(c);
    return;
  }
  const Clock::time_point now = Clock::now();
  c.out.clear();
  c.sent = 0;
  c.last_active = now;
  if (c.interim) {  // back to receiving the body, under the request's own deadline
    c.interim = false;
    c.state = Connection::State::kReading;
    c.deadline = c.request_deadline;
    return;
  }
  if (c.close_after_write) {
    start_lingering_close(c);
    return;
  }
  c.state = Connection::State::kReading;
  c.continue_sent = false;
  c.any_bytes = !c.in.empty();
  c.request_started = !c.in.empty();
  if (c.request_started) {  // a pipelined request is already here
    c.request_deadline = c.deadline = now + seconds(options_.request_timeout_seconds);
    process_input(c);
  } else {
    c.deadline = now + seconds(options_.idle_timeout_seconds);
  }
}

void AdminHttpServer::on_deadline(Connection& c) {
  switch (c.state) {
    case Connection::State::kReading:
      if (c.request_started && c.any_bytes) {
        c.in.clear();
        respond(c, HttpResponse::text(408, "the request did not arrive in time"), false, true);
      } else {
        close_connection(c);  // idle keep-alive, or a connection that never sent anything
      }
      return;
    case Connection::State::kWriting:
    case Connection::State::kLingering:
      close_connection(c);
      return;
    case Connection::State::kClosed:
      return;
  }
}

void AdminHttpServer::start_lingering_close(Connection& c) {
  shutdown(c.fd, SHUT_WR);
  c.state = Connection::State::kLingering;
  c.in.clear();
  c.deadline = Clock::now() + kLingerTime;
}

void AdminHttpServer::close_connection(Connection& c) {
  if (c.state == Connection::State::kClosed) return;
  close(c.fd);
  c.fd = -1;
  c.state = Connection::State::kClosed;
}

bool AdminHttpServer::authorized(const HttpRequest& request) const {
  const std::optional<std::string_view> value = request.header("authorization");
  return value && bearer_token_matches(*value, options_.bearer_token);
}

HttpResponse AdminHttpServer::dispatch(const HttpRequest& request) const {
  const auto path = routes_.find(request.path);
  if (path == routes_.end()) return HttpResponse::text(404, "not found");
  const std::map<std::string, Route>& methods = path->second;
  auto route = methods.find(request.method);
  if (route == methods.end() && request.method == "HEAD") route = methods.find("GET");
  if (route == methods.end()) {
    std::vector<std::string> allowed;
    for (const auto& [method, r] : methods) allowed.push_back(method);
    if (methods.contains("GET") && !methods.contains("HEAD")) allowed.push_back("HEAD");
    std::sort(allowed.begin(), allowed.end());
    HttpResponse response = HttpResponse::text(
        405, absl::StrCat("method ", request.method, " is not allowed on ", request.path));
    response.headers.emplace_back("Allow", absl::StrJoin(allowed, ", "));
    return response;
  }
  if (route->second.requires_token && !options_.bearer_token.empty() && !authorized(request)) {
    HttpResponse response =
        HttpResponse::text(401, "this endpoint needs \"Authorization: Bearer <admin token>\"");
    response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"tessera\"");
    return response;
  }
  try {
    return route->second.handler(request);
  } catch (const std::exception& e) {  // a handler must not take the listener down
    spdlog::error("admin HTTP: {} {}: {}", request.method, request.path, e.what());
  } catch (...) {
    spdlog::error("admin HTTP: {} {}: unknown exception", request.method, request.path);
  }
  return HttpResponse::text(500, "internal error");
}

}  // namespace tessera::server
