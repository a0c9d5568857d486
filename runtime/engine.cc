#include "runtime/engine.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera {

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

Engine::Engine(ForwardModel& model, KvCache& cache, const Tokenizer& tokenizer, EngineConfig config)
    : model_(model),
      cache_(cache),
      tokenizer_(tokenizer),
      config_(config),
      capacity_(cache.allocator(), cache.block_size(),
                std::min(config.max_num_seqs, model.limits().max_logit_rows)),
      step_scheduler_(model.limits().max_batch_tokens, cache.block_size()),
      logits_(static_cast<size_t>(model.limits().max_logit_rows) * model.vocab_size()),
      sampled_(static_cast<size_t>(model.limits().max_logit_rows)) {
  stats_.kv_blocks_total = cache.allocator().num_blocks();
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
  take_new_requests();
  fail_all(status);
}

void Engine::run_loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stopping_ || !inbox_.empty() || !sequences_.empty(); });
      if (stopping_) return;
    }
    step();
  }
}

void Engine::take_new_requests() {
  std::deque<RequestHandle> incoming;
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming.swap(inbox_);
  }
  for (RequestHandle& handle : incoming) {
    sequences_.push_back(std::make_unique<Sequence>(std::move(handle), tokenizer_, next_order_++));
    waiting_.push_back(sequences_.back().get());
  }
}

void Engine::finish(Sequence* seq, FinishReason reason, absl::Status status, RequestOutput out) {
  const Clock::time_point now = Clock::now();
  if (status.ok()) out.text += seq->stop_strings.flush();
  out.finished = true;
  out.finish_reason = reason;
  out.status = std::move(status);
  out.prompt_tokens = seq->prompt_len;
  out.completion_tokens = seq->generated();
  const Clock::time_point arrival = seq->request->arrival;
  out.queue_seconds = seq->first_scheduled ? seconds_between(arrival, *seq->first_scheduled) : 0;
  out.ttft_seconds = seq->first_token ? seconds_between(arrival, *seq->first_token) : 0;
  out.total_seconds = seconds_between(arrival, now);
  observer_->on_finish(FinishReport{reason, out.status.code(), out.prompt_tokens,
                                    out.completion_tokens, out.queue_seconds, out.ttft_seconds,
                                    out.total_seconds});
  seq->stream->push(std::move(out));

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

bool Engine::accept_token(Sequence* seq, const SampleResult& sample, RequestOutput& out,
                          FinishReason& reason) {
  const int32_t token = sample.token;
  seq->tokens.push_back(token);
  out.token_ids.push_back(token);
  if (seq->request->sampling.logprobs) out.logprobs.push_back(sample);
  const StopParams& stop = seq->request->stop;
  const bool may_stop = seq->generated() > stop.min_tokens;
  if (may_stop && !stop.ignore_eos && tokenizer_.is_stop(token)) {
    reason = FinishReason::kEos;
    return true;
  }
  if (may_stop && std::find(stop.stop_token_ids.begin(), stop.stop_token_ids.end(), token) !=
                      stop.stop_token_ids.end()) {
    reason = FinishReason::kStop;
    return true;
  }
  std::string piece = seq->detokenizer.push(token);
  if (!may_stop) {
    // Stop strings do not apply before min_tokens: the text passes through whole.
    out.text += piece;
  } else {
    StopStringMatcher::Result text = seq->stop_strings.push(piece);
    out.text += text.text;
    if (text.stopped) {
      reason = FinishReason::kStop;
      return true;
    }
  }
  if (seq->generated() >= stop.max_tokens) {
    out.text += seq->stop_strings.push(seq->detokenizer.flush()).text;
    reason = FinishReason::kLength;
    return true;
  }
  return false;
}

bool Engine::step() {
  take_new_requests();
  reap_cancelled();
  const CapacityDecision decision = capacity_.schedule(waiting_, running_);
  queued_ -= static_cast<int64_t>(decision.admitted.size()) - static_cast<int64_t>(decision.preempted.size());
  stats_.preemptions_total += static_cast<int64_t>(decision.preempted.size());
  for (Sequence* seq : decision.preempted) {
    observer_->on_preemption();
    spdlog::debug("request {}: preempted (recompute), {} tokens", seq->request->id, seq->tokens.size());
  }
  const std::vector<ScheduledChunk> chunks = step_scheduler_.schedule(running_, batch_);
  if (chunks.empty()) {
    publish_stats();
    return false;
  }

  const Clock::time_point start = Clock::now();
  const size_t n_logits = batch_.logits_rows.size();
  const std::span<float> logits(logits_.data(), n_logits * model_.vocab_size());
  const std::span<int32_t> sampled(sampled_.data(), n_logits);
  const bool on_device = sample_on_device(chunks);
  const absl::Status forwarded = on_device
                                     ? model_.forward_sampled(batch_, cache_, sample_rows_, sampled)
                                     : model_.forward(batch_, cache_, logits);
  if (absl::Status s = forwarded; !s.ok()) {
    spdlog::error("step failed: {}", s.ToString());
    // The batch's sequences are in an unknown state: fail them, keep serving the rest.
    const absl::Status failed = absl::InternalError(absl::StrCat("model step failed: ", s.message()));
    for (const ScheduledChunk& c : chunks) finish(c.seq, FinishReason::kError, failed);
    publish_stats();
    return true;
  }

  size_t row = 0;
  const Clock::time_point now = Clock::now();
  StepReport report;
  report.num_seqs = static_cast<int32_t>(chunks.size());
  report.num_tokens = batch_.num_tokens();
  for (const ScheduledChunk& c : chunks) {
    Sequence* seq = c.seq;
    (c.seq->prefilling() ? report.prefill_tokens : report.decode_tokens) += c.num_tokens;
    if (!seq->first_scheduled) {
      seq->first_scheduled = start;
      stats_.prompt_tokens_total += seq->prompt_len;
    }
    seq->num_computed += c.num_tokens;
    if (!c.samples) continue;
    // Either path draws the sequence's generated()-th token from the same (seed, counter).
    SampleResult sample;
    if (on_device) {
      sample.token = sampled[row++];
    } else {
      std::span<float> row_logits = logits.subspan(row++ * model_.vocab_size(), model_.vocab_size());
      sample = seq->sampler.sample(row_logits, static_cast<uint64_t>(seq->generated()),
                                   sampling_scratch_);
    }
    // Either sampler answers -1 for non-finite logits; nothing outside the vocabulary may become
    // the next step's input.
    if (sample.token < 0 || sample.token >= model_.vocab_size()) {
      finish(seq, FinishReason::kError,
             absl::InternalError(absl::StrCat("sampling gave token id ", sample.token,
                                              ", outside the vocabulary (non-finite logits?)")));
      continue;
    }
    if (!seq->first_token) {
      seq->first_token = now;
      observer_->on_first_token(seconds_between(seq->request->arrival, now));
    } else {
      observer_->on_inter_token(seconds_between(seq->last_token, now));
    }
    seq->last_token = now;
    ++stats_.generation_tokens_total;
    RequestOutput out;
    FinishReason reason = FinishReason::kNone;
    if (accept_token(seq, sample, out, reason)) {
      finish(seq, reason, absl::OkStatus(), std::move(out));
    } else {
      seq->stream->push(std::move(out));
    }
  }
  ++stats_.steps_total;
  report.seconds = seconds_between(start, Clock::now());
  observer_->on_step(report);
  publish_stats();
  return true;
}

bool Engine::sample_on_device(const std::vector<ScheduledChunk>& chunks) {
  if (!model_.can_sample_on_device()) return false;
  sample_rows_.clear();
  for (const ScheduledChunk& c : chunks) {
    if (!c.samples) continue;
    const std::optional<SamplingRow> row =
        c.seq->sampler.plain_row(static_cast<uint64_t>(c.seq->generated()));
    // One row that needs penalties or logprobs sends the whole step's logits to the host.
    if (!row) return false;
    sample_rows_.push_back(*row);
  }
  return true;
}

void Engine::publish_stats() {
  stats_.running = static_cast<int64_t>(running_.size());
  stats_.waiting = static_cast<int64_t>(waiting_.size());
  stats_.kv_blocks_used = cache_.allocator().num_used();
  stats_.graph_steps_total = model_.graph_steps();
  stats_.micro_batched_steps_total = model_.micro_batched_steps();
}

}  // namespace tessera
