#include "runtime/output/output_processor.h"

#include <algorithm>
#include <string>

namespace tessera {

namespace {

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

FinishReason OutputProcessor::accept(SequenceOutput& output, int32_t generated,
                                     const SampleResult& sample, Clock::time_point now,
                                     RequestOutput& out) {
  const Request& request = *output.request;
  if (!output.first_token) {
    output.first_token = now;
    observer_->on_first_token(seconds_between(request.arrival, now));
  } else {
    observer_->on_inter_token(seconds_between(output.last_token, now));
  }
  output.last_token = now;

  const int32_t token = sample.token;
  out.token_ids.push_back(token);
  if (request.sampling.logprobs) out.logprobs.push_back(sample);
  const StopParams& stop = request.stop;
  const bool may_stop = generated > stop.min_tokens;
  if (may_stop && !stop.ignore_eos && tokenizer_.is_stop(token)) return FinishReason::kEos;
  if (may_stop && std::find(stop.stop_token_ids.begin(), stop.stop_token_ids.end(), token) !=
                      stop.stop_token_ids.end()) {
    return FinishReason::kStop;
  }
  std::string piece = output.detokenizer.push(token);
  if (!may_stop) {
    // Stop strings do not apply before min_tokens: the text passes through whole.
    out.text += piece;
  } else {
    StopStringMatcher::Result text = output.stop_strings.push(piece);
    out.text += text.text;
    if (text.stopped) return FinishReason::kStop;
  }
  if (generated >= stop.max_tokens) {
    out.text += output.stop_strings.push(output.detokenizer.flush()).text;
    return FinishReason::kLength;
  }
  return FinishReason::kNone;
}

void OutputProcessor::hold(SequenceOutput& output, RequestOutput out) {
  send_held(output);
  output.held = std::move(out);
}

void OutputProcessor::send_held(SequenceOutput& output) {
  if (!output.held) return;
  output.stream->push(*std::move(output.held));
  output.held.reset();
}

void OutputProcessor::finish(SequenceOutput& output, int32_t generated, FinishReason reason,
                             absl::Status status, RequestOutput out, Clock::time_point now) {
  send_held(output);
  if (status.ok()) out.text += output.stop_strings.flush();
  out.finished = true;
  out.finish_reason = reason;
  out.status = std::move(status);
  out.prompt_tokens = static_cast<int32_t>(output.request->prompt.size());
  out.completion_tokens = generated;
  const Clock::time_point arrival = output.request->arrival;
  out.queue_seconds = output.first_scheduled ? seconds_between(arrival, *output.first_scheduled) : 0;
  out.ttft_seconds = output.first_token ? seconds_between(arrival, *output.first_token) : 0;
  out.total_seconds = seconds_between(arrival, now);
  observer_->on_finish(FinishReport{reason, out.status.code(), out.prompt_tokens,
                                    out.completion_tokens, out.queue_seconds, out.ttft_seconds,
                                    out.total_seconds});
  output.stream->push(std::move(out));
}

}  // namespace tessera
