#include "server/generate_calls.h"

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/splitmix64.h"
#include "base/status_macros.h"
#include "runtime/tokenizer/utf8.h"
#include "server/logging.h"
#include "server/output_conversion.h"
#include "server/proto_codec.h"
#include "server/request_validation.h"
#include "server/status_mapping.h"

namespace tessera::server {

namespace {

using tessera::v1::GenerateRequest;
using SystemClock = std::chrono::system_clock;

// What a reactor shares with its OutputStream's notifier. The notifier runs on the engine thread
// and only queues the link on the OutputDelivery; `deliver` runs on the delivery thread and may
// outlive the reactor: it reaches the reactor only through `on_output`, which OnDone clears under
// the same lock.
struct Link final : Deliverable {
  std::mutex mu;
  std::function<void()> on_output;  // called with `mu` held

  void deliver() override {
    std::lock_guard<std::mutex> lock(mu);
    if (on_output) on_output();
  }
};

void attach(const std::shared_ptr<Link>& link, OutputStream& stream, OutputDelivery& delivery) {
  stream.set_notifier([link, &delivery] { delivery.post(link); });
}

void log_finished(const std::string& request_id, const RequestOutput& out) {
  if (out.status.ok()) {
    log_request(spdlog::level::info, request_id,
                "finished: reason={} prompt_tokens={} completion_tokens={} queue={:.3f}s "
                "ttft={:.3f}s total={:.3f}s",
                finish_reason_name(out.finish_reason), out.prompt_tokens, out.completion_tokens,
                out.queue_seconds, out.ttft_seconds, out.total_seconds);
  } else {
    log_request(spdlog::level::info, request_id,
                "ended: {} after completion_tokens={} total={:.3f}s", out.status.ToString(),
                out.completion_tokens, out.total_seconds);
  }
}

// After a call has finished (cancelled, deadline) the engine still ends the request with its own
// final output (e.g. DEADLINE_EXCEEDED once it freed the blocks); log it when it arrives, also
// after the reactor is gone. Returns true when the final output was seen.
bool log_outcome(OutputStream& stream, const std::string& request_id) {
  while (std::optional<RequestOutput> out = stream.try_next()) {
    if (out->finished) {
      log_finished(request_id, *out);
      return true;
    }
  }
  return false;
}

// OnDone: the reactor is about to be deleted; the notifier may only log from now on.
void detach(Link& link, const RequestHandle& handle, const std::string& request_id, bool final_seen) {
  std::lock_guard<std::mutex> lock(link.mu);
  if (final_seen || !handle.stream) {
    link.on_output = nullptr;
    return;
  }
  // A weak reference: the stream owns this notifier, so a strong one would be a cycle.
  link.on_output = [weak = std::weak_ptr<OutputStream>(handle.stream), request_id] {
    if (std::shared_ptr<OutputStream> stream = weak.lock()) log_outcome(*stream, request_id);
  };
}

void log_rejected(const std::string& request_id, const absl::Status& status) {
  log_request(spdlog::level::info, request_id, "rejected: {}", status.ToString());
}

bool deadline_passed(grpc::CallbackServerContext* context) {
  const SystemClock::time_point deadline = context->deadline();
  return deadline != SystemClock::time_point::max() && SystemClock::now() >= deadline;
}

// Reads and submits the request; on failure the status to finish the call with.
absl::StatusOr<SubmittedRequest> parse_and_submit(grpc::CallbackServerContext* context,
                                                  const grpc::ByteBuffer* buffer,
                                                  ServingState& state, std::string& request_id) {
  GenerateRequest request;
  if (absl::Status s = parse_request(*buffer, request); !s.ok()) {
    request_id = new_request_id();
    return s;
  }
  request_id = request_id_for(request);
  return submit_generate(request, request_id, state, context->deadline());
}

// The client cancelled or its deadline passed: the status the call ends with. A cancel is passed
// on to the engine; past the deadline the engine ends the request itself (DEADLINE_EXCEEDED,
// blocks freed), so nothing is cancelled here.
grpc::Status end_call_for_client(grpc::CallbackServerContext* context, const RequestHandle& handle,
                                 const std::string& request_id) {
  const bool deadline = deadline_passed(context);
  if (!deadline) handle.cancel();
  const char* what = deadline ? "deadline exceeded" : "cancelled by the client";
  log_request(spdlog::level::debug, request_id, "{}", what);
  return grpc::Status(deadline ? grpc::StatusCode::DEADLINE_EXCEEDED : grpc::StatusCode::CANCELLED, what);
}

// What both Generate reactors share: submitting the request (a rejection finishes the call at
// once), delivering the engine's outputs to the reactor's pump_locked() under link_->mu, and
// detaching from the stream when gRPC is done with the call. `Reactor` is the gRPC reactor base
// (unary or server-streaming); both spell Finish(grpc::Status) the same.
template <typename Reactor>
class GenerateCall : public Reactor {
 public:
  void OnDone() override {
    bool final_seen;
    {
      std::lock_guard<std::mutex> lock(link_->mu);
      final_seen = final_seen_;
    }
    detach(*link_, handle_, request_id_, final_seen);
    delete this;
  }

 protected:
  GenerateCall(grpc::CallbackServerContext* context, OutputDelivery& delivery)
      : context_(context), delivery_(delivery), link_(std::make_shared<Link>()) {}

  // Parses and submits; false when the request was rejected (the call is then finished).
  bool submit(const grpc::ByteBuffer* request, ServingState& state) {
    absl::StatusOr<SubmittedRequest> submitted = parse_and_submit(context_, request, state, request_id_);
    if (!submitted.ok()) {
      log_rejected(request_id_, submitted.status());
      state.count_rejected(submitted.status().code());
      finish_called_ = true;
      final_seen_ = true;
      this->Finish(to_grpc_status(submitted.status()));
      return false;
    }
    handle_ = submitted->handle;
    model_ = submitted->model;
    return true;
  }

  // From here on every output the engine publishes runs `pump_locked` with link_->mu held.
  void deliver_outputs_to(std::function<void()> pump_locked) {
    {
      std::lock_guard<std::mutex> lock(link_->mu);
      link_->on_output = std::move(pump_locked);
    }
    attach(link_, *handle_.stream, delivery_);
  }

  grpc::CallbackServerContext* context_;
  OutputDelivery& delivery_;
  std::shared_ptr<Link> link_;
  std::string request_id_;
  RequestHandle handle_;
  ServedModel* model_ = nullptr;
  // Guarded by link_->mu once the outputs are delivered:
  bool finish_called_ = false;
  bool final_seen_ = false;  // the engine's last output for this request arrived
};

// Generate: collects the outputs into one response.
class GenerateUnaryReactor final : public GenerateCall<grpc::ServerUnaryReactor> {
 public:
  GenerateUnaryReactor(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                       grpc::ByteBuffer* response, ServingState& state, OutputDelivery& delivery)
      : GenerateCall(context, delivery), response_buffer_(response) {
    if (!submit(request, state)) return;
    response_.set_request_id(request_id_);
    response_.set_model(model_->id());
    deliver_outputs_to([this] { pump_locked(); });
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(link_->mu);
    if (finish_called_) return;
    finish_called_ = true;
    Finish(end_call_for_client(context_, handle_, request_id_));
  }

 private:
  void pump_locked() {
    if (finish_called_) {
      if (!final_seen_) final_seen_ = log_outcome(*handle_.stream, request_id_);
      return;
    }
    while (std::optional<RequestOutput> out = handle_.stream->try_next()) {
      if (out->finished) {
        final_seen_ = true;
        log_finished(request_id_, *out);
        finish_called_ = true;
        if (!out->status.ok()) {
          Finish(to_grpc_status(out->status));
          return;
        }
        append_to_response(*out, model_->tokenizer(), response_);
        Finish(to_grpc_status(serialize_response(response_, *response_buffer_)));
        return;
      }
      append_to_response(*out, model_->tokenizer(), response_);
    }
  }

  grpc::ByteBuffer* response_buffer_;
  tessera::v1::GenerateResponse response_;
};

// GenerateStream: one chunk per engine output; the last carries the outcome.
class GenerateStreamReactor final : public GenerateCall<grpc::ServerWriteReactor<grpc::ByteBuffer>> {
 public:
  GenerateStreamReactor(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                        ServingState& state, OutputDelivery& delivery)
      : GenerateCall(context, delivery) {
    if (!submit(request, state)) return;
    deliver_outputs_to([this] { pump_locked(); });
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(link_->mu);
    writing_ = false;
    if (!ok && !ended_ && !finish_called_) {
      // The stream is broken (the client went away): stop generating.
      ended_ = true;
      end_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "the client stopped reading");
      handle_.cancel();
    }
    pump_locked();
  }

  void OnCancel() override {
    std::lock_guard<std::mutex> lock(link_->mu);
    if (finish_called_ || ended_) return;
    ended_ = true;
    end_status_ = end_call_for_client(context_, handle_, request_id_);
    pump_locked();
  }

 private:
  // Writes the next output when no write is in flight; finishes the call after the last one.
  void pump_locked() {
    if (finish_called_) {
      if (!final_seen_) final_seen_ = log_outcome(*handle_.stream, request_id_);
      return;
    }
    if (writing_) return;
    if (ended_) {
      finish_called_ = true;
      Finish(end_status_);
      final_seen_ = log_outcome(*handle_.stream, request_id_);
      return;
    }
    std::optional<RequestOutput> out = handle_.stream->try_next();
    if (!out) return;
    // The server ended the request (a drain's cancel: the client's own cancel ends the call in
    // OnCancel before the engine answers): a last chunk says so before the status does.
    const bool ended_by_server =
        out->finished && out->status.code() == absl::StatusCode::kCancelled;
    if (out->finished) {
      final_seen_ = true;
      log_finished(request_id_, *out);
      if (!out->status.ok() && !ended_by_server) {
        finish_called_ = true;
        Finish(to_grpc_status(out->status));
        return;
      }
    }
    to_stream_chunk(*out, request_id_, model_->tokenizer(), chunk_);
    if (ended_by_server) {
      chunk_.set_finish_reason(tessera::v1::FINISH_REASON_CANCELLED);
      chunk_.set_message(std::string(out->status.message()));
    }
    if (absl::Status s = serialize_response(chunk_, write_buffer_); !s.ok()) {
      handle_.cancel();
      finish_called_ = true;
      Finish(to_grpc_status(s));
      return;
    }
    if (out->finished) {
      finish_called_ = true;
      StartWriteAndFinish(&write_buffer_, grpc::WriteOptions(), to_grpc_status(out->status));
      return;
    }
    writing_ = true;
    StartWrite(&write_buffer_);
  }

  tessera::v1::GenerateStreamChunk chunk_;
  grpc::ByteBuffer write_buffer_;  // the chunk being written; kept until OnWriteDone
  // Guarded by link_->mu once the notifier is attached:
  bool writing_ = false;
  bool ended_ = false;  // cancelled or broken: finish with end_status_ once no write is in flight
  grpc::Status end_status_;
};

}  // namespace

std::string new_request_id() {
  static std::atomic<uint64_t> counter{std::random_device{}() * kSplitMix64Gamma};
  // A SplitMix64 stream: distinct, well-spread ids.
  const uint64_t z = splitmix64(counter.fetch_add(kSplitMix64Gamma, std::memory_order_relaxed));
  return absl::StrFormat("req-%016x", z);
}

std::string request_id_for(const GenerateRequest& request) {
  const std::string& id = request.request_id();
  if (id.empty() || id.size() > kMaxRequestIdBytes || !validate_utf8(id).ok()) return new_request_id();
  return id;
}

absl::StatusOr<SubmittedRequest> submit_generate(const GenerateRequest& request,
                                                 const std::string& request_id, ServingState& state,
                                                 SystemClock::time_point deadline) {
  ServedModel* model = state.model();
  if (state.phase() == Phase::kDraining) {
    return absl::UnavailableError("the server is draining: not accepting new requests");
  }
  if (state.phase() == Phase::kFaulted) return absl::UnavailableError(state.fault_reason());
  if (state.phase() == Phase::kWarmingUp) {
    return absl::UnavailableError(
        "the server is tuning GEMMs before serving: retry when health reports SERVING");
  }
  if (model == nullptr || state.phase() != Phase::kServing) {
    return absl::UnavailableError("the model is still loading: retry when health reports SERVING");
  }
  TESSERA_ASSIGN_OR_RETURN(ValidatedRequest v, validate_generate_request(request, model->limits()));

  auto r = std::make_shared<Request>();
  r->id = request_id;
  switch (v.input) {
    case InputKind::kPrompt: {
      absl::StatusOr<std::vector<int32_t>> ids = model->tokenizer().encode(v.prompt);
      if (!ids.ok()) {
        return absl::Status(ids.status().code(), absl::StrCat("prompt: ", std::string(ids.status().message())));
      }
      r->prompt = *std::move(ids);
      break;
    }
    case InputKind::kChat: {
      absl::StatusOr<std::vector<int32_t>> ids = model->files().encode_chat(v.chat, v.chat_tools);
      if (!ids.ok()) {
        return absl::Status(ids.status().code(), absl::StrCat("chat: ", std::string(ids.status().message())));
      }
      r->prompt = *std::move(ids);
      break;
    }
    case InputKind::kTokenIds:
      r->prompt = std::move(v.token_ids);
      break;
  }
  TESSERA_RETURN_IF_ERROR(fit_to_context(static_cast<int64_t>(r->prompt.size()), model->limits(),
                                         v.max_tokens_given, v.stop));
  r->sampling = v.sampling;
  r->stop = std::move(v.stop);
  if (deadline != SystemClock::time_point::max()) {
    const auto left = std::max(deadline - SystemClock::now(), SystemClock::duration::zero());
    r->deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(left);
  }
  TESSERA_ASSIGN_OR_RETURN(RequestHandle handle, model->engine().submit(r));
  log_request(spdlog::level::debug, request_id, "submitted: prompt_tokens={} max_tokens={}",
              r->prompt.size(), r->stop.max_tokens);
  return SubmittedRequest{std::move(handle), model};
}

grpc::ServerUnaryReactor* start_generate(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request, grpc::ByteBuffer* response,
                                         ServingState& state, OutputDelivery& delivery) {
  return new GenerateUnaryReactor(context, request, response, state, delivery);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* start_generate_stream(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request, ServingState& state,
    OutputDelivery& delivery) {
  return new GenerateStreamReactor(context, request, state, delivery);
}

}  // namespace tessera::server
