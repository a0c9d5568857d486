// How a step's token count is padded so that few GEMM shapes exist (each is tuned once, and a
// CUDA/HIP graph can be captured per padded size). The scheduler, the graph cache and the warmup
// plan all use these functions, so a shape tuned in warmup is the shape that runs.
//
//   decode-only step of n tokens:  the smallest decode bucket >= n; past the largest bucket,
//                                  n rounded up to a multiple of prefill_pad
//   step with any prefill, n tokens in all:  n rounded up to a multiple of prefill_pad
//   logit rows (lm_head), r rows:  decode_bucket(r)
//
// A padded count can exceed the limit it was padded under (max_batch_tokens 2000 pads to 2048):
// buffers are sized for the padded maximum.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera {

struct TokenBuckets {
  // Ascending, positive, no repeats.
  std::vector<int64_t> decode = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  // Prefill (and large decode) token counts are padded to a multiple of this; positive.
  int64_t prefill_pad = 64;

  // Names the first bad value: a non-positive or out-of-order bucket, a non-positive pad.
  absl::Status validate() const;
};

// Smallest decode bucket >= n; beyond the largest bucket, n rounded up to prefill_pad.
// n <= 0 gives 0 (nothing to run).
int64_t decode_bucket(const TokenBuckets& b, int64_t n);

// n rounded up to a multiple of prefill_pad; n <= 0 gives 0.
int64_t prefill_padded(const TokenBuckets& b, int64_t n);

// The padded token count of one step of n tokens, as the file comment says.
int64_t padded_step_tokens(const TokenBuckets& b, int64_t n, bool has_prefill);

// "1,2,4,8" (spaces allowed around numbers) -> {1, 2, 4, 8}, validated as decode buckets.
// Errors name the text and the bad element.
absl::StatusOr<std::vector<int64_t>> parse_bucket_list(std::string_view text);

// {1, 2, 4} -> "1,2,4".
std::string format_bucket_list(const std::vector<int64_t>& buckets);

}  // namespace tessera
