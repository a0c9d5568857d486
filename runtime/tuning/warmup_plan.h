// Every distinct GEMM a Llama-family model runs, for the padded token counts the scheduler can
// produce: what warmup mode tunes before serving.
//
// Per decoder layer (weights as tessera fuses them at load; all row-major [out, in]):
//   qkv_proj  [(H + 2 * KVH) * D, hidden]
//   o_proj    [hidden, H * D]
//   gate_up   [2 * I, hidden]
//   down      [hidden, I]
// and once per step lm_head [vocab, hidden], bf16 (fp16) inputs with fp32 logits, on the sampled
// rows only. (Tied embeddings change where the lm_head weight comes from, not its shape.)
//
// Token counts, padded as token_buckets.h says:
//   layers:   decode_bucket(n) for n in 1..min(max_batch_tokens, max_logit_rows) (decode-only
//             steps sample one row per token), and prefill_padded(t) for t in 1..max_batch_tokens
//   lm_head:  decode_bucket(r) for r in 1..max_logit_rows
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/backend/gemm_signature.h"
#include "runtime/backend/quantization.h"
#include "runtime/tuning/token_buckets.h"

namespace tessera {

// The dimensions that decide a Llama-family model's GEMM shapes (kept apart from ModelConfig so
// that tuning stands alone).
struct GemmModelShape {
  int64_t hidden = 0;
  int64_t intermediate = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab = 0;
  int64_t num_layers = 0;              // only for WarmupGemm::per_step
  GemmDType dtype = GemmDType::kBF16;  // weights and activations
  // The decoder layers' linear GEMMs' inputs where they differ from `dtype`: an FP8 type when the
  // weights are kept in FP8 (quantization: fp8; row-wise scales, their output stays `dtype`).
  // lm_head is `dtype`.
  std::optional<GemmDType> layer_dtype;
  // With layer_dtype: in how many layers each projection (qkv, o, gate_up, down: LinearProjection)
  // stays in `dtype` (quantization_keep); their GEMMs are planned in both dtypes where mixed.
  std::array<int64_t, kLinearProjections> kept_layers{};
};

// The step limits that bound the token counts (the engine's ForwardLimits).
struct WarmupLimits {
  int64_t max_batch_tokens = 2048;
  int64_t max_logit_rows = 256;
};

struct WarmupGemm {
  GemmSignature signature;
  // Which projections run this GEMM ("qkv_proj", "o_proj", "gate_up", "down", "lm_head"); more
  // than one ("o_proj+down") when two share a shape.
  std::string used_by;
  int64_t tokens = 0;    // the padded token (or logit-row) count: the signature's n
  int64_t per_step = 0;  // calls in one forward step of this token count (layers, or 1)
};

// The distinct GEMMs, ordered by token count (smallest, the decode shapes, first), then by
// their place in the forward pass. Errors name the first non-positive dimension or limit, or
// bad buckets.
absl::StatusOr<std::vector<WarmupGemm>> plan_warmup_gemms(const GemmModelShape& model,
                                                          const TokenBuckets& buckets,
                                                          const WarmupLimits& limits);

// The padded token counts the decoder layers run with, ascending (see the file comment).
std::vector<int64_t> layer_token_counts(const TokenBuckets& buckets, const WarmupLimits& limits);
// The padded logit-row counts lm_head runs with, ascending.
std::vector<int64_t> logit_row_counts(const TokenBuckets& buckets, const WarmupLimits& limits);

}  // namespace tessera
