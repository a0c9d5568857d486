// The admin HTTP/1.1 listener: a separate port (loopback by default) for /metrics, /healthz,
// /readyz and the tuning endpoints (server/tuning_routes.h). One thread runs a poll() loop over non-blocking
// sockets, so idle keep-alive connections (Prometheus keeps one open) cost no thread. Handlers
// run on that thread and must return quickly: work that takes long (tuning) is started
// elsewhere and answered at once (202).
//
// Robustness: requests are parsed strictly (http_request_parser.h) with size limits; a request
// must arrive whole within request_timeout of its first byte (or of the connection being
// accepted), so a client trickling bytes is answered 408 and cut off; keep-alive connections
// idle past idle_timeout are closed; a client that does not read its response is dropped after
// write_timeout; connections beyond max_connections replace the longest-idle one or are refused.
// Malformed requests get 400 (or 413/431/501/505) and the connection is closed; unknown paths
// 404; known paths with another method 405 (with Allow); routes other than GET/HEAD need
// "Authorization: Bearer <token>" when a token is configured (401 otherwise).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "server/metrics/http_message.h"
#include "server/metrics/http_request_parser.h"

namespace tessera::server {

struct AdminHttpOptions {
  std::string listen = "127.0.0.1:8002";  // HOST:PORT; port 0 picks a free one (see port())
  std::string bearer_token;               // non-empty: required by every route but GET/HEAD
  HttpLimits limits;                      // request line + headers, header count, body size
  int max_connections = 64;
  double request_timeout_seconds = 10;  // from a request's first byte to its last
  double idle_timeout_seconds = 60;     // keep-alive connection between requests
  double write_timeout_seconds = 10;    // to hand a response to a client that reads slowly
};

using HttpHandler = std::function<HttpResponse(const HttpRequest& request)>;

class AdminHttpServer {
 public:
  explicit AdminHttpServer(AdminHttpOptions options);
  // stop()s.
  ~AdminHttpServer();
  AdminHttpServer(const AdminHttpServer&) = delete;
  AdminHttpServer& operator=(const AdminHttpServer&) = delete;

  // Adds a route before start(). `method` is an HTTP method ("GET", "POST"); a GET route also
  // answers HEAD. A GET route needs the bearer token too when `token_required` (routes of other
  // methods always do, when one is configured). Errors: INVALID_ARGUMENT (method not a token,
  // path not starting with '/' or holding '?', route already there), FAILED_PRECONDITION (after
  // start()).
  absl::Status add_route(std::string_view method, std::string_view path, HttpHandler handler,
                         bool token_required = false);

  // Binds options.listen and starts the listener thread. Errors name the address: an invalid
  // one (INVALID_ARGUMENT), one that cannot be bound (UNAVAILABLE), or a second start()
  // (FAILED_PRECONDITION).
  absl::Status start();
  // The bound port; 0 before start().
  int port() const { return port_.load(std::memory_order_acquire); }
  // Closes the listening socket and every connection and joins the thread. Idempotent.
  void stop();

 private:
  struct Connection;
  struct Route {
    HttpHandler handler;
    bool requires_token = false;
  };

  void run();
  void accept_connections();
  void on_readable(Connection& c);
  void on_writable(Connection& c);
  void on_deadline(Connection& c);
  // Parses what `c` has received and answers a complete request.
  void process_input(Connection& c);
  void respond(Connection& c, const HttpResponse& response, bool keep_alive, bool include_body);
  void start_lingering_close(Connection& c);
  void close_connection(Connection& c);
  HttpResponse dispatch(const HttpRequest& request) const;
  bool authorized(const HttpRequest& request) const;

  const AdminHttpOptions options_;
  std::map<std::string, std::map<std::string, Route>> routes_;  // path -> method -> route
  std::atomic<int> port_{0};
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stop() wakes the loop
  std::atomic<bool> stopping_{false};
  bool started_ = false;
  std::thread thread_;

  // Loop thread only.
  std::vector<std::unique_ptr<Connection>> connections_;
  std::chrono::steady_clock::time_point accept_paused_until_{};
};

}  // namespace tessera::server
