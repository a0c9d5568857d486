// Launchers of the GPU kernels, on raw device pointers; each returns the launch's error
// (gpuGetLastError) so that the caller can turn it into a Status. Shapes follow runtime/backend.h.
// One translation unit per family: elementwise.cu, attention.cu (RoPE + cache write, generic
// attention), attention_prefill.cu, attention_decode.cu, sampling.cu.
#pragma once

#include <cstdint>

#include "base/fp8.h"
#include "kernels/gpu.h"

namespace tessera::gpu {

// The step's metadata on the device (see runtime/backend/step_batch.h); seq_of maps token -> sequence.
struct DeviceStep {
  const int32_t* token_ids = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* slot_mapping = nullptr;
  const int32_t* query_start = nullptr;
  const int32_t* context_len = nullptr;
  const int32_t* block_tables = nullptr;
  const int32_t* logits_rows = nullptr;
  const int32_t* seq_of = nullptr;
  // The attention kernels' split of the batch: sequences with more than one new token (prefill
  // chunks) and with exactly one (decode), as indices into the per-sequence arrays.
  const int32_t* prefill_seqs = nullptr;
  const int32_t* decode_seqs = nullptr;
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  int32_t max_blocks = 0;
  int32_t num_logits = 0;
  int32_t num_prefill_seqs = 0;
  int32_t max_prefill_q = 0;       // longest prefill chunk
  int32_t num_decode_seqs = 0;
  // Longest decode context (keys); in a graph step, the context class's bound (the split-KV
  // plan recorded must hold for every batch of the key).
  int32_t max_decode_context = 0;
};

// elementwise.cu, for T = gpu_bf16 and gpu_f16 (gpu.h's element types).
// dst[i] = src[i] rounded to T (to nearest even). With `first_non_finite` (device memory) set,
// each dst[i] that is NaN or infinite lowers it (atomicMin) to index_base + i: the weight check
// of load_weight's host path.
template <typename T>
gpuError_t convert_f32(const float* src, T* dst, int64_t n, gpuStream_t stream,
                       unsigned long long* first_non_finite = nullptr, int64_t index_base = 0);
// dst[i] = uniform in [lo, hi), from (seed, i): benchmark inputs without a host round trip.
template <typename T>
gpuError_t fill_uniform(T* dst, int64_t n, uint64_t seed, float lo, float hi, gpuStream_t stream);
// out = table[ids - first_id] * scale (a plain copy at scale 1); zeros for an id outside the
// table's `rows` (another tensor-parallel rank's).
template <typename T>
gpuError_t embedding(const T* table, int64_t first_id, int64_t rows, int64_t hidden,
                     const int32_t* ids, int64_t n, float scale, T* out, gpuStream_t stream);
// out = x / rms(x) * (weight_offset + w); residual may be null (plain rms_norm), otherwise
// residual += x first and the sum is normalized.
template <typename T>
gpuError_t rms_norm(T* residual, const T* x, const T* w, int64_t n, int64_t hidden, float eps,
                    float weight_offset, T* out, gpuStream_t stream);
// out = act(gate) * up, act SiLU or (gelu) GELU-tanh.
template <typename T>
gpuError_t gated_activation(const T* gate_up, int64_t n, int64_t inter, bool gelu, T* out,
                            gpuStream_t stream);

// Where rms_norm_fp8 and gated_activation_fp8 write their output: e4m3 codes [n, width] in
// `encoding` and an fp32 scale per row -- the activations of the row-wise scaled GEMMs, quantized
// by the op that produces them rather than by a pass of their own.
struct Fp8Rows {
  uint8_t* codes = nullptr;
  float* scales = nullptr;
  Fp8Encoding encoding = Fp8Encoding::kE4M3FN;
};
// rms_norm and gated_activation with the output written as FP8: each row's values are rounded
// to T as the 16-bit ops round them, then quantized as quantize_fp8_per_row quantizes a row (its
// scale from the row's largest |value|): bit for bit the 16-bit op followed by
// quantize_fp8_per_row, without the 16-bit output's round trip through memory. One block a row.
template <typename T>
gpuError_t rms_norm_fp8(T* residual, const T* x, const T* w, int64_t n, int64_t hidden, float eps,
                        float weight_offset, const Fp8Rows& out, gpuStream_t stream);
template <typename T>
gpuError_t gated_activation_fp8(const T* gate_up, int64_t n, int64_t inter, bool gelu,
                                const Fp8Rows& out, gpuStream_t stream);
// x[i] = cap * tanh(x[i] / cap), fp32 in place.
gpuError_t soft_cap(float* x, int64_t n, float cap, gpuStream_t stream);
template <typename T>
gpuError_t gather_rows(const T* x, int64_t hidden, const int32_t* rows, int64_t n_rows, T* out,
                       gpuStream_t stream);

// What rope_and_cache applies first (null: not applied): bias [qkv_width] on q, k and v, then
// each q / k head RMS-normalized by q_norm / k_norm [head_dim] (weights scaled as
// (norm_offset + w)).
template <typename T>
struct QkvPrologueArgs {
  const T* bias = nullptr;
  const T* q_norm = nullptr;
  const T* k_norm = nullptr;
  float norm_eps = 1e-6f;
  float norm_offset = 0.0f;
};

// An FP8 KV cache's pools: e4m3 codes (`encoding`: the device's, fp8_encoding_of) laid out like
// a 16-bit cache's elements, value = value(code) * scale, one scale per layer for K and one for V.
struct Fp8KvPools {
  const uint8_t* k = nullptr;
  const uint8_t* v = nullptr;
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  Fp8Encoding encoding = Fp8Encoding::kE4M3FN;
};

// Where rope_and_cache writes each token's k and v: into T pools (k, v), or, with `codes` set,
// as FP8 codes of value / scale (saturating to the largest finite code) into codes->k / v.
// `amax` (device memory, 2 floats, may be null) is raised to the largest |k| and |v| written,
// before quantizing: what a calibration step measures the layer's scales from.
template <typename T>
struct KvCacheWrite {
  T* k = nullptr;
  T* v = nullptr;
  const Fp8KvPools* codes = nullptr;  // host struct, read at launch
  float* amax = nullptr;
};

// The prologue, RoPE on q and k (pairs (i, i + d/2), or (2i, 2i + 1) when `interleaved`), then k
// and v to the cache at the step's slots (slot < 0: padding, not written). The attention
// launchers below, like the elementwise ones, are built for T = gpu_bf16 and gpu_f16.
template <typename T>
gpuError_t rope_and_cache(T* qkv, const float* inv_freq, const DeviceStep& step,
                          int32_t num_heads, int32_t num_kv_heads, int32_t head_dim,
                          bool interleaved, const QkvPrologueArgs<T>& prologue,
                          const KvCacheWrite<T>& cache, gpuStream_t stream);

// FP8 KV cache, prefill: the cached keys and values (every position before context_len) of the
// step's prefill sequences step.prefill_seqs[0 .. num_prefill_seqs), read from `pools` at
// step.block_tables and written as T values (code value x scale, rounded to nearest even) at the
// same positions of the blocks `scratch_tables` ([num_seqs, max_blocks], rows like
// block_tables') names in k_out / v_out ([blocks, block_size, n_kv_heads, head_dim]): the
// 16-bit copy the prefill kernels attend over. max_context: the longest of their contexts.
template <typename T>
gpuError_t widen_kv_context(const Fp8KvPools& pools, int32_t block_size, const DeviceStep& step,
                            int32_t max_context, const int32_t* scratch_tables,
                            int32_t num_kv_heads, int32_t head_dim, T* k_out, T* v_out,
                            gpuStream_t stream);

// Attention. Soft-capping (softcap > 0: scores = softcap * tanh(scale q.k / softcap) before the
// softmax) and sliding windows (window > 0: a query at position p sees keys in (p - window, p])
// are taken by every kernel. The fast kernels cover head_dim 64, 128 and 256 (prefill: CUDA only;
// decode: GQA groups up to kMaxDecodeGroup); the generic kernel covers every head_dim up to
// kMaxHeadDim on both vendors, and with skip_decode leaves single-token sequences to the decode
// kernel.
inline constexpr int kMaxHeadDim = 256;
inline constexpr int kMaxDecodeGroup = 8;
template <typename T>
gpuError_t attention_generic(const T* qkv, const T* k_cache, const T* v_cache, int32_t block_size,
                             const DeviceStep& step, int32_t num_heads, int32_t num_kv_heads,
                             int32_t head_dim, float scale, float softcap, int32_t window,
                             bool skip_decode, T* out, gpuStream_t stream);

// attention_prefill.cu: the prefill sequences of the step (causal = false only for benchmarks).
bool prefill_kernel_supported(int32_t head_dim);
template <typename T>
gpuError_t attention_prefill(const T* qkv, const T* k_cache, const T* v_cache, int32_t block_size,
                             const DeviceStep& step, int32_t num_heads, int32_t num_kv_heads,
                             int32_t head_dim, float scale, bool causal, float softcap,
                             int32_t window, T* out, gpuStream_t stream);

// attention_decode.cu: the decode sequences of the step, split-KV. part_acc holds
// num_decode_seqs * num_heads * num_splits * head_dim floats, part_ml twice
// num_decode_seqs * num_heads * num_splits (unused when num_splits is 1). With a window the splits
// cut only each sequence's last `window` keys: plan them over min(max context, window).
struct DecodeSplits {
  int32_t num_splits = 1;
  int32_t keys_per_split = 1 << 30;
};
inline constexpr int kMaxDecodeSplits = 128;
DecodeSplits plan_decode_splits(int32_t num_decode_seqs, int32_t num_kv_heads,
                                int32_t max_context, int32_t multiprocessors);
bool decode_kernel_supported(int32_t head_dim, int32_t group);
template <typename T>
gpuError_t attention_decode(const T* qkv, const T* k_cache, const T* v_cache, int32_t block_size,
                            const DeviceStep& step, int32_t num_heads, int32_t num_kv_heads,
                            int32_t head_dim, float scale, float softcap, int32_t window,
                            const DecodeSplits& splits, float* part_acc, float* part_ml, T* out,
                            gpuStream_t stream);
// The same over an FP8 cache: each code widened to T exactly (fp8_widen.h), k_scale folded into
// the scores' scale and v_scale into the output.
template <typename T>
gpuError_t attention_decode(const T* qkv, const Fp8KvPools& pools, int32_t block_size,
                            const DeviceStep& step, int32_t num_heads, int32_t num_kv_heads,
                            int32_t head_dim, float scale, float softcap, int32_t window,
                            const DecodeSplits& splits, float* part_acc, float* part_ml, T* out,
                            gpuStream_t stream);

// sampling.cu: tokens[r] = the token of logits row r ([n_rows, vocab] fp32) under rows[r], by
// the math of runtime/backend/sampling_math.h; one CTA per row. `rows` is host memory: the launcher
// passes it by value, kSampleRowsPerLaunch rows per launch.
struct SampleRow {
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  uint32_t draw_bits;  // sampling_draw_bits(seed, counter), computed on the host
};
inline constexpr int kSampleRowsPerLaunch = 128;
gpuError_t sample(const float* logits, int64_t vocab, const SampleRow* rows, int32_t n_rows,
                  int32_t* tokens, gpuStream_t stream);

}  // namespace tessera::gpu
