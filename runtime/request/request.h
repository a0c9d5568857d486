// A generation request as the engine sees it (immutable parameters plus a cancel flag), and the
// stream its outputs travel back on. Both are shared between the submitting thread (a gRPC
// reactor or the CLI) and the engine thread; everything else about a request's progress lives
// in the engine-owned Sequence.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/request/sampler.h"

namespace tessera {

using Clock = std::chrono::steady_clock;

struct StopParams {
  int32_t max_tokens = 256;               // tokens to generate at most (> 0)
  int32_t min_tokens = 0;                 // eos and stop ids are ignored before this many
  std::vector<std::string> stop_strings;  // cut from the output when found
  std::vector<int32_t> stop_token_ids;    // in addition to the model's eos/end-of-turn ids
  bool ignore_eos = false;
};

enum class FinishReason { kNone, kLength, kStop, kEos, kCancelled, kError };
const char* finish_reason_name(FinishReason r);

struct Request {
  std::string id;               // client-given or generated; appears in logs
  std::vector<int32_t> prompt;  // token ids, non-empty
  SamplingParams sampling;
  StopParams stop;
  std::optional<Clock::time_point> deadline;
  Clock::time_point arrival = Clock::now();

  // Set by any thread (client cancel, deadline, drain); the engine drops the sequence at its
  // next step and frees its blocks.
  std::atomic<bool> cancelled{false};
};

// One message on a request's stream: new tokens and text, and on the last one the outcome.
struct RequestOutput {
  std::vector<int32_t> token_ids;
  std::string text;  // complete UTF-8, stop strings cut
  std::vector<SampleResult> logprobs;  // one per token when the request asked for logprobs
  bool finished = false;
  // Set on the final message:
  FinishReason finish_reason = FinishReason::kNone;
  absl::Status status;  // non-OK when the request failed (cancelled, deadline, engine error)
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  double queue_seconds = 0;  // arrival to first scheduled
  double ttft_seconds = 0;   // arrival to first token
  double total_seconds = 0;  // arrival to finish
};

// Single producer (the engine), single consumer (the caller). The consumer either blocks in
// next() or registers a notifier that is called (from the engine thread, without the lock held)
// whenever output becomes available. A consumer that falls behind gets the outputs it has not
// read merged into one message (tokens, text and logprobs appended; the final fields from the
// last), so an unread stream holds one message, not one per token.
class OutputStream {
 public:
  void push(RequestOutput output);
  // Blocks until a message is available.
  RequestOutput next();
  // Non-blocking: a message if one is ready.
  std::optional<RequestOutput> try_next();
  void set_notifier(std::function<void()> notify);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  std::function<void()> notify_;
};

// What submit() gives back: the request (to cancel) and its output stream.
struct RequestHandle {
  std::shared_ptr<Request> request;
  std::shared_ptr<OutputStream> stream;
  void cancel() const { request->cancelled.store(true, std::memory_order_relaxed); }
};

}  // namespace tessera
