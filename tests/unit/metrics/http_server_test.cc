#include "server/http/http_server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <stdexcept>
#include <thread>
#include <vector>

#include "server/http/admin_routes.h"
#include "server/metrics/readiness_state.h"
#include "server/metrics/tessera_metrics.h"
#include "tests/unit/metrics/http_test_client.h"

namespace tessera::server {
namespace {

using namespace std::chrono_literals;
using tessera::testing::http_request;
using tessera::testing::HttpReply;
using tessera::testing::HttpTestClient;

HttpServerOptions loopback_options() {
  HttpServerOptions options;
  options.listen = "127.0.0.1:0";
  return options;
}

// A response the test produces piece by piece: push() queues a piece and wakes the connection.
class TestProducer : public ResponseProducer {
 public:
  void start(std::function<void()> wake) override {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = std::move(wake);
  }
  std::optional<ProducedPart> next() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (parts_.empty()) return std::nullopt;
    ProducedPart part = std::move(parts_.front());
    parts_.pop_front();
    return part;
  }
  void cancel() override { cancelled.store(true); }

  void push(ProducedPart part) {
    std::function<void()> wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      parts_.push_back(std::move(part));
      wake = wake_;
    }
    if (wake) wake();
  }
  bool started() {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<bool>(wake_);
  }

  std::atomic<bool> cancelled{false};

 private:
  std::mutex mu_;
  std::function<void()> wake_;
  std::deque<ProducedPart> parts_;
};

// Polls `condition` up to `attempts` times, 10 ms apart.
bool eventually(const std::function<bool()>& condition, int attempts = 500) {
  for (int i = 0; i < attempts; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// An admin listener with the standard routes over a TesseraMetrics and a ReadinessState.
class HttpServerTest : public ::testing::Test {
 protected:
  void start(HttpServerOptions options = loopback_options()) {
    server_ = std::make_unique<HttpServer>(std::move(options));
    ASSERT_TRUE(
        add_admin_routes(*server_, readiness_, [this] { return metrics_.serialize(); }).ok());
    ASSERT_TRUE(server_
                    ->add_route("POST", "/echo",
                                [](const HttpRequest& r) {
                                  return HttpResponse::text(200, "echo:" + r.body);
                                })
                    .ok());
    ASSERT_TRUE(server_
                    ->add_route("GET", "/boom",
                                [](const HttpRequest&) -> HttpResponse {
                                  throw std::runtime_error("handler bug");
                                })
                    .ok());
    ASSERT_TRUE(server_
                    ->add_route("GET", "/produce",
                                [this](const HttpRequest&) {
                                  HttpResponse response;
                                  response.producer = producer_;
                                  response.streamed = streamed_;
                                  response.content_type = "text/event-stream";
                                  return response;
                                })
                    .ok());
    ASSERT_TRUE(server_
                    ->add_route("GET", "/hold",
                                [this](const HttpRequest&) {
                                  auto producer = std::make_shared<TestProducer>();
                                  {
                                    std::lock_guard<std::mutex> lock(held_mu_);
                                    held_.push_back(producer);
                                  }
                                  HttpResponse response;
                                  response.producer = producer;
                                  return response;
                                })
                    .ok());
    const absl::Status s = server_->start();
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_GT(server_->port(), 0);
  }
  int port() const { return server_->port(); }

  TesseraMetrics metrics_;
  ReadinessState readiness_;
  std::unique_ptr<HttpServer> server_;
  std::shared_ptr<TestProducer> producer_ = std::make_shared<TestProducer>();
  bool streamed_ = true;  // GET /produce: chunked pieces, or one response later
  // GET /hold: a whole response that comes when the test pushes it, one producer per request.
  std::shared_ptr<TestProducer> held(size_t i) {
    std::lock_guard<std::mutex> lock(held_mu_);
    return i < held_.size() ? held_[i] : nullptr;
  }
  std::mutex held_mu_;
  std::vector<std::shared_ptr<TestProducer>> held_;
};

TEST_F(HttpServerTest, AStreamedResponseIsChunkedPieceByPiece) {
  start();
  HttpTestClient client(port());
  ASSERT_TRUE(client.send("GET /produce HTTP/1.1\r\nHost: a\r\n\r\n"));
  const std::optional<std::string> head = client.read_until("\r\n\r\n");
  ASSERT_TRUE(head);
  EXPECT_NE(head->find("Transfer-Encoding: chunked"), std::string::npos) << *head;
  EXPECT_NE(head->find("text/event-stream"), std::string::npos) << *head;
  producer_->push({std::nullopt, "data: a\n\n", false});
  const std::optional<std::string> first = client.read_until("data: a\n\n");
  ASSERT_TRUE(first);
  producer_->push({std::nullopt, "data: b\n\n", true});
  const std::optional<std::string> rest = client.read_until("\r\n0\r\n\r\n");
  ASSERT_TRUE(rest);
  EXPECT_NE(rest->find("data: b\n\n"), std::string::npos);
  EXPECT_FALSE(producer_->cancelled.load());
  // The connection is kept for the next request.
  ASSERT_TRUE(client.send("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"));
  const std::optional<HttpReply> r = client.read_reply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, AResponseProducedLaterIsSentWhole) {
  streamed_ = false;
  start();
  HttpTestClient client(port());
  ASSERT_TRUE(client.send("GET /produce HTTP/1.1\r\nHost: a\r\n\r\n"));
  ASSERT_TRUE(eventually([this] { return producer_->started(); }));
  producer_->push({HttpResponse::text(201, "later"), {}, false});
  const std::optional<HttpReply> r = client.read_reply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->body, "later\n");
}

TEST_F(HttpServerTest, AClientThatHangsUpCancelsThePendingResponse) {
  for (const bool streamed : {false, true}) {
    streamed_ = streamed;
    producer_ = std::make_shared<TestProducer>();
    start();
    {
      HttpTestClient client(port());
      ASSERT_TRUE(client.send("GET /produce HTTP/1.1\r\nHost: a\r\n\r\n"));
      ASSERT_TRUE(eventually([this] { return producer_->started(); }));
    }  // closed with the response still pending
    EXPECT_TRUE(eventually([this] { return producer_->cancelled.load(); })) << streamed;
    server_->stop();
  }
}

TEST_F(HttpServerTest, ServesMetrics) {
  start();
  metrics_.on_first_token(0.2);
  std::optional<HttpReply> r = http_request(port(), "GET", "/metrics");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(r->body.find("# TYPE tessera_time_to_first_token_seconds histogram\n"),
            std::string::npos);
  EXPECT_NE(r->body.find("tessera_time_to_first_token_seconds_count 1\n"), std::string::npos);
  EXPECT_NE(r->body.find("process_open_fds "), std::string::npos);
  EXPECT_EQ(r->headers["content-length"], std::to_string(r->body.size()));
}

TEST_F(HttpServerTest, HealthzAndReadyzTransitions) {
  start();
  const auto get = [this](const char* path) {
    std::optional<HttpReply> r = http_request(port(), "GET", path);
    EXPECT_TRUE(r.has_value()) << path;
    return r.value_or(HttpReply{});
  };
  // Loading.
  EXPECT_EQ(get("/healthz").status, 200);
  EXPECT_EQ(get("/healthz").body, "ok\n");
  HttpReply ready = get("/readyz");
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(ready.body, "model loading\n");
  // Loaded, warming up.
  readiness_.set_model_loaded(true);
  ready = get("/readyz");
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(ready.body, "warmup in progress\n");
  // Ready.
  readiness_.set_warmup_done(true);
  ready = get("/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, "ready\n");
  // Draining: not ready, still alive.
  readiness_.set_draining();
  ready = get("/readyz");
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(ready.body, "draining\n");
  EXPECT_EQ(get("/healthz").status, 200);
}

TEST_F(HttpServerTest, NotFoundMethodNotAllowedAndHead) {
  start();
  std::optional<HttpReply> r = http_request(port(), "GET", "/nope");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = http_request(port(), "GET", "/metrics/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  r = http_request(port(), "POST", "/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->headers["allow"], "GET, HEAD");
  r = http_request(port(), "DELETE", "/echo");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->headers["allow"], "POST");
  r = http_request(port(), "HEAD", "/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->headers["content-length"], "3");
  EXPECT_TRUE(r->body.empty());
}

TEST_F(HttpServerTest, MalformedRequestsGet400AndTheConnectionCloses) {
  start();
  for (const std::string& bad :
       {std::string("garbage\r\n\r\n"), std::string("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
        std::string("GET / HTTP/1.1\r\nNo-Colon\r\n\r\n"),
        std::string("\x16\x03\x01\x02\x10\x01\xfc\x03\x03\r\n\r\n")}) {
    HttpTestClient client(port());
    ASSERT_TRUE(client.send(bad));
    std::optional<HttpReply> r = client.read_reply();
    ASSERT_TRUE(r) << bad;
    EXPECT_EQ(r->status, 400) << bad;
    EXPECT_EQ(r->headers["connection"], "close");
    EXPECT_TRUE(client.closed_within(3s));
  }
  // The listener is still fine.
  std::optional<HttpReply> r = http_request(port(), "GET", "/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, SizeLimits) {
  HttpServerOptions options = loopback_options();
  options.max_header_bytes = 1024;
  options.max_body_bytes = 100;
  start(options);
  std::optional<HttpReply> r =
      http_request(port(), "GET", "/healthz", "X-Big: " + std::string(2000, 'a') + "\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);
  r = http_request(port(), "POST", "/echo", "", std::string(101, 'b'));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  r = http_request(port(), "POST", "/echo", "", std::string(100, 'b'));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // A chunked body is read like any other, within the same limit.
  HttpTestClient chunked(port());
  ASSERT_TRUE(chunked.send("POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                           "3\r\nabc\r\n0\r\n\r\n"));
  r = chunked.read_reply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "echo:abc\n");
}

TEST_F(HttpServerTest, HandlerExceptionsBecome500) {
  start();
  std::optional<HttpReply> r = http_request(port(), "GET", "/boom");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 500);
  r = http_request(port(), "GET", "/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, BearerTokensGuardMutatingRoutes) {
  HttpServerOptions options = loopback_options();
  options.bearer_tokens = {"s3cret", "0ther"};
  start(options);
  std::optional<HttpReply> r = http_request(port(), "POST", "/echo", "", "x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(r->headers["www-authenticate"], "Bearer realm=\"tessera\"");
  r = http_request(port(), "POST", "/echo", "Authorization: Bearer wrong\r\n", "x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = http_request(port(), "POST", "/echo", "Authorization: Bearer s3cre\r\n", "x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = http_request(port(), "POST", "/echo", "Authorization: Basic czNjcmV0\r\n", "x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = http_request(port(), "POST", "/echo", "Authorization: Bearer s3cret\r\n", "x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "echo:x\n");
  r = http_request(port(), "POST", "/echo", "authorization: bearer   s3cret\r\n", "y");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // Any of the tokens (the OpenAI port's API key or admin token).
  r = http_request(port(), "POST", "/echo", "Authorization: Bearer 0ther\r\n", "z");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // Reading needs no token.
  r = http_request(port(), "GET", "/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, WithoutATokenMutatingRoutesAreOpen) {
  start();
  std::optional<HttpReply> r = http_request(port(), "POST", "/echo", "", "z");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(HttpServerTest, KeepAliveAndPipelining) {
  start();
  HttpTestClient client(port());
  ASSERT_TRUE(
      client.send("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
                  "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nhi"
                  "GET /nope HTTP/1.1\r\nHost: a\r\n\r\n"));
  std::optional<HttpReply> r = client.read_reply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "ok\n");
  EXPECT_NE(r->headers["connection"], "close");  // HTTP/1.1: kept open unless it says close
  r = client.read_reply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "echo:hi\n");
  r = client.read_reply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  // Same connection, later.
  ASSERT_TRUE(client.send("GET /readyz HTTP/1.1\r\nHost: a\r\n\r\n"));
  r = client.read_reply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  // HTTP/1.0 closes after the response.
  ASSERT_TRUE(client.send("GET /healthz HTTP/1.0\r\n\r\n"));
  r = client.read_reply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->headers["connection"], "close");
  EXPECT_TRUE(client.closed_within(3s));
}

TEST_F(HttpServerTest, ExpectContinue) {
  start();
  HttpTestClient client(port());
  ASSERT_TRUE(
      client.send("POST /echo HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n"
                  "Content-Length: 3\r\n\r\n"));
  std::optional<HttpReply> r = client.read_reply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 100);
  ASSERT_TRUE(client.send("abc"));
  r = client.read_reply();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "echo:abc\n");
}

TEST_F(HttpServerTest, TricklingRequestIsCutOff) {
  HttpServerOptions options = loopback_options();
  options.request_timeout_seconds = 0.4;
  start(options);
  HttpTestClient client(port());
  ASSERT_TRUE(client.send("GET /healthz HTTP/1.1\r\nHo"));
  // One byte every 100 ms: each arrives in time for a per-read timeout, but the request as a
  // whole does not.
  bool cut = false;
  for (int i = 0; i < 40 && !cut; ++i) {
    std::this_thread::sleep_for(100ms);
    cut = !client.send("s");
  }
  EXPECT_TRUE(cut || client.closed_within(3s));
  EXPECT_FALSE(client.read_reply(100ms).has_value());  // closed without a response
  // Others are served meanwhile and after.
  std::optional<HttpReply> ok = http_request(port(), "GET", "/healthz");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

TEST_F(HttpServerTest, SilentAndIdleConnectionsAreClosed) {
  HttpServerOptions options = loopback_options();
  options.request_timeout_seconds = 0.3;
  options.idle_timeout_seconds = 0.3;
  start(options);
  HttpTestClient silent(port());
  EXPECT_TRUE(silent.closed_within(3s));
  EXPECT_FALSE(silent.read_reply(100ms).has_value());  // closed without a response

  HttpTestClient idle(port());
  ASSERT_TRUE(idle.send("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"));
  ASSERT_TRUE(idle.read_reply());
  EXPECT_TRUE(idle.closed_within(3s));
}

TEST_F(HttpServerTest, AFullListenerEvictsTheConnectionWaitingLongest) {
  HttpServerOptions options = loopback_options();
  options.max_connections = 2;
  start(options);
  const std::string get = "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n";
  HttpTestClient a(port());
  ASSERT_TRUE(a.send(get));
  ASSERT_TRUE(a.read_reply());  // a waits for its next request from here
  std::this_thread::sleep_for(50ms);
  HttpTestClient b(port());
  ASSERT_TRUE(b.send("GET /healthz HTTP/1.1\r\nHo"));  // b trickles one in, after a
  std::this_thread::sleep_for(50ms);
  // Full: the newcomer is served, and a, which has waited longest, makes room.
  HttpTestClient c(port());
  ASSERT_TRUE(c.send(get));
  const std::optional<HttpReply> rc = c.read_reply();
  ASSERT_TRUE(rc);
  EXPECT_EQ(rc->status, 200);
  EXPECT_TRUE(a.closed_within(3s));
  // b's request, once whole, is answered.
  ASSERT_TRUE(b.send("st: a\r\n\r\n"));
  const std::optional<HttpReply> rb = b.read_reply();
  ASSERT_TRUE(rb);
  EXPECT_EQ(rb->status, 200);
}

TEST_F(HttpServerTest, ConnectionsAnsweringAreNeverEvicted) {
  HttpServerOptions options = loopback_options();
  options.max_connections = 2;
  start(options);
  // Two connections whose responses are pending.
  HttpTestClient a(port());
  ASSERT_TRUE(a.send("GET /hold HTTP/1.1\r\nHost: a\r\n\r\n"));
  ASSERT_TRUE(eventually([&] { return held(0) != nullptr && held(0)->started(); }));
  HttpTestClient b(port());
  ASSERT_TRUE(b.send("GET /hold HTTP/1.1\r\nHost: a\r\n\r\n"));
  ASSERT_TRUE(eventually([&] { return held(1) != nullptr && held(1)->started(); }));
  // Nobody waits for a request, so nobody can be evicted: the newcomer is refused.
  HttpTestClient c(port());
  EXPECT_TRUE(c.closed_within(3s));
  EXPECT_FALSE(c.read_reply(100ms).has_value());
  // Both responses still arrive.
  for (int i = 0; i < 2; ++i) {
    ProducedPart part;
    part.response = HttpResponse::text(200, "later " + std::to_string(i));
    held(i)->push(std::move(part));
  }
  const std::optional<HttpReply> ra = a.read_reply();
  const std::optional<HttpReply> rb = b.read_reply();
  ASSERT_TRUE(ra && rb);
  EXPECT_EQ(ra->body, "later 0\n");
  EXPECT_EQ(rb->body, "later 1\n");
  EXPECT_FALSE(held(0)->cancelled.load());
}

// 200 slowloris connections on an admin listener of 64 (each trickles a header one byte every
// 300 ms and reconnects when closed) while a client scrapes /metrics, /healthz and /readyz on fresh
// connections: every scrape is answered, within 100 ms, for the whole run.
TEST_F(HttpServerTest, ScrapesGetThroughAFloodOfSlowConnections) {
  readiness_.set_model_loaded(true);
  readiness_.set_warmup_done(true);
  HttpServerOptions options = loopback_options();  // the admin listener's: 64 connections, 1 thread
  start(options);
  constexpr int kSlow = 200;
  constexpr auto kTrickle = 300ms;
  std::atomic<bool> done{false};
  std::atomic<int> reconnects{0};
  std::atomic<int> max_open{0};
  std::thread flood([&] {
    std::vector<std::unique_ptr<HttpTestClient>> slow(kSlow);
    std::vector<std::chrono::steady_clock::time_point> next(kSlow);
    const auto now = std::chrono::steady_clock::now();
    for (int i = 0; i < kSlow; ++i) {
      slow[i] = std::make_unique<HttpTestClient>(port());
      slow[i]->send("GET /metrics HTTP/1.1\r\nX-Slow: ");
      next[i] = now + kTrickle * i / kSlow;  // staggered
    }
    while (!done.load()) {
      for (int i = 0; i < kSlow; ++i) {
        if (std::chrono::steady_clock::now() < next[i]) continue;
        next[i] += kTrickle;
        if (!slow[i]->send("a") || slow[i]->closed_within(0ms)) {
          slow[i] = std::make_unique<HttpTestClient>(port());
          slow[i]->send("GET /metrics HTTP/1.1\r\nX-Slow: ");
          ++reconnects;
        }
      }
      max_open.store(std::max(max_open.load(), server_->connections()));
      std::this_thread::sleep_for(5ms);
    }
  });
  // Stops the flood however the test ends (an ASSERT returns early).
  struct StopFlood {
    std::atomic<bool>& done;
    std::thread& flood;
    ~StopFlood() {
      done.store(true);
      flood.join();
    }
  } stop_flood{done, flood};
  std::this_thread::sleep_for(1s);  // the flood fills the listener
  const auto until = std::chrono::steady_clock::now() + 5s;
  int scrapes = 0;
  std::chrono::steady_clock::duration slowest{};
  while (std::chrono::steady_clock::now() < until) {
    for (const char* path : {"/metrics", "/healthz", "/readyz"}) {
      const auto t0 = std::chrono::steady_clock::now();
      const std::optional<HttpReply> r = http_request(port(), "GET", path);
      const auto took = std::chrono::steady_clock::now() - t0;
      slowest = std::max(slowest, took);
      ASSERT_TRUE(r) << path << " was not answered after " << scrapes << " scrapes";
      EXPECT_EQ(r->status, 200) << path;
      EXPECT_LT(took, 100ms) << path << " took "
                             << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                             << " ms";
      ++scrapes;
    }
    std::this_thread::sleep_for(20ms);
  }
  // The flood did fill the listener and was churned through it.
  EXPECT_GE(max_open.load(), options.max_connections);
  EXPECT_GT(reconnects.load(), kSlow);
  EXPECT_GT(scrapes, 100);
  std::printf("%d scrapes, slowest %lld ms, %d slow reconnects\n", scrapes,
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(slowest).count()),
              reconnects.load());
}

TEST_F(HttpServerTest, ConcurrentScrapesWhileTheEngineReports) {
  start();
  std::atomic<bool> done{false};
  std::thread engine([&] {
    while (!done.load()) {
      metrics_.on_step(StepReport{0.01, 2, 2, 0, 2});
      metrics_.on_inter_token(0.01);
    }
  });
  std::vector<std::thread> scrapers;
  std::atomic<int> ok{0};
  for (int t = 0; t < 4; ++t) {
    scrapers.emplace_back([&] {
      for (int i = 0; i < 25; ++i) {
        std::optional<HttpReply> r = http_request(port(), "GET", "/metrics");
        if (r && r->status == 200 &&
            r->body.find("tessera_step_num_seqs_count") != std::string::npos) {
          ++ok;
        }
      }
    });
  }
  for (std::thread& t : scrapers) t.join();
  done.store(true);
  engine.join();
  EXPECT_EQ(ok.load(), 100);
}

TEST_F(HttpServerTest, StopClosesOpenConnections) {
  start();
  HttpTestClient client(port());
  ASSERT_TRUE(client.send("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"));
  ASSERT_TRUE(client.read_reply());
  server_->stop();
  EXPECT_TRUE(client.closed_within(2s));
  server_->stop();  // idempotent
}

TEST(HttpServerSetupTest, StartAndRouteErrors) {
  HttpServerOptions bad;
  bad.listen = "nonsense";
  EXPECT_EQ(HttpServer(bad).start().code(), absl::StatusCode::kInvalidArgument);
  bad.listen = "127.0.0.1:70000";
  EXPECT_EQ(HttpServer(bad).start().code(), absl::StatusCode::kInvalidArgument);

  HttpServer first(loopback_options());
  EXPECT_EQ(first.port(), 0);
  EXPECT_EQ(first.add_route("G T", "/x", nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(first.add_route("GET", "x", nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(first.add_route("GET", "/x?y", nullptr).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(first.add_route("GET", "/x", [](const HttpRequest&) { return HttpResponse{}; }).ok());
  EXPECT_EQ(first.add_route("GET", "/x", nullptr).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(first.start().ok());
  EXPECT_EQ(first.start().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(first.add_route("GET", "/y", nullptr).code(), absl::StatusCode::kFailedPrecondition);

  HttpServerOptions taken = loopback_options();
  taken.listen = "127.0.0.1:" + std::to_string(first.port());
  const absl::Status s = HttpServer(taken).start();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find(taken.listen), absl::string_view::npos) << s;
}

TEST(ReadinessStateTest, ReasonsInOrder) {
  ReadinessState r;
  EXPECT_FALSE(r.ready());
  EXPECT_EQ(r.not_ready_reason(), "model loading");
  r.set_warmup_done(true);
  EXPECT_EQ(r.not_ready_reason(), "model loading");
  r.set_model_loaded(true);
  EXPECT_TRUE(r.ready());
  r.set_warmup_done(false);
  EXPECT_EQ(r.not_ready_reason(), "warmup in progress");
  r.set_warmup_progress(3, 14);
  EXPECT_EQ(r.not_ready_reason(), "warming up: 3/14 GEMMs");
  r.set_draining();
  EXPECT_EQ(r.not_ready_reason(), "draining");
  EXPECT_FALSE(r.ready());
}

}  // namespace
}  // namespace tessera::server
