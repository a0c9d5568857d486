#include "tools/bench_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "tools/openai_stream_client.h"
#include "tools/server_connection.h"

namespace tessera::cli {

// One request in flight; it touches the runner only through finish() and the atomic token
// counter.
class BenchRunner::Call {
 public:
  virtual ~Call() = default;
  virtual void start() = 0;
  virtual void cancel() = 0;
};

// One GenerateStream call. Its callbacks run on gRPC threads, one at a time.
class BenchRunner::GrpcCall final : public BenchRunner::Call,
                                    public grpc::ClientReadReactor<v1::GenerateStreamChunk> {
 public:
  // `request` (what is sent) outlives the call; `spec` is the workload's entry.
  GrpcCall(BenchRunner& runner, const BenchRequest& spec, const v1::GenerateRequest& request,
           size_t index)
      : runner_(runner), request_(request), keep_output_(spec.conversation >= 0) {
    record_.workload_index = index;
    record_.expected_output_tokens = spec.output_len;
    runner.connection_.authorize(context_);
    if (runner.options_.timeout_seconds > 0)
      set_deadline_after(context_, runner.options_.timeout_seconds);
  }

  void start() override {
    start_ = Clock::now();
    record_.start_seconds = std::chrono::duration<double>(start_ - runner_.start_).count();
    runner_.connection_.generation().async()->GenerateStream(&context_, &request_, this);
    StartRead(&chunk_);
    StartCall();
  }

  void cancel() override { context_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    if (const int n = chunk_.token_ids_size(); n > 0) {
      const Clock::time_point now = Clock::now();
      if (record_.output_tokens == 0) {
        record_.ttft_seconds = std::chrono::duration<double>(now - start_).count();
      } else {
        record_.itl_seconds.push_back(std::chrono::duration<double>(now - last_chunk_).count());
      }
      last_chunk_ = now;
      record_.output_tokens += n;
      runner_.output_tokens_.fetch_add(n, std::memory_order_relaxed);
      if (keep_output_) {
        record_.output_ids.insert(record_.output_ids.end(), chunk_.token_ids().begin(),
                                  chunk_.token_ids().end());
      }
    }
    if (keep_output_) record_.output_text += chunk_.text();
    if (chunk_.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      record_.finish_reason = chunk_.finish_reason();
      record_.prompt_tokens = chunk_.usage().prompt_tokens();
    }
    StartRead(&chunk_);
  }

  void OnDone(const grpc::Status& status) override {
    record_.latency_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    record_.code = status.error_code();
    if (!status.ok()) record_.error = status.error_message();
    // May destroy this object: nothing may follow.
    runner_.finish(this, std::move(record_));
  }

 private:
  BenchRunner& runner_;
  const v1::GenerateRequest& request_;
  const bool keep_output_;
  grpc::ClientContext context_;
  v1::GenerateStreamChunk chunk_;
  Clock::time_point start_;
  Clock::time_point last_chunk_;
  RequestRecord record_;
};

// One streamed /v1/completions request, on a thread of its own (a blocking client).
class BenchRunner::OpenAiCall final : public BenchRunner::Call,
                                      public std::enable_shared_from_this<OpenAiCall> {
 public:
  OpenAiCall(BenchRunner& runner, const BenchRequest& spec, const v1::GenerateRequest& request,
             size_t index)
      : runner_(runner), body_(openai_completion_body(request)),
        client_(runner.options_.openai_address, runner.options_.api_key),
        keep_output_(spec.conversation >= 0) {
    record_.workload_index = index;
    record_.expected_output_tokens = spec.output_len;
  }

  void start() override {
    start_ = Clock::now();
    record_.start_seconds = std::chrono::duration<double>(start_ - runner_.start_).count();
    // The thread holds the call until it has reported; the runner may be gone after finish().
    std::thread([self = shared_from_this()] { self->run(); }).detach();
  }

  void cancel() override { client_.cancel(); }

 private:
  void run() {
    const absl::Status status = client_.run(body_, [this](const nlohmann::json& event) {
      on_event(event);
    });
    record_.latency_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
    record_.code = static_cast<grpc::StatusCode>(status.code());
    if (!status.ok()) record_.error = std::string(status.message());
    runner_.finish(this, std::move(record_));
  }

  // A chunk with text counts as one token for progress and timing (as a gRPC chunk's tokens
  // arrive together); the usage chunk gives the exact counts.
  void on_event(const nlohmann::json& event) {
    if (const auto usage = event.find("usage"); usage != event.end() && usage->is_object()) {
      record_.output_tokens = usage->value("completion_tokens", 0);
      record_.prompt_tokens = usage->value("prompt_tokens", 0);
    }
    const auto choices = event.find("choices");
    if (choices == event.end() || choices->empty()) return;
    const nlohmann::json& choice = (*choices)[0];
    if (keep_output_) record_.output_text += choice.value("text", std::string());
    if (!choice.value("text", std::string()).empty()) {
      const Clock::time_point now = Clock::now();
      if (!seen_text_) {
        record_.ttft_seconds = std::chrono::duration<double>(now - start_).count();
        seen_text_ = true;
      } else {
        record_.itl_seconds.push_back(std::chrono::duration<double>(now - last_chunk_).count());
      }
      last_chunk_ = now;
      runner_.output_tokens_.fetch_add(1, std::memory_order_relaxed);
    }
    if (const auto reason = choice.find("finish_reason"); reason != choice.end() && reason->is_string()) {
      record_.finish_reason =
          *reason == "length" ? v1::FINISH_REASON_LENGTH : v1::FINISH_REASON_STOP;
    }
  }

  BenchRunner& runner_;
  const nlohmann::json body_;
  OpenAiStreamClient client_;
  const bool keep_output_;
  Clock::time_point start_;
  Clock::time_point last_chunk_;
  bool seen_text_ = false;
  RequestRecord record_;
};

namespace {

// gRPC 1.51 as Debian builds it serves the callback API from one process-wide completion queue,
// reference-counted by the channels that used it; when the last of them is destroyed it tears
// the queue down while the queue's own polling threads may still be in it, and aborts
// ("assertion failed: prior > 0" in grpc_cq_internal_unref). Keeping the first channel that took
// a reference for the life of the process keeps that teardown from ever running.
void keep_callback_queue_alive(const std::shared_ptr<grpc::Channel>& channel) {
  // Made once (the first caller's channel), never destroyed; volatile, so that the compiler keeps
  // the pointer and leak checkers see the channel as reachable.
  static std::shared_ptr<grpc::Channel>* volatile pinned =
      new std::shared_ptr<grpc::Channel>(channel);
  (void)pinned;
}

}  // namespace

BenchRunner::BenchRunner(ServerConnection& connection, RunnerOptions options)
    : connection_(connection), options_(options) {}

BenchRunner::~BenchRunner() = default;

RunResult BenchRunner::run(const std::vector<BenchRequest>& workload) {
  RunResult result;
  if (workload.empty()) return result;
  const bool open_loop = std::isfinite(options_.request_rate);
  const bool timed = options_.duration_seconds > 0;
  PoissonArrivals arrivals(options_.request_rate, options_.seed);

  std::unique_lock<std::mutex> lock(mu_);
  workload_ = &workload;
  const bool conversational = std::any_of(workload.begin(), workload.end(),
                                          [](const BenchRequest& r) { return r.conversation >= 0; });
  if (conversational) {
    int32_t count = 0;
    for (const BenchRequest& r : workload) count = std::max(count, r.conversation + 1);
    conversations_.assign(static_cast<size_t>(count), Conversation{});
    sent_turns_.assign(workload.size(), false);
  }
  start_ = Clock::now();
  last_done_ = start_;
  started_.store(true);
  const Clock::time_point end =
      start_ + std::chrono::duration_cast<Clock::duration>(
                   std::chrono::duration<double>(timed ? options_.duration_seconds : 0));
  // Waits until `ready` holds, or until `until` / the end of a timed run, whichever is first.
  auto wait = [&](auto ready, std::optional<Clock::time_point> until) {
    if (timed) until = until ? std::min(*until, end) : end;
    if (until) {
      cv_.wait_until(lock, *until, ready);
    } else {
      cv_.wait(lock, ready);
    }
  };
  Clock::time_point next_arrival = start_;
  for (size_t i = 0;; ++i) {
    if (stopping_) break;
    if (options_.num_requests > 0 && i >= options_.num_requests) break;
    if (conversational && i >= workload.size()) break;  // each turn once
    if (open_loop) {
      next_arrival += std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(arrivals.next_gap_seconds()));
      wait([this] { return stopping_; }, next_arrival);
    }
    if (options_.concurrency > 0) {
      const size_t limit = static_cast<size_t>(options_.concurrency);
      wait([this, limit] { return stopping_ || in_flight_.size() < limit; }, std::nullopt);
    }
    size_t index = i % workload.size();
    if (conversational) {
      // The next turn whose conversation is ready: one may have to finish first.
      std::optional<size_t> next;
      wait([this, &next] { return stopping_ || (next = next_turn()).has_value(); }, std::nullopt);
      if (!next) break;
      index = *next;
    }
    if (stopping_ || (timed && Clock::now() >= end)) break;
    const v1::GenerateRequest& request =
        conversational ? build_turn(index) : workload[index].request;
    std::shared_ptr<Call> call;
    if (options_.api == Api::kOpenAi) {
      call = std::make_shared<OpenAiCall>(*this, workload[index], request, index);
    } else {
      call = std::make_shared<GrpcCall>(*this, workload[index], request, index);
    }
    in_flight_.emplace(call.get(), call);
    sent_.fetch_add(1);
    lock.unlock();
    call->start();  // the channel has taken its reference on the callback queue by now
    keep_callback_queue_alive(connection_.channel());
    call.reset();  // only after start() returned: the call may be over already
    lock.lock();
  }
  cv_.wait(lock, [this] { return in_flight_.empty(); });
  workload_ = nullptr;
  result.records = std::move(records_);
  result.duration_seconds = std::chrono::duration<double>(last_done_ - start_).count();
  result.stopped = stopping_;
  return result;
}

std::optional<size_t> BenchRunner::next_turn() const {
  for (size_t i = 0; i < sent_turns_.size(); ++i) {
    if (sent_turns_[i]) continue;
    const BenchRequest& r = (*workload_)[i];
    if (conversations_[static_cast<size_t>(r.conversation)].finished_turns == r.turn) return i;
  }
  return std::nullopt;
}

const v1::GenerateRequest& BenchRunner::build_turn(size_t index) {
  const BenchRequest& turn = (*workload_)[index];
  Conversation& c = conversations_[static_cast<size_t>(turn.conversation)];
  sent_turns_[index] = true;
  v1::GenerateRequest& request = built_.emplace_back(turn.request);
  if (turn.turn > 0) {
    if (request.has_token_ids()) {
      std::vector<int32_t> ids = c.history_ids;
      ids.insert(ids.end(), turn.request.token_ids().ids().begin(),
                 turn.request.token_ids().ids().end());
      request.mutable_token_ids()->mutable_ids()->Assign(ids.begin(), ids.end());
    } else {
      request.set_prompt(absl::StrCat(c.history_text, "\n", turn.request.prompt()));
    }
  }
  c.last_sent = &request;
  return request;
}

void BenchRunner::finish(Call* call, RequestRecord record) {
  std::shared_ptr<Call> self;  // released last, after the lock
  std::lock_guard<std::mutex> lock(mu_);
  if (workload_ != nullptr && !conversations_.empty()) {
    // The conversation so far: what this turn sent, and the answer (none if it failed).
    const BenchRequest& turn = (*workload_)[record.workload_index];
    Conversation& c = conversations_[static_cast<size_t>(turn.conversation)];
    if (c.last_sent->has_token_ids()) {
      c.history_ids.assign(c.last_sent->token_ids().ids().begin(),
                           c.last_sent->token_ids().ids().end());
      c.history_ids.insert(c.history_ids.end(), record.output_ids.begin(),
                           record.output_ids.end());
    } else {
      c.history_text = c.last_sent->prompt() + record.output_text;
    }
    ++c.finished_turns;
    record.output_ids = {};
    record.output_text = {};
  }
  (record.code == grpc::StatusCode::OK ? succeeded_ : failed_).fetch_add(1);
  records_.push_back(std::move(record));
  last_done_ = Clock::now();
  auto it = in_flight_.find(call);
  self = std::move(it->second);
  in_flight_.erase(it);
  // Under the lock: run() may return, and destroy this runner, as soon as it is released.
  cv_.notify_all();
}

RunProgress BenchRunner::progress() const {
  RunProgress p;
  // Order matters: read the finished counts before `sent`, so in_flight never goes negative.
  p.succeeded = succeeded_.load();
  p.failed = failed_.load();
  p.sent = sent_.load();
  p.in_flight = p.sent - std::min(p.sent, p.succeeded + p.failed);
  p.output_tokens = output_tokens_.load(std::memory_order_relaxed);
  if (started_.load()) {
    std::lock_guard<std::mutex> lock(mu_);
    p.elapsed_seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  }
  return p;
}

void BenchRunner::stop() {
  std::vector<std::shared_ptr<Call>> running;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    for (auto& [ptr, call] : in_flight_) running.push_back(call);
    cv_.notify_all();
  }
  // Outside the lock: a cancelled call may finish on this very thread.
  for (auto& call : running) call->cancel();
}

}  // namespace tessera::cli
