// What happens to a sampled token after the step: its latency reported, eos and stop-id checks,
// incremental detokenizing, stop strings, max_tokens, and the messages on the request's stream,
// the last one with the outcome, counts and latencies. It writes only a sequence's output side
// (SequenceOutput) and reads its request, never scheduler state, so that it can run beside the
// next step's device work.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/output/engine_observer.h"
#include "runtime/output/sequence_output.h"
#include "runtime/request/request.h"
#include "runtime/request/sampler.h"
#include "runtime/tokenizer/tokenizer.h"

namespace tessera {

class OutputProcessor {
 public:
  explicit OutputProcessor(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // Where latencies and finishes are reported (not owned; the engine's observer).
  void set_observer(EngineObserver* observer) { observer_ = observer; }

  // The sequence's `generated`-th output token (counting from 1), sampled at `now`: reports its
  // latency, then checks eos, stop ids, stop strings and max_tokens. Appends what the client is
  // to see to `out`, and answers why the sequence finishes (kNone while it goes on).
  FinishReason accept(SequenceOutput& output, int32_t generated, const SampleResult& sample,
                      Clock::time_point now, RequestOutput& out);
  // Keeps `out`, a message that does not end the request, to send with send_held() (an output
  // still held is sent first).
  void hold(SequenceOutput& output, RequestOutput out);
  // Sends the held output, if there is one.
  void send_held(SequenceOutput& output);
  // Sends the request's last message, after its held output if any: `out` plus the text still
  // held back (when `status` is OK), the outcome, token counts and latencies, all reported to
  // the observer.
  void finish(SequenceOutput& output, int32_t generated, FinishReason reason, absl::Status status,
              RequestOutput out, Clock::time_point now);

 private:
  const Tokenizer& tokenizer_;
  EngineObserver default_observer_;
  EngineObserver* observer_ = &default_observer_;
};

}  // namespace tessera
