#include "server/output_conversion.h"

namespace tessera::server {

namespace {

using google::protobuf::RepeatedPtrField;

void set_logprob(int32_t token, float logprob, const Tokenizer& tokenizer,
                 tessera::v1::TokenLogprob& out) {
  out.set_token_id(token);
  out.set_token(tokenizer.token_bytes(token));
  out.set_logprob(logprob);
}

void add_logprobs(const RequestOutput& output, const Tokenizer& tokenizer,
                  RepeatedPtrField<tessera::v1::GeneratedTokenLogprobs>& out) {
  for (const SampleResult& sample : output.logprobs) {
    tessera::v1::GeneratedTokenLogprobs& lp = *out.Add();
    set_logprob(sample.token, sample.logprob, tokenizer, *lp.mutable_chosen());
    for (const TokenLogprob& alt : sample.top) set_logprob(alt.token, alt.logprob, tokenizer, *lp.add_top());
  }
}

template <typename Message>
void set_outcome(const RequestOutput& output, Message& message) {
  message.set_finish_reason(to_proto(output.finish_reason));
  message.mutable_usage()->set_prompt_tokens(output.prompt_tokens);
  message.mutable_usage()->set_completion_tokens(output.completion_tokens);
  message.mutable_timings()->set_queue_seconds(output.queue_seconds);
  message.mutable_timings()->set_time_to_first_token_seconds(output.ttft_seconds);
  message.mutable_timings()->set_total_seconds(output.total_seconds);
}

}  // namespace

tessera::v1::FinishReason to_proto(FinishReason reason) {
  switch (reason) {
    case FinishReason::kLength: return tessera::v1::FINISH_REASON_LENGTH;
    case FinishReason::kStop: return tessera::v1::FINISH_REASON_STOP;
    case FinishReason::kEos: return tessera::v1::FINISH_REASON_EOS;
    case FinishReason::kCancelled: return tessera::v1::FINISH_REASON_CANCELLED;
    case FinishReason::kNone:
    case FinishReason::kError: return tessera::v1::FINISH_REASON_UNSPECIFIED;
  }
  return tessera::v1::FINISH_REASON_UNSPECIFIED;
}

void to_stream_chunk(const RequestOutput& output, const std::string& request_id,
                     const Tokenizer& tokenizer, tessera::v1::GenerateStreamChunk& chunk) {
  chunk.Clear();
  chunk.set_request_id(request_id);
  chunk.set_text(output.text);
  chunk.mutable_token_ids()->Add(output.token_ids.begin(), output.token_ids.end());
  add_logprobs(output, tokenizer, *chunk.mutable_logprobs());
  if (output.finished) set_outcome(output, chunk);
}

void append_to_response(const RequestOutput& output, const Tokenizer& tokenizer,
                        tessera::v1::GenerateResponse& response) {
  response.mutable_text()->append(output.text);
  response.mutable_token_ids()->Add(output.token_ids.begin(), output.token_ids.end());
  add_logprobs(output, tokenizer, *response.mutable_logprobs());
  if (output.finished) set_outcome(output, response);
}

}  // namespace tessera::server
