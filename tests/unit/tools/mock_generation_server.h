// An in-process stand-in for tesserad's Generation service, for testing the client tools
// without a model: it "generates" token ids 0, 1, 2, ... (text "t0 t1 t2 ...") at a configurable
// pace, one token per chunk, and can fail requests on demand. Prompts are counted as words
// (text), messages' words (chat) or ids (token ids); BOS adds one when asked.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "grpcpp/grpcpp.h"
#include "tessera/v1/tessera.grpc.pb.h"

namespace tessera::cli::testing {

struct MockBehavior {
  std::chrono::microseconds token_delay{0};  // before each generated token
  int fail_every = 0;  // every Nth generate call fails with RESOURCE_EXHAUSTED; 0 = never
  int short_by = 0;    // generate this many tokens fewer than max_tokens
  int64_t vocab_size = 1000;
  int64_t max_model_len = 4096;
};

class MockGenerationService final : public v1::Generation::Service {
 public:
  explicit MockGenerationService(MockBehavior behavior) : behavior_(behavior) {}

  int max_in_flight() const { return max_in_flight_.load(); }
  int calls() const { return calls_.load(); }
  const v1::GenerateRequest& last_request() const { return last_request_; }
  // Every generate request received, in arrival order.
  std::vector<v1::GenerateRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

  grpc::Status GenerateStream(grpc::ServerContext* context, const v1::GenerateRequest* request,
                              grpc::ServerWriter<v1::GenerateStreamChunk>* writer) override {
    InFlight guard(*this);
    if (grpc::Status s = admit(*request); !s.ok()) return s;
    const int32_t n = tokens_to_generate(*request);
    for (int32_t i = 0; i < n; ++i) {
      std::this_thread::sleep_for(behavior_.token_delay);
      if (context->IsCancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
      v1::GenerateStreamChunk chunk;
      chunk.set_request_id(request->request_id());
      chunk.add_token_ids(i);
      chunk.set_text(token_text(i));
      if (request->logprobs()) add_logprobs(i, request->top_logprobs(), *chunk.add_logprobs());
      if (!writer->Write(chunk))
        return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    }
    v1::GenerateStreamChunk last;
    last.set_request_id(request->request_id());
    last.set_finish_reason(v1::FINISH_REASON_LENGTH);
    last.mutable_usage()->set_prompt_tokens(prompt_tokens(*request));
    last.mutable_usage()->set_completion_tokens(n);
    last.mutable_timings()->set_time_to_first_token_seconds(0.001);
    last.mutable_timings()->set_total_seconds(0.002);
    writer->Write(last);
    return grpc::Status::OK;
  }

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        v1::GenerateResponse* response) override {
    InFlight guard(*this);
    if (grpc::Status s = admit(*request); !s.ok()) return s;
    const int32_t n = tokens_to_generate(*request);
    for (int32_t i = 0; i < n; ++i) {
      response->add_token_ids(i);
      response->mutable_text()->append(token_text(i));
      if (request->logprobs()) add_logprobs(i, request->top_logprobs(), *response->add_logprobs());
    }
    response->set_request_id(request->request_id());
    response->set_model("mock");
    response->set_finish_reason(v1::FINISH_REASON_LENGTH);
    response->mutable_usage()->set_prompt_tokens(prompt_tokens(*request));
    response->mutable_usage()->set_completion_tokens(n);
    response->mutable_timings()->set_time_to_first_token_seconds(0.001);
    return grpc::Status::OK;
  }

  grpc::Status Tokenize(grpc::ServerContext*, const v1::TokenizeRequest* request,
                        v1::TokenizeResponse* response) override {
    if (request->has_chat()) {
      for (const auto& m : request->chat().messages()) add_words(m.content(), *response);
    } else {
      if (request->add_special_tokens()) {
        response->add_token_ids(1);
        response->add_tokens("<s>");
      }
      add_words(request->text(), *response);
    }
    return grpc::Status::OK;
  }

  grpc::Status ListModels(grpc::ServerContext*, const v1::ListModelsRequest*,
                          v1::ListModelsResponse* response) override {
    *response->add_models() = info();
    return grpc::Status::OK;
  }

  grpc::Status GetModelInfo(grpc::ServerContext*, const v1::GetModelInfoRequest* request,
                            v1::ModelInfo* response) override {
    if (!request->model().empty() && request->model() != "mock") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("model: unknown model '", request->model(), "'"));
    }
    *response = info();
    return grpc::Status::OK;
  }

 private:
  struct InFlight {
    explicit InFlight(MockGenerationService& s) : s_(s) {
      const int now = ++s_.in_flight_;
      int seen = s_.max_in_flight_.load();
      while (now > seen && !s_.max_in_flight_.compare_exchange_weak(seen, now)) {
      }
    }
    ~InFlight() { --s_.in_flight_; }
    MockGenerationService& s_;
  };

  grpc::Status admit(const v1::GenerateRequest& request) {
    const int call = ++calls_;
    if (call == 1) last_request_ = request;  // tests that look at it send one request
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push_back(request);
    }
    if (request.has_prompt() && request.prompt().empty()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "prompt: must not be empty");
    }
    if (behavior_.fail_every > 0 && call % behavior_.fail_every == 0) {
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full (limit 0)");
    }
    return grpc::Status::OK;
  }

  int32_t tokens_to_generate(const v1::GenerateRequest& request) const {
    const int32_t max_tokens =
        request.stopping().has_max_tokens() ? request.stopping().max_tokens() : 16;
    return std::max(0, max_tokens - behavior_.short_by);
  }

  static std::string token_text(int32_t i) { return absl::StrCat("t", i, " "); }

  static void add_logprobs(int32_t i, int32_t top, v1::GeneratedTokenLogprobs& lp) {
    lp.mutable_chosen()->set_token_id(i);
    lp.mutable_chosen()->set_token(token_text(i));
    lp.mutable_chosen()->set_logprob(-0.5f);
    for (int32_t k = 0; k < top; ++k) {
      v1::TokenLogprob& alt = *lp.add_top();
      alt.set_token_id(k);
      alt.set_token(token_text(k));
      alt.set_logprob(-1.0f - k);
    }
  }

  static int32_t count_words(const std::string& text) {
    return static_cast<int32_t>(
        std::vector<std::string>(absl::StrSplit(text, ' ', absl::SkipEmpty())).size());
  }

  static int32_t prompt_tokens(const v1::GenerateRequest& request) {
    if (request.has_token_ids()) return request.token_ids().ids_size();
    if (request.has_chat()) {
      int32_t n = 0;
      for (const auto& m : request.chat().messages()) n += count_words(m.content());
      return n;
    }
    return 1 + count_words(request.prompt());
  }

  static void add_words(const std::string& text, v1::TokenizeResponse& response) {
    for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
      response.add_token_ids(100 + static_cast<int32_t>(word.size()));
      response.add_tokens(absl::StrCat(" ", std::string(word)));
    }
  }

  v1::ModelInfo info() const {
    v1::ModelInfo m;
    m.set_id("mock");
    m.set_path("/models/mock.gguf");
    m.set_architecture("llama");
    m.set_vocab_size(behavior_.vocab_size);
    m.set_max_model_len(behavior_.max_model_len);
    m.set_backend("cpu");
    m.set_dtype("f32");
    m.set_num_layers(2);
    m.set_num_heads(4);
    m.set_num_kv_heads(2);
    m.set_has_chat_template(true);
    return m;
  }

  const MockBehavior behavior_;
  std::atomic<int> in_flight_{0};
  std::atomic<int> max_in_flight_{0};
  std::atomic<int> calls_{0};
  v1::GenerateRequest last_request_;
  mutable std::mutex mu_;
  std::vector<v1::GenerateRequest> requests_;
};

// The service, listening on a free port of 127.0.0.1 for the test's lifetime.
class MockServer {
 public:
  explicit MockServer(MockBehavior behavior = {}) : service_(behavior) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~MockServer() { server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5)); }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  MockGenerationService& service() { return service_; }

 private:
  MockGenerationService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// An address where nothing listens (a port that was free a moment ago).
inline std::string unused_address() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
}

}  // namespace tessera::cli::testing
