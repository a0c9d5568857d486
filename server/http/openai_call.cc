#include "server/http/openai_call.h"

#include <chrono>
#include <ctime>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/generate_calls.h"
#include "server/http/openai_errors.h"
#include "server/http/openai_response.h"
#include "server/logging.h"

namespace tessera::server {

namespace {

using nlohmann::json;

// What the engine's notifiers share with the call: the connection's wake, cleared when the call
// is destroyed (the notifiers may outlive it).
struct WakeLink {
  std::mutex mu;
  std::function<void()> wake;
};

// One choice: an engine request and what it has produced so far.
struct Choice {
  RequestHandle handle;
  std::string id;
  std::string text;                   // whole responses: all of it
  std::vector<SampleResult> logprobs;  // whole responses: all of them
  int64_t text_bytes = 0;             // bytes of text sent so far (completions' text_offset)
  bool role_sent = false;             // chat streams: the first chunk carried the role
  bool finished = false;
  RequestOutput final;  // the final output's outcome fields
};

class OpenAiCall final : public ResponseProducer {
 public:
  OpenAiCall(OpenAiRequest request, OpenAiResponseHead head)
      : request_(std::move(request)), head_(std::move(head)), link_(std::make_shared<WakeLink>()) {}

  ~OpenAiCall() override {
    std::lock_guard<std::mutex> lock(link_->mu);
    link_->wake = nullptr;
  }

  // Before start(): one choice per submitted request, in choice order.
  void add_choice(SubmittedRequest submitted, std::string id) {
    model_ = submitted.model;
    RequestHandle handle = std::move(submitted.handle);
    Choice& c = choices_.emplace_back();
    c.handle = std::move(handle);
    c.id = std::move(id);
  }
  void cancel_all() {
    for (const Choice& c : choices_) c.handle.cancel();
  }

  void start(std::function<void()> wake) override {
    {
      std::lock_guard<std::mutex> lock(link_->mu);
      link_->wake = std::move(wake);
    }
    for (Choice& c : choices_) {
      c.handle.stream->set_notifier([link = link_] {
        std::lock_guard<std::mutex> lock(link->mu);
        if (link->wake) link->wake();
      });
    }
  }

  void cancel() override {
    if (done_) return;
    for (const Choice& c : choices_) {
      if (!c.finished) log_request(spdlog::level::debug, c.id, "cancelled: the client went away");
    }
    cancel_all();
  }

  std::optional<ProducedPart> next() override {
    if (done_) return std::nullopt;
    return request_.stream ? next_event() : next_whole();
  }

 private:
  // Reads what `c`'s stream has; false when nothing new.
  bool read(Choice& c, std::string& text, std::vector<SampleResult>& logprobs) {
    bool any = false;
    while (!c.finished) {
      std::optional<RequestOutput> out = c.handle.stream->try_next();
      if (!out) break;
      any = true;
      text += out->text;
      logprobs.insert(logprobs.end(), std::make_move_iterator(out->logprobs.begin()),
                      std::make_move_iterator(out->logprobs.end()));
      if (out->finished) {
        c.finished = true;
        log_finish(c, *out);
        c.final = std::move(*out);
      }
    }
    return any;
  }

  static void log_finish(const Choice& c, const RequestOutput& out) {
    if (out.status.ok()) {
      log_request(spdlog::level::info, c.id,
                  "finished: reason={} prompt_tokens={} completion_tokens={} ttft={:.3f}s "
                  "total={:.3f}s",
                  finish_reason_name(out.finish_reason), out.prompt_tokens,
                  out.completion_tokens, out.ttft_seconds, out.total_seconds);
    } else {
      log_request(spdlog::level::info, c.id, "ended: {}", out.status.ToString());
    }
  }

  // The first failed choice's status, if any.
  std::optional<absl::Status> failure() const {
    for (const Choice& c : choices_) {
      if (c.finished && !c.final.status.ok()) return c.final.status;
    }
    return std::nullopt;
  }

  bool all_finished() const {
    for (const Choice& c : choices_) {
      if (!c.finished) return false;
    }
    return true;
  }

  json usage() const {
    int64_t prompt = 0, completion = 0;
    for (size_t i = 0; i < choices_.size(); ++i) {
      if (i % static_cast<size_t>(request_.n) == 0) prompt += choices_[i].final.prompt_tokens;
      completion += choices_[i].final.completion_tokens;
    }
    return openai_usage(prompt, completion);
  }

  std::optional<ProducedPart> next_whole() {
    for (Choice& c : choices_) read(c, c.text, c.logprobs);
    if (std::optional<absl::Status> failed = failure()) {
      cancel_all();
      done_ = true;
      return ProducedPart{openai_error_from_status(*failed), {}, false};
    }
    if (!all_finished()) return std::nullopt;
    json choices = json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
      Choice& c = choices_[i];
      json logprobs = request_.logprobs
                          ? openai_logprobs(head_.endpoint, c.logprobs, model_->tokenizer(), 0)
                          : json(nullptr);
      choices.push_back(openai_choice(head_.endpoint, static_cast<int>(i), c.text, logprobs,
                                      c.final.finish_reason));
    }
    HttpResponse response;
    response.content_type = "application/json";
    response.body = to_json_text(openai_response(head_, std::move(choices), usage()));
    done_ = true;
    return ProducedPart{std::move(response), {}, false};
  }

  std::optional<ProducedPart> next_event() {
    std::string events;
    for (size_t i = 0; i < choices_.size(); ++i) {
      Choice& c = choices_[i];
      const bool was_finished = c.finished;
      std::string text;
      std::vector<SampleResult> logprobs;
      const bool any = read(c, text, logprobs);
      const bool role_delta = head_.endpoint == OpenAiEndpoint::kChat && !c.role_sent;
      if (!any && !role_delta) continue;
      // The server ended the choice (a drain's cancel): its last chunk says finish_reason
      // "cancelled" before the error event below says why. Other failures only get the event.
      const bool ended_by_server =
          c.finished && c.final.status.code() == absl::StatusCode::kCancelled;
      if (c.finished && !c.final.status.ok() && !ended_by_server) continue;  // reported below
      const bool finishing = c.finished && !was_finished;
      json lp = request_.logprobs && !logprobs.empty()
                    ? openai_logprobs(head_.endpoint, logprobs, model_->tokenizer(), c.text_bytes)
                    : json(nullptr);
      c.text_bytes += static_cast<int64_t>(text.size());
      c.role_sent = true;
      static constexpr FinishReason kCancelled = FinishReason::kCancelled;
      const FinishReason* reason =
          !finishing ? nullptr : ended_by_server ? &kCancelled : &c.final.finish_reason;
      events += sse_event(openai_chunk(
          head_, json::array({openai_chunk_choice(head_.endpoint, static_cast<int>(i), text, lp,
                                                  reason, role_delta)}),
          nullptr));
    }
    if (std::optional<absl::Status> failed = failure()) {
      cancel_all();
      done_ = true;
      const HttpResponse error = openai_error_from_status(*failed);
      return ProducedPart{std::nullopt, events + "data: " + error.body + "\n\n" + kSseDone, true};
    }
    if (all_finished()) {
      if (request_.include_usage) events += sse_event(openai_chunk(head_, json::array(), usage()));
      events += kSseDone;
      done_ = true;
      return ProducedPart{std::nullopt, std::move(events), true};
    }
    if (events.empty()) return std::nullopt;
    return ProducedPart{std::nullopt, std::move(events), false};
  }

  const OpenAiRequest request_;
  const OpenAiResponseHead head_;
  ServedModel* model_ = nullptr;  // set with the first choice
  std::shared_ptr<WakeLink> link_;
  std::vector<Choice> choices_;
  bool done_ = false;  // the last part was given
};

std::string response_id(OpenAiEndpoint endpoint) {
  // new_request_id() is "req-" and 16 hex digits.
  return absl::StrCat(endpoint == OpenAiEndpoint::kChat ? "chatcmpl-" : "cmpl-",
                      new_request_id().substr(4));
}

}  // namespace

absl::StatusOr<HttpResponse> start_openai_call(OpenAiRequest request, ServingState& state) {
  ServedModel* model = state.model();
  OpenAiResponseHead head{request.endpoint, response_id(request.endpoint),
                          static_cast<int64_t>(std::time(nullptr)),
                          model != nullptr ? model->id() : std::string()};
  std::vector<tessera::v1::GenerateRequest> prompts = std::move(request.prompts);
  const int n = request.n;
  const bool stream = request.stream;
  auto call = std::make_shared<OpenAiCall>(std::move(request), head);
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (int i = 0; i < n; ++i) {
      tessera::v1::GenerateRequest r = prompts[p];
      // Several choices from one seed would be one choice n times: choice i draws from seed + i.
      if (r.sampling().has_seed()) r.mutable_sampling()->set_seed(r.sampling().seed() + i);
      std::string id = absl::StrCat(head.id, "-", p * n + i);
      absl::StatusOr<SubmittedRequest> submitted =
          submit_generate(r, id, state, std::chrono::system_clock::time_point::max());
      if (!submitted.ok()) {
        call->cancel_all();
        log_request(spdlog::level::info, id, "rejected: {}", submitted.status().ToString());
        state.count_rejected(submitted.status().code());
        return submitted.status();
      }
      call->add_choice(*std::move(submitted), std::move(id));
    }
  }
  HttpResponse response;
  response.producer = std::move(call);
  if (stream) {
    response.streamed = true;
    response.content_type = "text/event-stream";
    response.headers.emplace_back("X-Accel-Buffering", "no");
  }
  return response;
}

}  // namespace tessera::server
