// The daemon's life: health NOT_SERVING while loading, SERVING, NOT_SERVING while draining; the
// drain lets in-flight requests finish, rejects new ones with UNAVAILABLE, and cancels what is
// left at drain_timeout with a clear status; the tesserad binary exits 0 on SIGTERM and non-zero
// with one line on bad configuration; TLS and mTLS.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/support/sync_stream.h>
#include <mutex>
#include <regex>
#include <thread>

#include "google/protobuf/unknown_field_set.h"
#include "tests/e2e/test_server.h"

namespace tessera::e2e {
namespace {

// grpc.health.v1.Health/Watch for "": every status the server sends, until the call ends.
class HealthWatcher {
 public:
  explicit HealthWatcher(std::shared_ptr<grpc::Channel> channel)
      : channel_(std::move(channel)), thread_([this] { run(); }) {}
  ~HealthWatcher() {
    ctx_.TryCancel();
    thread_.join();
  }
  std::vector<int> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }
  bool wait_for(int status, std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!seen_.empty() && seen_.back() == status) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

 private:
  void run() {
    grpc::Slice empty("");  // HealthCheckRequest{service: ""}
    grpc::ByteBuffer request(&empty, 1);
    std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
        grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
            channel_.get(),
            grpc::internal::RpcMethod("/grpc.health.v1.Health/Watch", grpc::internal::RpcMethod::SERVER_STREAMING),
            &ctx_, request));
    grpc::ByteBuffer response;
    while (reader->Read(&response)) {
      std::vector<grpc::Slice> slices;
      (void)response.Dump(&slices);
      std::string wire;
      for (const grpc::Slice& s : slices) wire.append(reinterpret_cast<const char*>(s.begin()), s.size());
      google::protobuf::UnknownFieldSet fields;
      int status = 0;
      if (fields.ParseFromString(wire)) {
        for (int i = 0; i < fields.field_count(); ++i) {
          if (fields.field(i).number() == 1) status = static_cast<int>(fields.field(i).varint());
        }
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (seen_.empty() || seen_.back() != status) seen_.push_back(status);
    }
    (void)reader->Finish();
  }

  std::shared_ptr<grpc::Channel> channel_;
  grpc::ClientContext ctx_;
  std::mutex mu_;
  std::vector<int> seen_;
  std::thread thread_;
};

TEST(LifecycleE2E, HealthGoesNotServingServingNotServingAcrossLoadAndDrain_DrainFinishesInFlight) {
  TESSERA_SKIP_WITHOUT_MODEL();
  server::DaemonConfig config = test_config();
  config.drain_timeout_seconds = 120;  // far more than the in-flight request needs, even on a busy machine
  auto server = TestServer::start(config, /*load=*/false);
  ASSERT_NE(server, nullptr);
  grpc::Channel& channel = *server->channel();

  // Loading: the server answers, but is not serving.
  EXPECT_EQ(health_check(channel, ""), kNotServing);
  EXPECT_EQ(health_check(channel, "tessera.v1.Generation"), kNotServing);
  EXPECT_EQ(server->status().state(), "loading");
  const UnaryResult early = generate(server->generation(), greedy_request("Hello", 2));
  EXPECT_EQ(early.status.error_code(), grpc::StatusCode::UNAVAILABLE) << early.status.error_message();
  EXPECT_NE(early.status.error_message().find("loading"), std::string::npos);
  HealthWatcher watcher(server->channel());
  ASSERT_TRUE(watcher.wait_for(kNotServing, std::chrono::seconds(10)));

  ASSERT_TRUE(server->daemon().load_model().ok());
  EXPECT_EQ(health_check(channel, ""), kServing);
  EXPECT_EQ(health_check(channel, "tessera.v1.Generation"), kServing);
  EXPECT_EQ(server->status().state(), "serving");
  EXPECT_TRUE(watcher.wait_for(kServing, std::chrono::seconds(10)));

  // In flight when the drain starts: it must finish normally.
  constexpr int kTokens = 24;
  std::atomic<int> chunks{0};
  StreamResult in_flight;
  std::thread client([&] {
    grpc::ClientContext ctx;
    auto reader = server->generation().GenerateStream(&ctx, greedy_request("Once upon a time", kTokens, true));
    v1::GenerateStreamChunk chunk;
    while (reader->Read(&chunk)) {
      in_flight.token_ids.insert(in_flight.token_ids.end(), chunk.token_ids().begin(), chunk.token_ids().end());
      in_flight.chunks.push_back(chunk);
      ++chunks;
    }
    in_flight.status = reader->Finish();
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (chunks.load() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GT(chunks.load(), 0);

  std::thread drain([&] { server->daemon().drain(); });
  ASSERT_TRUE(watcher.wait_for(kNotServing, std::chrono::seconds(10)));
  EXPECT_EQ(health_check(channel, ""), kNotServing);
  EXPECT_EQ(health_check(channel, "tessera.v1.Generation"), kNotServing);
  EXPECT_EQ(server->status().state(), "draining");
  const UnaryResult rejected = generate(server->generation(), greedy_request("Hello", 2));
  EXPECT_EQ(rejected.status.error_code(), grpc::StatusCode::UNAVAILABLE) << rejected.status.error_message();
  EXPECT_NE(rejected.status.error_message().find("draining"), std::string::npos);
  const StreamResult rejected_stream = generate_stream(server->generation(), greedy_request("Hello", 2));
  EXPECT_EQ(rejected_stream.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  const int chunks_when_rejected = chunks.load();

  client.join();
  drain.join();
  ASSERT_TRUE(in_flight.status.ok()) << in_flight.status.error_message();
  EXPECT_EQ(in_flight.token_ids.size(), static_cast<size_t>(kTokens));
  EXPECT_EQ(in_flight.chunks.back().finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_LT(chunks_when_rejected, kTokens) << "the new request was rejected while one was in flight";

  const std::vector<int> seen = watcher.seen();
  ASSERT_GE(seen.size(), 3u);
  EXPECT_EQ(seen[0], kNotServing);
  EXPECT_EQ(seen[1], kServing);
  EXPECT_EQ(seen[2], kNotServing);
}

TEST(LifecycleE2E, DrainTimeoutCancelsWhatIsLeftWithAClearStatus) {
  TESSERA_SKIP_WITHOUT_MODEL();
  server::DaemonConfig config = test_config();
  config.drain_timeout_seconds = 0.5;
  auto server = TestServer::start(config);
  ASSERT_NE(server, nullptr);
  constexpr int kStreams = 3;
  std::vector<StreamResult> results(kStreams);
  std::atomic<int> started{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      grpc::ClientContext ctx;
      auto reader = server->generation().GenerateStream(&ctx, greedy_request("A story:", 1500, true));
      v1::GenerateStreamChunk chunk;
      bool first = true;
      while (reader->Read(&chunk)) {
        if (first) ++started;
        first = false;
        results[i].token_ids.insert(results[i].token_ids.end(), chunk.token_ids().begin(), chunk.token_ids().end());
      }
      results[i].status = reader->Finish();
    });
  }
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (started.load() < kStreams && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(started.load(), kStreams);
  const auto t0 = std::chrono::steady_clock::now();
  server->daemon().drain();
  const double drain_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (std::thread& t : clients) t.join();
  for (const StreamResult& r : results) {
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED) << r.status.error_message();
    EXPECT_NE(r.status.error_message().find("draining"), std::string::npos) << r.status.error_message();
    EXPECT_NE(r.status.error_message().find("drain_timeout"), std::string::npos) << r.status.error_message();
    EXPECT_LT(r.token_ids.size(), 1500u);
  }
  EXPECT_LT(drain_seconds, 15.0);
}

// --- the tesserad binary ---------------------------------------------------------------------

struct Process {
  pid_t pid = -1;
  int err_fd = -1;
  std::string err;  // stderr so far
  std::mutex mu;
  std::thread reader;

  ~Process() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (reader.joinable()) reader.join();
    if (err_fd >= 0) close(err_fd);
  }
  std::string stderr_text() {
    std::lock_guard<std::mutex> lock(mu);
    return err;
  }
  int wait_exit() {
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    if (reader.joinable()) reader.join();
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

std::unique_ptr<Process> spawn(const std::vector<std::string>& args) {
  // Everything the child needs is prepared before fork: between fork and exec it may only make
  // async-signal-safe calls (this process has gRPC threads that may hold the allocator's locks).
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) return nullptr;
  auto p = std::make_unique<Process>();
  p->pid = fork();
  if (p->pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    const int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    close(fds[0]);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  p->err_fd = fds[0];
  Process* raw = p.get();
  p->reader = std::thread([raw] {
    char buf[4096];
    for (ssize_t n; (n = read(raw->err_fd, buf, sizeof(buf))) > 0;) {
      std::lock_guard<std::mutex> lock(raw->mu);
      raw->err.append(buf, static_cast<size_t>(n));
    }
  });
  return p;
}

TEST(TesseradE2E, ServesThenExitsZeroOnSigtermWithJsonLogs) {
  TESSERA_SKIP_WITHOUT_MODEL();
  auto p = spawn({TESSERAD, "--model", default_model_path(), "--listen", "127.0.0.1:0", "--openai-listen", "127.0.0.1:0", "--admin-listen",
                  "127.0.0.1:0", "--kv-cache-bytes",
                  "64MiB", "--max-model-len", "1024", "--log-format", "json", "--drain-timeout", "5s"});
  ASSERT_NE(p, nullptr);
  std::smatch m;
  const std::regex listening("listening on 127\\.0\\.0\\.1:([0-9]+)");
  std::string port;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (port.empty() && std::chrono::steady_clock::now() < until) {
    const std::string err = p->stderr_text();
    if (std::regex_search(err, m, listening)) port = m[1];
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(port.empty()) << p->stderr_text();
  auto channel = make_channel("127.0.0.1:" + port);
  while (health_check(*channel, "") != kServing && std::chrono::steady_clock::now() < until + std::chrono::seconds(60)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(health_check(*channel, ""), kServing) << p->stderr_text();
  auto stub = v1::Generation::NewStub(channel);
  v1::GenerateRequest request = greedy_request("Hello", 4, true);
  request.set_request_id("subprocess-1");
  const UnaryResult r = generate(*stub, request);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.response.usage().completion_tokens(), 4);

  ASSERT_EQ(kill(p->pid, SIGTERM), 0);
  EXPECT_EQ(p->wait_exit(), 0) << p->stderr_text();
  const std::string err = p->stderr_text();
  size_t lines = 0;
  bool request_line = false;
  for (size_t start = 0; start < err.size();) {
    const size_t end = err.find('\n', start);
    const std::string line = err.substr(start, end - start);
    start = end == std::string::npos ? err.size() : end + 1;
    if (line.empty()) continue;
    ++lines;
    EXPECT_EQ(line.front(), '{') << line;
    EXPECT_EQ(line.back(), '}') << line;
    if (line.find("\"request_id\":\"subprocess-1\"") != std::string::npos) request_line = true;
  }
  EXPECT_GE(lines, 4u) << err;
  EXPECT_TRUE(request_line) << "no log line carries the request id:\n" << err;
  EXPECT_NE(err.find("drained"), std::string::npos) << err;
}

// One line on stderr naming the problem, and a non-zero exit, before anything is served.
void expect_fails_with_one_line(const std::vector<std::string>& args, const std::vector<std::string>& mentions,
                                bool one_line = true) {
  auto p = spawn(args);
  ASSERT_NE(p, nullptr);
  const int code = p->wait_exit();
  const std::string err = p->stderr_text();
  EXPECT_NE(code, 0) << err;
  std::string text = err;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (one_line) {
    EXPECT_EQ(text.find('\n'), std::string::npos) << "more than one line:\n" << err;
  }
  for (const std::string& m : mentions) EXPECT_NE(err.find(m), std::string::npos) << m << " not in: " << err;
}

TEST(TesseradE2E, BadConfigurationStopsItAtStartWithOneLine) {
  const std::string dir = ::testing::TempDir();
  expect_fails_with_one_line({TESSERAD, "--max-num-seqs", "0"}, {"max_num_seqs", "\"0\"", "allowed"});
  expect_fails_with_one_line({TESSERAD, "--log-format", "xml"}, {"log_format", "xml", "text, json"});
  expect_fails_with_one_line({TESSERAD, "--listen", "nowhere"}, {"listen", "nowhere", "HOST:PORT"});
  expect_fails_with_one_line({TESSERAD, "--kv-cache-bytes", "lots"}, {"kv_cache_bytes", "lots"});
  expect_fails_with_one_line({TESSERAD, "--drain-timeout", "-1s"}, {"drain_timeout", "-1s"});
  expect_fails_with_one_line({TESSERAD, "--no-such-flag", "1"}, {"--no-such-flag"});
  const std::string unknown = dir + "/unknown_key.yaml";
  std::ofstream(unknown) << "listen: 127.0.0.1:0\nmax_seqs: 4\n";
  expect_fails_with_one_line({TESSERAD, "--config", unknown}, {"max_seqs", unknown, "line 2"});
  const std::string bad_value = dir + "/bad_value.yaml";
  std::ofstream(bad_value) << "block_size: 4096\n";
  expect_fails_with_one_line({TESSERAD, "--config", bad_value}, {"block_size", "4096", "[1, 1024]"});
  expect_fails_with_one_line({TESSERAD, "--config", dir + "/missing.yaml"}, {"missing.yaml"});
  expect_fails_with_one_line({TESSERAD, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--openai-listen", "127.0.0.1:0", "--tls-cert", dir + "/no-cert.pem",
                              "--tls-key", dir + "/no-key.pem"},
                             {"tls_cert", "no-cert.pem"});
  // The server is up (health NOT_SERVING) while the model loads, so this one logs more before
  // the error line.
  expect_fails_with_one_line({TESSERAD, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0", "--openai-listen", "127.0.0.1:0",
                              "--model", dir + "/no-model.gguf"},
                             {"cannot load the model", "no-model.gguf"}, /*one_line=*/false);
}

// --- TLS ----------------------------------------------------------------------------------------

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool make_certificates(const std::string& dir) {
  const std::string script =
      "set -e; cd '" + dir + "'; "
      "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=tessera-test-ca 2>/dev/null; "
      "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > san.ext; "
      "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost 2>/dev/null; "
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile san.ext 2>/dev/null; "
      "openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=client 2>/dev/null; "
      "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 2>/dev/null";
  return std::system(script.c_str()) == 0;
}

grpc::Status admin_call(const std::string& address, const grpc::SslCredentialsOptions& options) {
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(address, grpc::SslCredentials(options), args);
  auto admin = v1::Admin::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ServerStatus status;
  return admin->GetStatus(&ctx, v1::GetStatusRequest(), &status);
}

TEST(TlsE2E, TlsServesAndMtlsRequiresAClientCertificate) {
  if (std::system("openssl version > /dev/null 2>&1") != 0) GTEST_SKIP() << "openssl not installed";
  const std::string dir = ::testing::TempDir() + "/tessera-tls";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(make_certificates(dir));
  server::DaemonConfig config = test_config();
  config.tls_cert = dir + "/server.pem";
  config.tls_key = dir + "/server.key";
  {
    auto server = TestServer::start(config, /*load=*/false);  // GetStatus needs no model
    ASSERT_NE(server, nullptr);
    grpc::SslCredentialsOptions trusting;
    trusting.pem_root_certs = read_file(dir + "/ca.pem");
    const grpc::Status ok = admin_call(server->address(), trusting);
    EXPECT_TRUE(ok.ok()) << ok.error_message();
    const grpc::Status plaintext = [&] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1::ServerStatus status;
      return v1::Admin::NewStub(make_channel(server->address()))->GetStatus(&ctx, v1::GetStatusRequest(), &status);
    }();
    EXPECT_FALSE(plaintext.ok()) << "a plaintext client reached a TLS server";
  }
  config.tls_client_ca = dir + "/ca.pem";
  {
    auto server = TestServer::start(config, /*load=*/false);
    ASSERT_NE(server, nullptr);
    grpc::SslCredentialsOptions no_cert;
    no_cert.pem_root_certs = read_file(dir + "/ca.pem");
    EXPECT_FALSE(admin_call(server->address(), no_cert).ok()) << "mTLS let a client without a certificate in";
    grpc::SslCredentialsOptions with_cert = no_cert;
    with_cert.pem_private_key = read_file(dir + "/client.key");
    with_cert.pem_cert_chain = read_file(dir + "/client.pem");
    const grpc::Status ok = admin_call(server->address(), with_cert);
    EXPECT_TRUE(ok.ok()) << ok.error_message();
  }
  config.tls_key = dir + "/does-not-exist.key";
  server::Daemon daemon(config);
  const absl::Status s = daemon.start();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("does-not-exist.key"), std::string::npos) << s;
  EXPECT_NE(std::string(s.message()).find("tls_key"), std::string::npos) << s;
}

}  // namespace
}  // namespace tessera::e2e
