// The output side of one sequence: what turns its sampled tokens into the messages its client
// reads (the detokenizer, the stop-string matcher, the stream) and the times its latencies are
// measured from. The engine sets first_scheduled; everything else is the OutputProcessor's.
#pragma once

#include <memory>
#include <optional>

#include "runtime/output/stop_strings.h"
#include "runtime/request/request.h"
#include "runtime/tokenizer/tokenizer.h"

namespace tessera {

struct SequenceOutput {
  SequenceOutput(const RequestHandle& handle, const Tokenizer& tokenizer)
      : request(handle.request),
        stream(handle.stream),
        detokenizer(tokenizer),
        stop_strings(handle.request->stop.stop_strings) {}

  std::shared_ptr<const Request> request;
  std::shared_ptr<OutputStream> stream;
  IncrementalDetokenizer detokenizer;
  StopStringMatcher stop_strings;
  std::optional<Clock::time_point> first_scheduled;  // when a step first ran it
  std::optional<Clock::time_point> first_token;      // when its first token was sampled
  Clock::time_point last_token;                      // when its latest token was sampled
  // A step's output not yet on the stream (OutputProcessor::hold): the engine sends it during
  // the next step (send_held), or before the request's last message.
  std::optional<RequestOutput> held;
};

}  // namespace tessera
