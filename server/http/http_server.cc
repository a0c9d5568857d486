#include "server/http/http_server.h"

#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <chrono>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "server/http/connection_table.h"
#include "server/metrics/bearer_token.h"
#include "spdlog/spdlog.h"

namespace tessera::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

constexpr std::string_view kUnmatchedRoute = "unmatched";
constexpr size_t kReadChunkBytes = 4096;
constexpr std::chrono::milliseconds kPipelinedRecheck{200};

std::chrono::steady_clock::duration to_duration(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
}

HttpResponse text_error(int status, std::string message) {
  return HttpResponse::text(status, std::move(message));
}

// "HOST:PORT" (HOST may be bracketed IPv6) -> an endpoint; names are resolved.
absl::StatusOr<tcp::endpoint> parse_listen(net::io_context& ioc, const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat("\"", listen, "\" is not HOST:PORT"));
  }
  std::string host = listen.substr(0, colon);
  const std::string port_text = listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  int port = -1;
  if (port_text.empty() || port_text.size() > 5 ||
      port_text.find_first_not_of("0123456789") != std::string::npos ||
      (port = std::stoi(port_text)) > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", listen, "\": the port must be a number in [0, 65535]"));
  }
  beast::error_code ec;
  const net::ip::address address = net::ip::make_address(host, ec);
  if (!ec) return tcp::endpoint(address, static_cast<uint16_t>(port));
  tcp::resolver resolver(ioc);
  auto results = resolver.resolve(host, port_text, ec);
  if (ec || results.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", listen, "\": cannot resolve \"", host, "\": ", ec.message()));
  }
  return results.begin()->endpoint();
}

struct Route {
  HttpHandler handler;
  bool requires_token = false;
};

}  // namespace

struct HttpServer::Impl {
  explicit Impl(HttpServerOptions o)
      : options(std::move(o)), table(std::max(1, options.max_connections)) {}

  // The response to `request` from its route (or the server's own error), and the route's name.
  HttpResponse dispatch(const HttpRequest& request, std::string& route) const;
  HttpResponse error(int status, std::string message) const {
    return error_formatter ? error_formatter(status, std::move(message))
                           : text_error(status, std::move(message));
  }
  void observe(std::string_view route, int status) const {
    if (observer) observer(route, status);
  }
  // Whether the request's "Authorization" header carries one of the bearer tokens. Every token is
  // compared, so that the time taken does not tell which one was close.
  bool authorized(const HttpRequest& request) const {
    const std::string_view authorization = request.header("authorization").value_or("");
    bool any = false;
    for (const std::string& token : options.bearer_tokens) {
      any |= bearer_token_matches(authorization, token);
    }
    return any;
  }
  void accept();

  // Members that connections use are declared before `ioc`, whose destruction destroys them.
  const HttpServerOptions options;
  std::map<std::string, std::map<std::string, Route>> routes;  // path -> method -> route
  HttpErrorFormatter error_formatter;
  HttpResponseObserver observer;
  std::atomic<int> open_connections{0};
  ConnectionTable table;  // max_connections: who holds a place, who is evicted when full
  std::optional<net::ssl::context> tls;
  bool started = false;
  net::io_context ioc;
  std::optional<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
};

namespace {

template <class Stream>
constexpr bool kIsTls = !std::is_same_v<Stream, beast::tcp_stream>;

// One connection: reads requests one at a time, answers each (at once or from a producer), and
// keeps the connection for the next while the client wants keep-alive. All its handlers run on
// the connection's strand (the socket's executor).
template <class Stream>
class Connection : public Evictable, public std::enable_shared_from_this<Connection<Stream>> {
 public:
  Connection(HttpServer::Impl& server, Stream stream)
      : server_(server), stream_(std::move(stream)), recheck_(lowest().get_executor()) {
    server_.open_connections.fetch_add(1, std::memory_order_relaxed);
  }
  ~Connection() {
    if (producer_) producer_->cancel();
    if (entry_) server_.table.leave(*entry_);
    server_.open_connections.fetch_sub(1, std::memory_order_relaxed);
  }

  // Takes a place in the server's table (evicting the connection that has waited longest for a
  // request when the table is full) and starts; closes at once when every place is answering.
  void admit() {
    entry_ = server_.table.admit(this->weak_from_this());
    if (!entry_) return close();
    start();
  }

  // Another connection needed the place: close on this connection's strand.
  void evict() override {
    net::post(lowest().get_executor(), [self = this->shared_from_this()] { self->close(); });
  }

 private:
  void start() {
    if constexpr (kIsTls<Stream>) {
      lowest().expires_after(to_duration(server_.options.request_timeout_seconds));
      stream_.async_handshake(net::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->close();
                                self->wait_for_request();
                              });
    } else {
      wait_for_request();
    }
  }

  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  // Keep-alive: waits up to idle_timeout for the next request's first bytes. From here until the
  // request is whole the connection may be evicted, the longest waiting first.
  void wait_for_request() {
    server_.table.waiting(entry_);
    if (buffer_.size() > 0) return read_request();
    lowest().expires_after(to_duration(server_.options.idle_timeout_seconds));
    stream_.async_read_some(buffer_.prepare(kReadChunkBytes),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->close();
                              self->buffer_.commit(n);
                              self->read_request();
                            });
  }

  // The rest of the request must arrive within request_timeout. A client that sent "Expect:
  // 100-continue" gets the interim response after the header (curl waits for it).
  void read_request() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(server_.options.max_header_bytes));
    parser_->body_limit(server_.options.max_body_bytes);
    lowest().expires_after(to_duration(server_.options.request_timeout_seconds));
    http::async_read_header(
        stream_, buffer_, *parser_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
          if (ec || self->parser_->is_done()) return self->on_request(ec);
          if (beast::iequals(self->parser_->get()[http::field::expect], "100-continue")) {
            return self->send_continue();
          }
          self->read_body();
        });
  }

  void send_continue() {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->close();
                       self->read_body();
                     });
  }

  void read_body() {
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       self->on_request(ec);
                     });
  }

  void on_request(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset ||
        ec == net::error::eof) {
      return close();
    }
    // Evicted while the request arrived: the place is someone else's now.
    if (!server_.table.answering(*entry_)) return close();
    keep_alive_ = false;
    if (ec == http::error::header_limit) {
      return answer(kUnmatchedRoute,
                    server_.error(431, absl::StrCat("request line and headers exceed ",
                                                    server_.options.max_header_bytes, " bytes")),
                    false);
    }
    if (ec == http::error::body_limit) {
      return answer(kUnmatchedRoute,
                    server_.error(413, absl::StrCat("request body exceeds ",
                                                    server_.options.max_body_bytes, " bytes")),
                    false);
    }
    if (ec) {
      return answer(kUnmatchedRoute,
                    server_.error(400, absl::StrCat("malformed HTTP request: ", ec.message())),
                    false);
    }
    http::request<http::string_body> message = parser_->release();
    parser_.reset();
    keep_alive_ = message.keep_alive();
    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    const size_t q = request.target.find('?');
    request.path = request.target.substr(0, q);
    if (q != std::string::npos) request.query = request.target.substr(q + 1);
    for (const auto& field : message) {
      request.headers.emplace_back(absl::AsciiStrToLower(std::string(field.name_string())),
                                   std::string(field.value()));
    }
    request.body = std::move(message.body());
    head_only_ = request.method == "HEAD";
    std::string route;
    HttpResponse response = server_.dispatch(request, route);
    answer(route, std::move(response), keep_alive_);
  }

  void answer(std::string_view route, HttpResponse response, bool keep_alive) {
    keep_alive_ = keep_alive;
    route_ = std::string(route);
    if (!response.producer) {
      server_.observe(route_, response.status);
      return write_whole(std::move(response));
    }
    producer_ = std::move(response.producer);
    streamed_ = response.streamed;
    if (!streamed_) return start_producer();
    server_.observe(route_, response.status);
    write_stream_head(response);
  }

  void write_whole(HttpResponse response) {
    auto message = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(response.status), 11);
    message->set(http::field::content_type, response.content_type);
    message->set(http::field::cache_control, "no-store");
    for (const auto& [name, value] : response.headers) message->set(name, value);
    message->keep_alive(keep_alive_);
    const size_t length = response.body.size();
    if (!head_only_) message->body() = std::move(response.body);
    message->content_length(length);
    lowest().expires_after(to_duration(server_.options.write_timeout_seconds));
    http::async_write(stream_, *message,
                      [self = this->shared_from_this(), message](beast::error_code ec, size_t) {
                        if (ec) return self->close();
                        self->after_response();
                      });
  }

  void after_response() {
    if (!keep_alive_) return close();
    wait_for_request();
  }

  void write_stream_head(const HttpResponse& response) {
    stream_head_.emplace(static_cast<http::status>(response.status), 11);
    stream_head_->set(http::field::content_type, response.content_type);
    stream_head_->set(http::field::cache_control, "no-store");
    for (const auto& [name, value] : response.headers) stream_head_->set(name, value);
    stream_head_->keep_alive(keep_alive_);
    stream_head_->chunked(true);
    head_serializer_.emplace(*stream_head_);
    lowest().expires_after(to_duration(server_.options.write_timeout_seconds));
    http::async_write_header(stream_, *head_serializer_,
                             [self = this->shared_from_this()](beast::error_code ec, size_t) {
                               if (ec) return self->client_gone();
                               self->start_producer();
                             });
  }

  void start_producer() {
    std::weak_ptr<Connection> weak = this->shared_from_this();
    auto executor = lowest().get_executor();
    producer_->start([weak, executor] {
      net::post(executor, [weak] {
        if (std::shared_ptr<Connection> self = weak.lock()) self->pump();
      });
    });
    watch_for_hang_up();
    pump();
  }

  // While a response is pending the client sends nothing; readable means it closed (or sent a
  // pipelined request, which waits). A hang-up cancels the producer at once. The pending wait
  // (or the recheck timer) is also what keeps this connection alive between the producer's
  // pieces: the producer's wake holds it weakly.
  void watch_for_hang_up() {
    watching_ = true;
    lowest().socket().async_wait(
        tcp::socket::wait_read,
        [self = this->shared_from_this(), generation = watch_generation_](beast::error_code ec) {
          self->on_readable(ec, generation);
        });
  }

  void on_readable(beast::error_code ec, uint64_t generation) {
    if (generation != watch_generation_ || !producer_) return;
    watching_ = false;
    if (ec) return client_gone();
    char byte;
    const ssize_t n = ::recv(lowest().socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return client_gone();
    if (n < 0) return watch_for_hang_up();  // readiness without data: wait again
    // The next request arrived before this response ended: it waits in the socket, and the
    // connection is checked again shortly instead.
    recheck_.expires_after(kPipelinedRecheck);
    recheck_.async_wait([self = this->shared_from_this(), generation](beast::error_code ec) {
      if (ec || generation != self->watch_generation_ || !self->producer_) return;
      self->watch_for_hang_up();
    });
  }

  void stop_watching() {
    ++watch_generation_;
    recheck_.cancel();
    if (!watching_) return;
    watching_ = false;
    beast::error_code ignored;
    lowest().socket().cancel(ignored);
  }

  // Writes what the producer has ready, one piece at a time.
  void pump() {
    if (!producer_ || writing_) return;
    std::optional<ProducedPart> part = producer_->next();
    if (!part) return;
    if (!streamed_) {
      producer_.reset();
      stop_watching();
      HttpResponse response = part->response ? std::move(*part->response)
                                             : server_.error(500, "the response was lost");
      server_.observe(route_, response.status);
      return write_whole(std::move(response));
    }
    writing_ = true;
    chunk_ = std::move(part->chunk);
    last_chunk_ = part->last;
    if (last_chunk_) {
      producer_.reset();
      stop_watching();
    }
    if (chunk_.empty()) return on_chunk_written({});
    lowest().expires_after(to_duration(server_.options.write_timeout_seconds));
    net::async_write(stream_, http::make_chunk(net::buffer(chunk_)),
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       self->on_chunk_written(ec);
                     });
  }

  void on_chunk_written(beast::error_code ec) {
    if (ec) return client_gone();
    if (!last_chunk_) {
      writing_ = false;
      return pump();
    }
    lowest().expires_after(to_duration(server_.options.write_timeout_seconds));
    net::async_write(stream_, http::make_chunk_last(),
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       self->writing_ = false;
                       self->stream_head_.reset();
                       self->head_serializer_.reset();
                       if (ec) return self->close();
                       self->after_response();
                     });
  }

  // The client hung up or stopped reading: nothing more is produced for it.
  void client_gone() {
    if (producer_) {
      producer_->cancel();
      producer_.reset();
    }
    close();
  }

  void close() {
    stop_watching();
    beast::error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    lowest().close();
  }

  HttpServer::Impl& server_;
  ConnectionTable::EntryPtr entry_;  // the place this connection holds
  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  bool keep_alive_ = true;
  bool head_only_ = false;
  std::string route_;
  // A pending response:
  std::shared_ptr<ResponseProducer> producer_;
  bool streamed_ = false;
  bool writing_ = false;
  bool last_chunk_ = false;
  std::string chunk_;  // the chunk being written
  std::optional<http::response<http::empty_body>> stream_head_;
  std::optional<http::response_serializer<http::empty_body>> head_serializer_;
  bool watching_ = false;
  uint64_t watch_generation_ = 0;
  net::steady_timer recheck_;
};

}  // namespace

HttpResponse HttpServer::Impl::dispatch(const HttpRequest& request, std::string& route) const {
  route = std::string(kUnmatchedRoute);
  if (request.path.empty() || request.path.front() != '/') {
    return error(400, absl::StrCat("request target \"", request.target, "\" is not a path"));
  }
  const auto by_path = routes.find(request.path);
  if (by_path == routes.end()) return error(404, absl::StrCat("no route ", request.path));
  route = request.path;
  const std::string& method = request.method == "HEAD" ? std::string("GET") : request.method;
  const auto found = by_path->second.find(method);
  if (found == by_path->second.end()) {
    std::vector<std::string> allowed;
    for (const auto& [m, unused] : by_path->second) {
      allowed.push_back(m);
      if (m == "GET") allowed.push_back("HEAD");
    }
    HttpResponse response = error(405, absl::StrCat(request.method, " is not allowed on ",
                                                    request.path, "; allowed: ",
                                                    absl::StrJoin(allowed, ", ")));
    response.headers.emplace_back("Allow", absl::StrJoin(allowed, ", "));
    return response;
  }
  const Route& r = found->second;
  if (!options.bearer_tokens.empty() && r.requires_token && !authorized(request)) {
    HttpResponse response = error(401, "missing or wrong \"Authorization: Bearer\" token");
    response.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"tessera\"");
    return response;
  }
  try {
    return r.handler(request);
  } catch (const std::exception& e) {
    spdlog::error("{} listener: {} {}: handler failed: {}", options.name, request.method,
                  request.path, e.what());
    return error(500, "internal error");
  }
}

void HttpServer::Impl::accept() {
  acceptor->async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
    if (!ec) {
      if (tls) {
        std::make_shared<Connection<beast::ssl_stream<beast::tcp_stream>>>(
            *this, beast::ssl_stream<beast::tcp_stream>(std::move(socket), *tls))
            ->admit();
      } else {
        std::make_shared<Connection<beast::tcp_stream>>(*this, beast::tcp_stream(std::move(socket)))
            ->admit();
      }
    }
    accept();
  });
}

HttpServer::HttpServer(HttpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpServer::~HttpServer() { stop(); }

absl::Status HttpServer::add_route(std::string_view method, std::string_view path,
                                   HttpHandler handler, bool token_required) {
  if (!impl_ || impl_->started) {
    return absl::FailedPreconditionError("routes are added before start()");
  }
  if (method.empty() || method.find_first_of(" \t\r\n") != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("method \"", std::string(method), "\" is not a token"));
  }
  if (path.empty() || path.front() != '/' || path.find('?') != std::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("route path \"", std::string(path), "\" must start with '/' and hold no '?'"));
  }
  auto& by_method = impl_->routes[std::string(path)];
  if (by_method.contains(std::string(method))) {
    return absl::InvalidArgumentError(
        absl::StrCat("route ", std::string(method), " ", std::string(path), " is already there"));
  }
  const bool requires_token = token_required || (method != "GET" && method != "HEAD");
  by_method[std::string(method)] = Route{std::move(handler), requires_token};
  return absl::OkStatus();
}

void HttpServer::set_error_formatter(HttpErrorFormatter formatter) {
  if (impl_ && !impl_->started) impl_->error_formatter = std::move(formatter);
}

void HttpServer::set_response_observer(HttpResponseObserver observer) {
  if (impl_ && !impl_->started) impl_->observer = std::move(observer);
}

int HttpServer::connections() const {
  return impl_ ? impl_->open_connections.load(std::memory_order_relaxed) : 0;
}

absl::Status HttpServer::start() {
  if (!impl_ || impl_->started) return absl::FailedPreconditionError("already started");
  Impl& s = *impl_;
  const HttpServerOptions& o = s.options;
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("TLS needs both a certificate and a key");
  }
  if (!o.tls_cert.empty()) {
    s.tls.emplace(net::ssl::context::tls_server);
    s.tls->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                       net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                       net::ssl::context::no_tlsv1_1);
    beast::error_code ec;
    s.tls->use_certificate_chain_file(o.tls_cert, ec);
    if (ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("TLS certificate \"", o.tls_cert, "\": ", ec.message()));
    }
    s.tls->use_private_key_file(o.tls_key, net::ssl::context::pem, ec);
    if (ec) {
      return absl::InvalidArgumentError(absl::StrCat("TLS key \"", o.tls_key, "\": ", ec.message()));
    }
  }
  TESSERA_ASSIGN_OR_RETURN(tcp::endpoint endpoint, parse_listen(s.ioc, o.listen));
  s.acceptor.emplace(s.ioc);
  beast::error_code ec;
  s.acceptor->open(endpoint.protocol(), ec);
  if (!ec) s.acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(endpoint, ec);
  if (!ec) s.acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot listen on \"", o.listen, "\": ", ec.message()));
  }
  port_.store(s.acceptor->local_endpoint().port(), std::memory_order_release);
  s.started = true;
  s.accept();
  for (int i = 0; i < std::max(1, o.threads); ++i) {
    s.threads.emplace_back([&s] { s.ioc.run(); });
  }
  return absl::OkStatus();
}

void HttpServer::stop() {
  if (!impl_) return;
  impl_->ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
  // Destroying the io_context destroys the pending handlers and with them every connection.
  impl_.reset();
}

}  // namespace tessera::server
