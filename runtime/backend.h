// The Backend seam: every op the forward pass uses. CpuBackend (kernels/cpu) is the reference;
// GpuBackend (kernels/*.cu) implements the same ops on CUDA and HIP. The forward pass is written
// once against this interface (runtime/model/llama.cc).
//
// Layout conventions shared by every op:
//   hidden states   [n_tokens, hidden]                         compute dtype
//   fused qkv       [n_tokens, (n_heads + 2 * n_kv_heads) * head_dim]: q heads, then k, then v
//   KV cache layer  k and v each [num_blocks, block_size, n_kv_heads, head_dim]
//   weights         [out_features, in_features] (HF layout); linear computes x @ w^T
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/model_io/weight_source.h"
#include "runtime/backend/communicator.h"
#include "runtime/backend/sampling_math.h"
#include "runtime/backend/step_batch.h"
#include "runtime/backend/tensor.h"
#include "runtime/backend/tunable_gemm.h"
#include "runtime/backend/quantization.h"

namespace tessera {

struct AttentionShape {
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  RopeStyle rope_style = RopeStyle::kRotateHalf;  // how rope_and_cache pairs a head's dims
  int32_t qkv_width() const { return (num_heads + 2 * num_kv_heads) * head_dim; }
};

// What rope_and_cache does to a token's fresh q, k and v before rotating q and k: the projection's
// bias added (Qwen2), then each q and k head RMS-normalized by its own weight (Qwen3, Gemma 3).
// Null tensors are not applied.
struct QkvPrologue {
  const Tensor* bias = nullptr;    // [qkv_width] over q, k and v
  const Tensor* q_norm = nullptr;  // [head_dim]
  const Tensor* k_norm = nullptr;  // [head_dim]
  NormSpec norm;                   // of q_norm and k_norm
};

// The softmax of attention: scores = scale * q.k, soft-capped to softcap * tanh(scores /
// softcap) when softcap > 0 (Gemma 2), over the causal keys of each query -- of which only the
// last `window` positions (p - window < key position <= p) when window > 0 (sliding-window
// layers: Mistral, Qwen2, Gemma 2/3's local layers).
struct AttentionSpec {
  float scale = 1.0f;
  float softcap = 0.0f;
  int32_t window = 0;
};

// One layer's paged cache, as views into the KV pool's memory: the compute dtype, or kF8_E4M3
// codes (the device's e4m3 encoding) whose values are code x scale, one scale per layer for K and
// one for V (where the backend's prepare_kv_cache accepted kF8_E4M3).
struct KvLayerView {
  Tensor k;  // [num_blocks, block_size, n_kv_heads, head_dim]
  Tensor v;  // [num_blocks, block_size, n_kv_heads, head_dim]
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  // Device memory, 2 floats, or null: where set (a calibration step), rope_and_cache raises
  // amax[0] and amax[1] to the largest |k| and |v| it writes, before quantizing them.
  float* amax = nullptr;
  int32_t block_size() const { return static_cast<int32_t>(k.shape[1]); }
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  // The dtype weights, activations and the KV cache are held in (fp32 on CPU, bf16 on GPU).
  virtual DType compute_dtype() const = 0;

  // --- memory -----------------------------------------------------------------------------
  virtual absl::StatusOr<DeviceBuffer> allocate(size_t bytes) = 0;
  virtual void free(void* data) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  // Bytes this backend can still allocate (for sizing the KV cache).
  virtual size_t free_memory() const = 0;
  // Whether it allocates host memory, which the rest of the machine shares (the KV cache then
  // takes a smaller default share of what is free).
  virtual bool uses_host_memory() const = 0;

  // Reads `name` from `weights` into `dst` (compute dtype, shape `dst`'s), converting and
  // dequantizing as needed. `dst` may be a row range of a fused weight.
  virtual absl::Status load_weight(const WeightSource& weights, std::string_view name,
                                   const Tensor& dst) = 0;
  // Copies host fp32 values into `dst`, converting to dst's dtype.
  virtual void upload_f32(std::span<const float> src, const Tensor& dst) = 0;
  // Copies `src` into `dst` as they are (src holds dst.nbytes() bytes): stored values that need no
  // conversion (an FP8 checkpoint's codes kept as they are).
  virtual void upload_bytes(std::span<const uint8_t> src, const Tensor& dst) = 0;
  // Copies `bytes` from `src` (this backend's memory) to `dst` in `to`'s memory, `to` being
  // another device of the same kind or this one: after the work queued here so far, and before
  // any work queued on `to` afterwards (the hop of hidden states between pipeline stages).
  // Errors surface at the next synchronize() of either backend.
  virtual void copy_to(Backend& to, void* dst, const void* src, size_t bytes) = 0;

  // --- the step ---------------------------------------------------------------------------
  // Makes `batch` the current step: its metadata is what the ops below read.
  virtual void begin_step(const StepBatch& batch) = 0;

  // out[t] = table[token_ids[t] - first_id] * scale, or zeros for a token the table's rows do not
  // hold (a tensor-parallel rank's slice of the vocabulary)      table [rows, hidden], out [n, hidden]
  virtual void embedding(const Tensor& table, int64_t first_id, float scale, const Tensor& out) = 0;
  // out = rms_norm(x) * (offset + w)                     x, out [n, hidden]; w [hidden]
  // out may be an FP8 activation (kF8_E4M3 with its row scales, where fp8_activations() says a
  // linear takes one): the normed rows rounded to the compute dtype, then quantized per row.
  virtual void rms_norm(const Tensor& x, const Tensor& w, NormSpec norm, const Tensor& out) = 0;
  // residual += x; out = rms_norm(residual) * (offset + w)     fused residual add; out as above
  virtual void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& w,
                            NormSpec norm, const Tensor& out) = 0;
  // out[m, n] = x[m, k] @ w[n, k]^T (out may be fp32 while x and w are the compute dtype). w may
  // be FP8 (kF8_E4M3 with its row scales) where supports() accepts kFp8: out is then the compute
  // dtype, and x is quantized per token on the way in (or read as it is, where a kernel that
  // takes FP8 weights with 16-bit activations runs the shape: decode-sized batches) -- or
  // arrives quantized (an FP8 x with a scale per row) from the op that produced it.
  virtual void linear(const Tensor& x, const Tensor& w, const Tensor& out) = 0;
  // Whether linear(x, w, ...) over `rows` rows runs a GEMM that reads x as FP8 codes with a scale
  // per row, so that the op producing x should write it so (rms_norm, add_rms_norm and
  // gated_activation take an FP8 out): the quantization then costs no pass of its own. False for
  // 16-bit weights and on backends without FP8.
  virtual bool fp8_activations(const Tensor& /*w*/, int64_t /*rows*/) { return false; }
  // OK where this backend stores and multiplies weights as `q` says; otherwise why not, naming
  // the backend or device (kNone is always supported).
  virtual absl::Status supports(Quantization q) const {
    if (q == Quantization::kNone) return absl::OkStatus();
    return absl::FailedPreconditionError(
        name() + " has no FP8 weights (quantization: fp8 needs a GPU with FP8 tensor cores)");
  }
  // codes [n, k] (kF8_E4M3) = w [n, k] (compute dtype) / scale[row], scale [n] (fp32) = the row's
  // max |w| over the largest finite FP8 value: one scale per output feature. Where supports(kFp8).
  virtual void quantize_fp8(const Tensor& w, const Tensor& codes, const Tensor& scale);
  // OK where this backend can hold a model's KV cache in `dtype` for attention of `shape` over
  // contexts of up to `max_context` keys in blocks of `block_size`: its compute dtype always;
  // kF8_E4M3 (kv_cache_dtype: fp8) on GPUs with FP8 tensor cores, for the head dims and GQA
  // groups their decode kernel takes. Otherwise why not, naming the key, the backend or device and
  // the shape. Call once, before sizing the cache: it also allocates what attention over such a
  // cache needs (an FP8 cache's 16-bit copy of the keys a prefill step attends to).
  virtual absl::Status prepare_kv_cache(DType dtype, const AttentionShape& shape,
                                        int32_t block_size, int32_t max_context);
  // Applies `prologue` to each token's q, k and v in place, rotates the q and k parts (RoPE at
  // each token's position with inv_freq [head_dim / 2], dimensions paired as shape.rope_style
  // says), then writes k and v into the cache at the step's slot mapping (a slot < 0 is
  // padding: not written).
  virtual void rope_and_cache(const Tensor& qkv, const Tensor& inv_freq, AttentionShape shape,
                              const QkvPrologue& prologue, const KvLayerView& cache) = 0;
  // Causal attention of each sequence's new queries over its cached context (prefill chunks
  // and decode tokens in one batch) as `spec` says; GQA by head grouping.
  //                                                      out [n, n_heads * head_dim]
  virtual void attention(const Tensor& qkv, const KvLayerView& cache, AttentionShape shape,
                         const AttentionSpec& spec, const Tensor& out) = 0;
  // out = act(gate_up[:, :I]) * gate_up[:, I:]           gate_up [n, 2I], out [n, I]
  // out may be an FP8 activation, as rms_norm's.
  virtual void gated_activation(const Tensor& gate_up, Activation act, const Tensor& out) = 0;
  // x = cap * tanh(x / cap), in place (final-logit soft-capping)      x fp32 [rows, vocab]
  virtual void soft_cap(const Tensor& x, float cap) = 0;
  // out[i] = x[logits_rows[i]]                            x [n, hidden], out [n_logits, hidden]
  virtual void gather_logit_rows(const Tensor& x, const Tensor& out) = 0;
  // tokens[r] = the token row r of `logits` gives under rows[r], by the shared sampling math
  // (runtime/backend/sampling_math.h).      logits fp32 [n_rows, vocab], tokens int32 [n_rows]
  virtual void sample(const Tensor& logits, std::span<const SamplingRow> rows,
                      const Tensor& tokens) = 0;
  // Waits for the step's work (a no-op on CPU).
  virtual absl::Status synchronize() = 0;

  // --- decode graphs -----------------------------------------------------------------------
  // A decode step's work recorded once per shape and replayed (CUDA/HIP graphs): every launch's
  // arguments -- pointers, sizes, split-KV plans, GEMM algorithms -- are fixed when recorded;
  // between replays only the contents of the step's metadata change.
  //
  // Whether run_graph() records and replays; the CPU backend runs the ops directly.
  virtual bool records_graphs() const { return false; }
  // begin_step() for a step run through run_graph(): the metadata goes to memory whose address
  // does not move (a replay reads it where the recording did), and attention plans its split-KV
  // work for contexts of up to `max_context` keys instead of this batch's longest, so that one
  // recording serves every batch of its key.
  virtual void begin_graph_step(const StepBatch& batch, int32_t max_context) {
    (void)max_context;
    begin_step(batch);
  }
  // Queues the work `ops` queues on this backend as the graph recorded under `key`. The first
  // time a key runs, its ops run directly (buffers grow and GEMMs are tuned then); the second time
  // they are recorded, and replayed from then on. A recording made before this backend's buffers
  // or its GEMM solutions changed is made again the same way. `ops` must read the step only
  // through the metadata begin_graph_step() uploaded, and use the same tensors for the same key.
  // An error means none of the ops was queued (a recording that fails runs them directly).
  virtual absl::Status run_graph(uint64_t key, absl::FunctionRef<void()> ops) {
    (void)key;
    ops();
    return absl::OkStatus();
  }
  // Drops every recording, after the work queued so far (the next run of a key records again).
  // Before a tensor-parallel group's communicators go: NCCL keeps the work its recorded
  // collectives hold until their graphs are destroyed, and a communicator destroyed first waits
  // for them.
  virtual void release_graphs() {}

  // --- GEMM tuning (runtime/tuning/) --------------------------------------------------------
  // This backend's GEMM algorithms, for the tuner; nullptr when it has nothing to tune.
  virtual TunableGemm* tunable_gemm() { return nullptr; }
  // Where linear() takes its algorithm from; nullptr (the default) = always the library's.
  // Not owned; must outlive the backend's use of it.
  void set_gemm_solutions(GemmSolutionSource* solutions) { gemm_solutions_ = solutions; }

 protected:
  // The one policy of every backend for an op that cannot run what it was handed (a tensor of
  // another dtype than the op computes in, a launch that failed): the op does nothing more, and
  // the step's first such error waits for synchronize() to return it. The ops return no status
  // so that a step queues without a check per op; the step fails as a whole, naming the cause.
  //
  // True when `t` is `want`; otherwise records an INVALID_ARGUMENT naming this backend, `op`,
  // the tensor (`what`) and both dtypes.
  bool check_dtype(const Tensor& t, DType want, const char* op, const char* what);
  // Keeps `s` when it is the step's first error.
  void record_error(absl::Status s);
  // The step's first error so far (OK when none).
  const absl::Status& step_error() const { return step_error_; }
  // The step's first error, cleared: the next step starts clean.
  absl::Status take_step_error();

  GemmSolutionSource* gemm_solutions_ = nullptr;

 private:
  absl::Status step_error_;
};

inline void DeviceBuffer::reset() {
  if (owner_ != nullptr && data_ != nullptr) owner_->free(data_);
  owner_ = nullptr;
  data_ = nullptr;
  bytes_ = 0;
}

}  // namespace tessera
