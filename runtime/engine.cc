#include "runtime/engine.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera {

Engine::Engine(ForwardModel& model, KvCache& cache, const Tokenizer& tokenizer, EngineConfig config)
    : model_(model),
      cache_(cache),
      tokenizer_(tokenizer),
      executor_(model),
      output_(tokenizer),
      config_(config),
      capacity_(cache.allocator(),
                CapacityConfig{cache.block_size(),
                               std::min(config.max_num_seqs, model.limits().max_logit_rows),
                               config.enable_prefix_caching, config.admission_headroom_steps}),
      step_scheduler_(model.limits().max_batch_tokens, cache.block_size()) {
  stats_.kv_blocks_total = cache.allocator().num_blocks();
}

void Engine::set_observer(EngineObserver* observer) {
  observer_ = observer;
  output_.set_observer(observer);
}

Engine::~Engine() { shutdown(absl::CancelledError("engine shut down")); }

absl::StatusOr<RequestHandle> Engine::submit(std::shared_ptr<Request> request) {
  const int64_t prompt_len = static_cast<int64_t>(request->prompt.size());
  if (prompt_len == 0) return absl::InvalidArgumentError("prompt: must have at least one token");
  for (int32_t t : request->prompt) {
    if (t < 0 || t >= model_.vocab_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt: token id ", t, " is outside the vocabulary [0, ", model_.vocab_size(), ")"));
    }
  }
  for (const auto& [t, bias] : request->sampling.logit_bias) {
    if (t < 0 || t >= model_.vocab_size()) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias: token id ", t,
                                                     " is outside the vocabulary [0, ",
                                                     model_.vocab_size(), ")"));
    }
  }
  if (request->stop.max_tokens <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens: must be positive, got ", request->stop.max_tokens));
  }
  const int64_t total = prompt_len + request->stop.max_tokens;
  if (config_.max_model_len > 0 && total > config_.max_model_len) {
    return absl::OutOfRangeError(absl::StrCat("prompt (", prompt_len, " tokens) + max_tokens (",
                                              request->stop.max_tokens, ") = ", total,
                                              " exceeds the model's context of ",
                                              config_.max_model_len, " tokens"));
  }
  const int64_t blocks = capacity_.blocks_for(static_cast<int32_t>(total));
  if (blocks > cache_.allocator().num_blocks()) {
    return absl::OutOfRangeError(absl::StrCat(
        "prompt + max_tokens = ", total, " tokens needs ", blocks, " KV blocks; the cache holds ",
        cache_.allocator().num_blocks(), " blocks of ", cache_.block_size(), " tokens"));
  }
  RequestHandle handle{std::move(request), std::make_shared<OutputStream>()};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fault_.ok()) return fault_;
    if (!admitting_ || stopping_) return absl::UnavailableError("the server is draining: not accepting new requests");
    if (queued_.load() >= config_.max_queue) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "request queue is full (", config_.max_queue, " requests waiting); retry later"));
    }
    ++queued_;
    ++in_flight_;
    inbox_.push_back(handle);
  }
  wake_.notify_one();
  return handle;
}

void Engine::reset_prefix_cache(std::function<void(int32_t dropped)> done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stopping_) {
      prefix_cache_resets_.push_back(std::move(done));
      done = nullptr;
    }
  }
  if (done) {
    done(0);
    return;
  }
  wake_.notify_one();
}

absl::Status Engine::fault() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fault_;
}

void Engine::set_fault_listener(std::function<void(const absl::Status&)> listener) {
  fault_listener_ = std::move(listener);
}

void Engine::declare_fault(int32_t token) {
  if (faulted_ || fault_handled_) return;
  faulted_ = true;
  fault_reason_ =
      token < 0 ? absl::StrCat("sampling gave token id ", token,
                               ": the model's logits are not finite (NaN or inf)")
                : absl::StrCat("sampling gave token id ", token, ", outside the vocabulary [0, ",
                               model_.vocab_size(), ")");
  std::lock_guard<std::mutex> lock(mu_);
  fault_ = absl::UnavailableError(absl::StrCat(
      "model fault: ", fault_reason_, "; the model serves no more requests until restarted"));
}

void Engine::stop_after_fault() {
  faulted_ = false;
  fault_handled_ = true;
  const absl::Status status = fault();
  spdlog::error("{}", std::string(status.message()));
  // Whatever was submitted before the fault is answered with it too.
  take_new_requests();
  fail_all(status);
  if (fault_listener_) fault_listener_(status);
}

void Engine::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { run_loop(); });
}

void Engine::stop_admitting() {
  std::lock_guard<std::mutex> lock(mu_);
  admitting_ = false;
}

bool Engine::idle() const { return in_flight_.load() == 0; }

void Engine::shutdown(absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    admitting_ = false;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The thread is gone: this thread may now touch engine state.
  run_prefix_cache_resets();
  take_new_requests();
  fail_all(status);
}

void Engine::run_loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] {
        return stopping_ || !inbox_.empty() || !sequences_.empty() ||
               !prefix_cache_resets_.empty();
      });
      if (stopping_) return;
    }
    step();
  }
}

void Engine::run_prefix_cache_resets() {
  std::vector<std::function<void(int32_t)>> resets;
  {
    std::lock_guard<std::mutex> lock(mu_);
    resets.swap(prefix_cache_resets_);
  }
  for (std::function<void(int32_t)>& done : resets) {
    const int32_t dropped = cache_.allocator().drop_cached();
    publish_stats();  // whoever the answer reaches reads the emptied cache in the stats
    done(dropped);
  }
}

void Engine::take_new_requests() {
  std::deque<RequestHandle> incoming;
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming.swap(inbox_);
  }
  for (RequestHandle& handle : incoming) {
    sequences_.push_back(std::make_unique<Sequence>(handle, tokenizer_, next_order_++));
    waiting_.push_back(sequences_.back().get());
  }
}

void Engine::finish(Sequence* seq, FinishReason reason, absl::Status status, RequestOutput out) {
  output_.finish(seq->output, seq->generated(), reason, std::move(status), std::move(out),
                 Clock::now());
  seq->blocks.release(cache_.allocator());
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) {
    running_.erase(it);
  } else if (auto w = std::find(waiting_.begin(), waiting_.end(), seq); w != waiting_.end()) {
    waiting_.erase(w);
    --queued_;
  }
  std::erase_if(sequences_, [seq](const std::unique_ptr<Sequence>& s) { return s.get() == seq; });
  --in_flight_;
}

void Engine::send_held_outputs() {
  for (const std::unique_ptr<Sequence>& seq : sequences_) output_.send_held(seq->output);
}

void Engine::reap_cancelled() {
  const Clock::time_point now = Clock::now();
  std::vector<std::pair<Sequence*, absl::Status>> doomed;
  for (const auto& seq : sequences_) {
    const Request& r = *seq->request;
    if (r.cancelled.load(std::memory_order_relaxed)) {
      doomed.emplace_back(seq.get(), absl::CancelledError("request cancelled"));
    } else if (r.deadline && now >= *r.deadline) {
      doomed.emplace_back(seq.get(), absl::DeadlineExceededError(absl::StrCat(
                                         "deadline exceeded after ", seq->generated(),
                                         " generated tokens")));
    }
  }
  for (auto& [seq, status] : doomed) finish(seq, FinishReason::kCancelled, std::move(status));
}

void Engine::fail_all(const absl::Status& status) {
  while (!sequences_.empty()) {
    finish(sequences_.back().get(), status.code() == absl::StatusCode::kCancelled
                                        ? FinishReason::kCancelled
                                        : FinishReason::kError,
           status);
  }
}

bool Engine::step() {
  const Clock::time_point scheduling = Clock::now();
  const std::vector<ScheduledChunk> chunks = schedule();
  if (chunks.empty()) {
    send_held_outputs();
    publish_stats();
    return false;
  }
  const Clock::time_point start = Clock::now();
  StepReport report;
  report.schedule_seconds = std::chrono::duration<double>(start - scheduling).count();
  const absl::StatusOr<std::span<const SampleResult>> samples = execute(chunks, report);
  const double forward_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  report.device_wait_seconds = model_.last_device_wait_seconds();
  // The launch is the host's time in the step that was neither waiting for the device nor
  // sending the last step's held outputs.
  report.launch_seconds = std::max(
      0.0, forward_seconds - report.device_wait_seconds - report.overlapped_seconds);
  if (!samples.ok()) {
    spdlog::error("step failed: {}", samples.status().ToString());
    // The batch's sequences are in an unknown state: fail them, keep serving the rest.
    const absl::Status failed =
        absl::InternalError(absl::StrCat("model step failed: ", samples.status().message()));
    for (const ScheduledChunk& c : chunks) finish(c.seq, FinishReason::kError, failed);
    publish_stats();
    return true;
  }
  update(chunks, *samples, start, report);
  if (faulted_) stop_after_fault();
  publish_stats();
  return true;
}

std::vector<ScheduledChunk> Engine::schedule() {
  run_prefix_cache_resets();
  take_new_requests();
  reap_cancelled();
  const CapacityDecision decision = capacity_.schedule(waiting_, running_);
  queued_ -= static_cast<int64_t>(decision.admitted.size()) - static_cast<int64_t>(decision.preempted.size());
  stats_.preemptions_total += static_cast<int64_t>(decision.preempted.size());
  stats_.prefix_cache_queries_total += decision.prefix_query_tokens;
  stats_.prefix_cache_hits_total += decision.prefix_hit_tokens;
  for (Sequence* seq : decision.preempted) {
    observer_->on_preemption();
    spdlog::debug("request {}: preempted (recompute), {} tokens", seq->request->id, seq->tokens.size());
  }
  return step_scheduler_.schedule(running_, batch_);
}

absl::StatusOr<std::span<const SampleResult>> Engine::execute(
    const std::vector<ScheduledChunk>& chunks, StepReport& report) {
  row_samplers_.clear();
  for (const ScheduledChunk& c : chunks) {
    // Either path draws the sequence's generated()-th token from the same (seed, counter).
    if (c.samples) {
      row_samplers_.push_back(RowSampler{&c.seq->sampler, static_cast<uint64_t>(c.seq->generated())});
    }
  }
  // The last step's held outputs go out while this one runs on the device.
  auto send_held = [this, &report] {
    const Clock::time_point begin = Clock::now();
    send_held_outputs();
    report.overlapped_seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  };
  return executor_.run(batch_, cache_, row_samplers_, send_held);
}

void Engine::update(const std::vector<ScheduledChunk>& chunks,
                    std::span<const SampleResult> samples, Clock::time_point start,
                    StepReport report) {
  size_t row = 0;
  const Clock::time_point now = Clock::now();
  report.num_seqs = static_cast<int32_t>(chunks.size());
  report.num_tokens = batch_.num_tokens();
  for (const ScheduledChunk& c : chunks) {
    Sequence* seq = c.seq;
    (seq->prefilling() ? report.prefill_tokens : report.decode_tokens) += c.num_tokens;
    if (!seq->output.first_scheduled) {
      seq->output.first_scheduled = start;
      stats_.prompt_tokens_total += seq->prompt_len;
    }
    seq->num_computed += c.num_tokens;
    capacity_.cache_computed_blocks(*seq);
    if (!c.samples) continue;
    const SampleResult& sample = samples[row++];
    // Either sampler answers -1 for non-finite logits; nothing outside the vocabulary may become
    // the next step's input, and the model that gave it is faulted (see fault()).
    if (sample.token < 0 || sample.token >= model_.vocab_size()) {
      declare_fault(sample.token);
      finish(seq, FinishReason::kError,
             absl::InternalError(absl::StrCat("model fault on this request: ", fault_reason_,
                                              "; the model serves no more requests until "
                                              "restarted")));
      continue;
    }
    seq->tokens.push_back(sample.token);
    ++stats_.generation_tokens_total;
    RequestOutput out;
    const FinishReason reason = output_.accept(seq->output, seq->generated(), sample, now, out);
    if (reason != FinishReason::kNone) {
      finish(seq, reason, absl::OkStatus(), std::move(out));
    } else {
      output_.hold(seq->output, std::move(out));
    }
  }
  ++stats_.steps_total;
  const Clock::time_point end = Clock::now();
  report.update_seconds = std::chrono::duration<double>(end - now).count();
  report.seconds = std::chrono::duration<double>(end - start).count();
  observer_->on_step(report);
}

void Engine::publish_stats() {
  stats_.running = static_cast<int64_t>(running_.size());
  stats_.waiting = static_cast<int64_t>(waiting_.size());
  stats_.kv_blocks_used = cache_.allocator().num_used();
  stats_.prefix_cache_blocks = cache_.allocator().num_cached();
  stats_.graph_steps_total = model_.graph_steps();
  stats_.micro_batched_steps_total = model_.micro_batched_steps();
}

}  // namespace tessera
