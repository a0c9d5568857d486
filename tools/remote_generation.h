// One generation against tesserad, streamed (GenerateStream) or whole (Generate), with the
// client-side timings the CLI reports, plus the text renderings of its outcome.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/client_context.h"
#include "tessera/v1/tessera.pb.h"
#include "tools/server_connection.h"

namespace tessera::cli {

struct GenerationResult {
  std::string text;  // all text deltas joined
  std::vector<int32_t> token_ids;
  std::vector<v1::GeneratedTokenLogprobs> logprobs;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  v1::Usage usage;
  v1::Timings server_timings;
  int32_t chunks = 0;        // stream messages received (1 for unary)
  double ttft_seconds = 0;   // call start to the first chunk carrying tokens (unary: the server's)
  double total_seconds = 0;  // call start to the call's end, as the client saw it
};

// Called with each non-empty text delta, as it arrives.
using TextSink = std::function<void(const std::string& delta)>;

// `context` may carry a deadline, and may be cancelled (TryCancel) from another thread; errors
// come back through ServerConnection::check (the gRPC code named in the message).
absl::StatusOr<GenerationResult> generate_streaming(ServerConnection& connection,
                                                    grpc::ClientContext& context,
                                                    const v1::GenerateRequest& request,
                                                    const TextSink& on_text);
absl::StatusOr<GenerationResult> generate_unary(ServerConnection& connection,
                                                grpc::ClientContext& context,
                                                const v1::GenerateRequest& request);

// "[prompt 12 tokens, generated 64 tokens (length), TTFT 85.2 ms, total 1.52 s, 43.1 tok/s]"
std::string summary_line(const GenerationResult& result);

// One row per generated token: position, id, token, logprob, and the alternatives.
std::string logprobs_table(const GenerationResult& result);

}  // namespace tessera::cli
