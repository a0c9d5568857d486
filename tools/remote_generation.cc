#include "tools/remote_generation.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/proto_text.h"
#include "tools/text_table.h"

namespace tessera::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string format_duration(double seconds) {
  return seconds < 1 ? absl::StrFormat("%.1f ms", seconds * 1e3)
                     : absl::StrFormat("%.2f s", seconds);
}

}  // namespace

absl::StatusOr<GenerationResult> generate_streaming(ServerConnection& connection,
                                                    grpc::ClientContext& context,
                                                    const v1::GenerateRequest& request,
                                                    const TextSink& on_text) {
  GenerationResult result;
  const Clock::time_point start = Clock::now();
  auto reader = connection.generation().GenerateStream(&context, request);
  v1::GenerateStreamChunk chunk;
  while (reader->Read(&chunk)) {
    ++result.chunks;
    if (chunk.token_ids_size() > 0 && result.token_ids.empty())
      result.ttft_seconds = seconds_since(start);
    result.token_ids.insert(result.token_ids.end(), chunk.token_ids().begin(),
                            chunk.token_ids().end());
    for (const auto& lp : chunk.logprobs()) result.logprobs.push_back(lp);
    if (!chunk.text().empty()) {
      result.text += chunk.text();
      if (on_text) on_text(chunk.text());
    }
    if (chunk.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      result.finish_reason = chunk.finish_reason();
      result.usage = chunk.usage();
      result.server_timings = chunk.timings();
    }
  }
  const grpc::Status status = reader->Finish();
  result.total_seconds = seconds_since(start);
  if (absl::Status s = connection.check(status); !s.ok()) return s;
  if (result.finish_reason == v1::FINISH_REASON_UNSPECIFIED) {
    return absl::InternalError("the stream ended without a final chunk (no finish_reason)");
  }
  return result;
}

absl::StatusOr<GenerationResult> generate_unary(ServerConnection& connection,
                                                grpc::ClientContext& context,
                                                const v1::GenerateRequest& request) {
  GenerationResult result;
  const Clock::time_point start = Clock::now();
  v1::GenerateResponse response;
  const grpc::Status status = connection.generation().Generate(&context, request, &response);
  result.total_seconds = seconds_since(start);
  if (absl::Status s = connection.check(status); !s.ok()) return s;
  result.chunks = 1;
  result.text = response.text();
  result.token_ids.assign(response.token_ids().begin(), response.token_ids().end());
  result.logprobs.assign(response.logprobs().begin(), response.logprobs().end());
  result.finish_reason = response.finish_reason();
  result.usage = response.usage();
  result.server_timings = response.timings();
  result.ttft_seconds = response.timings().time_to_first_token_seconds();
  return result;
}

std::string summary_line(const GenerationResult& r) {
  const int32_t generated = r.usage.completion_tokens() > 0
                                ? r.usage.completion_tokens()
                                : static_cast<int32_t>(r.token_ids.size());
  const double decode_seconds = r.total_seconds - r.ttft_seconds;
  const double decode_rate =
      generated > 1 && decode_seconds > 0 ? (generated - 1) / decode_seconds : 0;
  return absl::StrFormat(
      "[prompt %d tokens, generated %d tokens (%s), TTFT %s, total %s, %.1f tok/s]",
      r.usage.prompt_tokens(), generated, finish_reason_name(r.finish_reason),
      format_duration(r.ttft_seconds), format_duration(r.total_seconds), decode_rate);
}

std::string logprobs_table(const GenerationResult& r) {
  TextTable table({{"#", true}, {"ID", true}, {"TOKEN"}, {"LOGPROB", true}, {"TOP"}});
  for (size_t i = 0; i < r.logprobs.size(); ++i) {
    const v1::GeneratedTokenLogprobs& lp = r.logprobs[i];
    std::string top;
    for (const v1::TokenLogprob& alt : lp.top()) {
      if (!top.empty()) top += "  ";
      absl::StrAppend(&top, quote_token(alt.token()), absl::StrFormat(" %.3f", alt.logprob()));
    }
    table.add_row({absl::StrCat(i), absl::StrCat(lp.chosen().token_id()),
                   quote_token(lp.chosen().token()), absl::StrFormat("%.3f", lp.chosen().logprob()),
                   top});
  }
  return table.render();
}

}  // namespace tessera::cli
