// The HTTP/1.1 front, on Boost.Beast/Asio: one listener (plain or TLS) whose connections are
// asynchronous state machines on a few io threads, so an open stream (server-sent events) or an
// idle keep-alive connection costs no thread. Both the OpenAI API port and the admin listener
// are one of these, with their own routes and options.
//
// Robustness: a request's header and body are size-limited (431 / 413, then close); a request
// must arrive whole within request_timeout of its first byte (slow clients are cut off);
// keep-alive connections idle past idle_timeout are closed; a write that a client does not take
// within write_timeout drops the connection. A newcomer that finds max_connections open evicts
// the connection that has waited longest for a request (idle, or trickling one in), so a flood
// of slow connections cannot lock out a scrape; it is closed at once only when every connection
// is answering a request (connection_table.h). Malformed requests get 400 and the connection
// closes. Unknown paths 404, known paths with another method 405 (with Allow). Routes that need the
// bearer token answer 401 without it. A client that closes its connection while a response is
// pending cancels the producer at once.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "server/http/http_message.h"

namespace tessera::server {

struct HttpServerOptions {
  std::string name = "http";              // in logs and errors ("admin", "openai")
  std::string listen = "127.0.0.1:8002";  // HOST:PORT; port 0 picks a free one (see port())
  std::string tls_cert;                   // PEM certificate chain; set with tls_key: HTTPS
  std::string tls_key;                    // PEM private key of tls_cert
  // Non-empty: the routes that ask for a token require "Authorization: Bearer" with one of these
  // (the OpenAI port: the API key, or the admin token as gRPC accepts it; the admin listener: the
  // admin token).
  std::vector<std::string> bearer_tokens;
  size_t max_header_bytes = 16 * 1024;    // request line + headers
  size_t max_body_bytes = 1 << 20;
  int max_connections = 64;             // beyond it, the longest-waiting connection is evicted
  int threads = 1;                      // io threads
  double request_timeout_seconds = 10;  // from a request's first byte to its last
  double idle_timeout_seconds = 60;     // keep-alive connection between requests
  double write_timeout_seconds = 10;    // for one write to be taken by the client
};

using HttpHandler = std::function<HttpResponse(const HttpRequest& request)>;
// The response for an error the server answers itself (400, 401, 404, 405, 413, 431): the admin
// listener's are text, the OpenAI port's are in OpenAI's error shape.
using HttpErrorFormatter = std::function<HttpResponse(int status, std::string message)>;
// Called once per answered request with the route (the path as registered, or "unmatched") and
// the status, for metrics. Any io thread.
using HttpResponseObserver = std::function<void(std::string_view route, int status)>;

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  // stop()s.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Adds a route before start(). `method` is an HTTP method ("GET", "POST"); a GET route also
  // answers HEAD. Routes of methods other than GET/HEAD always need the bearer token (when one
  // is configured); a GET route too when `token_required`. Errors: INVALID_ARGUMENT (method
  // empty, path not starting with '/' or holding '?', route already there),
  // FAILED_PRECONDITION (after start()).
  absl::Status add_route(std::string_view method, std::string_view path, HttpHandler handler,
                         bool token_required = false);
  // Before start(): replaces the text error responses, and observes every response.
  void set_error_formatter(HttpErrorFormatter formatter);
  void set_response_observer(HttpResponseObserver observer);

  // Binds options.listen (and loads the TLS files) and starts the io threads. Errors name the
  // address or the file: INVALID_ARGUMENT (address, TLS files), UNAVAILABLE (cannot bind),
  // FAILED_PRECONDITION (a second start()).
  absl::Status start();
  // The bound port; 0 before start().
  int port() const { return port_.load(std::memory_order_acquire); }
  // Open connections now.
  int connections() const;
  // Closes the listener and every connection (pending producers are cancelled) and joins the
  // io threads. Idempotent.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  std::atomic<int> port_{0};
};

}  // namespace tessera::server
