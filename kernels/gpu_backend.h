// The GPU backend: weights, activations and KV cache in device memory in its compute dtype (bf16,
// or fp16 when chosen at creation), fp32 accumulation, fp32 logits, one stream. Ops that cannot
// run what they were handed record the error as every backend does (Backend::record_error);
// synchronize() returns it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/gemm/gemm_solution_cache.h"
#include "kernels/gemm/gpu_gemm.h"
#include "kernels/gemm/gpu_tunable_gemm.h"
#include "kernels/gpu_ops.h"
#include "kernels/op_profiler.h"
#include "runtime/backend.h"

namespace tessera {

class GpuBackend final : public Backend {
 public:
  // GPUs visible to this process (0 when there is no driver or device).
  static int device_count();
  // `dtype`: the compute dtype, kBF16 or kF16 (InvalidArgument for any other).
  static absl::StatusOr<std::unique_ptr<GpuBackend>> create(int device = 0,
                                                            DType dtype = DType::kBF16);
  ~GpuBackend() override;

  std::string name() const override { return name_; }
  DType compute_dtype() const override { return dtype_; }

  absl::StatusOr<DeviceBuffer> allocate(size_t bytes) override;
  void free(void* data) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  size_t free_memory() const override;
  bool uses_host_memory() const override { return false; }
  absl::Status load_weight(const WeightSource& weights, std::string_view name,
                           const Tensor& dst) override;
  void upload_f32(std::span<const float> src, const Tensor& dst) override;
  void upload_bytes(std::span<const uint8_t> src, const Tensor& dst) override;
  void copy_to(Backend& to, void* dst, const void* src, size_t bytes) override;

  void begin_step(const StepBatch& batch) override;
  void embedding(const Tensor& table, int64_t first_id, float scale, const Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, NormSpec norm, const Tensor& out) override;
  void add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& w, NormSpec norm,
                    const Tensor& out) override;
  void linear(const Tensor& x, const Tensor& w, const Tensor& out) override;
  // FP8 weights of a shape whose solution at `rows` reads FP8 x (cuBLASLt's row-wise scaled
  // GEMM; tessera's FP8-weight kernels read 16-bit x).
  bool fp8_activations(const Tensor& w, int64_t rows) override;
  absl::Status supports(Quantization q) const override;
  void quantize_fp8(const Tensor& w, const Tensor& codes, const Tensor& scale) override;
  void rope_and_cache(const Tensor& qkv, const Tensor& inv_freq, AttentionShape shape,
                      const QkvPrologue& prologue, const KvLayerView& cache) override;
  void attention(const Tensor& qkv, const KvLayerView& cache, AttentionShape shape,
                 const AttentionSpec& spec, const Tensor& out) override;
  void gated_activation(const Tensor& gate_up, Activation act, const Tensor& out) override;
  void soft_cap(const Tensor& x, float cap) override;
  void gather_logit_rows(const Tensor& x, const Tensor& out) override;
  void sample(const Tensor& logits, std::span<const SamplingRow> rows,
              const Tensor& tokens) override;
  absl::Status synchronize() override;
  bool records_graphs() const override { return true; }
  void begin_graph_step(const StepBatch& batch, int32_t max_context) override;
  absl::Status run_graph(uint64_t key, absl::FunctionRef<void()> ops) override;
  void release_graphs() override;
  TunableGemm* tunable_gemm() override { return tunable_gemm_.get(); }
  // FP8 caches where supports(kFp8) and the decode kernel takes the shape; allocates the widened
  // prefill context (see attention()).
  absl::Status prepare_kv_cache(DType dtype, const AttentionShape& shape, int32_t block_size,
                                int32_t max_context) override;

  gpuStream_t stream() const { return stream_; }
  int device() const { return device_; }
  // Makes this backend's GPU the calling thread's current device (several GpuBackends of one
  // process share the thread: each entry point that calls the runtime selects its own).
  void make_current() const;
  // Enables direct access from this GPU to `peer`'s memory once, when the hardware allows it;
  // without it the driver stages peer copies through host memory. Call with this GPU current.
  void enable_peer_access(int peer);
  // The current step's metadata on the device, for benchmarks that call kernels directly.
  const gpu::DeviceStep& device_step() const { return step_; }
  int multiprocessors() const { return multiprocessors_; }
  // Decode step graphs recorded and replayed so far (run_graph).
  uint64_t graphs_recorded() const { return graphs_recorded_; }
  uint64_t graph_replays() const { return graph_replays_; }

 private:
  GpuBackend(int device, DType dtype) : device_(device), dtype_(dtype) {}
  absl::Status init();
  // Host fp32 -> device `dst` (fp32, bf16 or fp16) through the pinned staging and f32 scratch
  // buffers. `check`: the conversion to 16 bits also runs the weight check (arm_weight_check
  // first, read_weight_check after).
  absl::Status upload(const float* src, int64_t n, const Tensor& dst, bool check = false);
  // The weight check's device word: set to "none found" before a tensor's conversion, read (one
  // 8-byte copy, after the stream has drained) once after it: the first non-finite element's
  // index, or -1.
  absl::Status arm_weight_check();
  absl::StatusOr<int64_t> read_weight_check();
  absl::Status ensure_pinned(size_t bytes);
  // load_weight's device path for a bf16 or fp16 `dst`: the stored bytes of `name` (a type that
  // gpu::dequantizes_on_device, shaped as `dst`) go up in chunks through the pinned staging and
  // the scratch, and are converted on the GPU, which checks every converted element is finite
  // (an error naming the tensor and the first one that is not). False, having done nothing, for
  // any other tensor (the host path converts it then).
  absl::StatusOr<bool> load_weight_on_device(const WeightSource& weights, std::string_view name,
                                             const Tensor& dst);
  // OK where this GPU computes in FP8 (sm_89+; not yet ROCm), else why not, naming `key`.
  absl::Status fp8_available(std::string_view key) const;
  // Grows the split-KV decode partials (fp32) to at least `floats`.
  absl::Status ensure_decode_workspace(size_t floats);
  // Starts the op profile's next op (TESSERA_PROFILE_OPS=1; nothing otherwise).
  void mark(std::string_view op);
  // Grows the FP8 activations to hold `rows` x `cols` codes and `rows` scales.
  absl::Status ensure_fp8_activations(int64_t rows, int64_t cols);
  // Replaces the scratch `*buffer` (null: none yet) with `bytes` of fresh device memory, once the
  // stream's work that may read the old one is done; recorded graphs (which point at it) are
  // staled. The growth policy is the caller's (ensure_fp8_activations, ensure_decode_workspace).
  absl::Status reallocate_scratch(void** buffer, size_t bytes);
  // out = x @ w^T with w FP8 (a scale per row): the tuned (or untuned) solution of the row-wise
  // scaled shape; x read as its producer quantized it (an FP8 x), else quantized per token into
  // the FP8 activations unless the solution reads x as it is (tessera's FP8-weight kernels).
  void linear_fp8(const Tensor& x, const Tensor& w, const Tensor& out);
  gpu::GemmShape fp8_linear_shape(int64_t rows, const Tensor& w) const;
  const gpu::Gemm::Solution& fp8_solution(const gpu::GemmShape& shape);
  // An FP8 x's codes and scales into the FP8 activations (grown to hold them).
  gpuError_t copy_fp8_rows(const Tensor& x, float* scales);
  // rms_norm / add_rms_norm (residual non-null), out 16-bit or an FP8 activation.
  void normalize(const Tensor* residual, const Tensor& x, const Tensor& w, NormSpec norm,
                 const Tensor& out, const char* op);
  // Whether `out` is an FP8 activation of rows x width on a GPU with FP8; records why not.
  bool check_fp8_activation(const Tensor& out, int64_t rows, int64_t width, const char* op);
  gpu::Fp8Rows fp8_rows(const Tensor& t) const;

  // A step's int32 metadata: pinned host staging, its device twin, and the event of the last
  // upload (the staging is not rewritten before that copy has left it).
  struct StepMemory {
    int32_t* host = nullptr;
    int32_t* dev = nullptr;
    size_t capacity = 0;  // int32 elements in each
    gpuEvent_t copied = nullptr;
  };
  // Makes `mem` hold at least `elements`; returns whether it had to move (reallocate).
  absl::StatusOr<bool> reserve_step_memory(StepMemory& mem, size_t elements);
  void free_step_memory(StepMemory& mem);
  // Classifies `batch`'s sequences and uploads its metadata into `mem`, arrays back to back.
  void upload_step(const StepBatch& batch, StepMemory& mem);
  // int32 elements upload_step puts for `batch`.
  size_t step_metadata_elements(const StepBatch& batch) const;
  // FP8 KV cache: cuts the step's prefill sequences into parts whose contexts fit the widened
  // scratch together, and fills `tables` ([num_seqs, max_blocks]) with their scratch blocks.
  void plan_widened_prefill(const StepBatch& batch, std::span<int32_t> tables);
  // Prefill attention over an FP8 cache: each part's context widened into the scratch, then the
  // 16-bit prefill kernel over it.
  template <typename T>
  gpuError_t attend_fp8_prefill(const T* qkv, const gpu::Fp8KvPools& pools, AttentionShape shape,
                                const AttentionSpec& spec, T* out);
  // The cache's pools as the FP8 kernels take them.
  gpu::Fp8KvPools fp8_pools(const KvLayerView& cache) const;

  // A recorded decode step (run_graph). `generation` and `solutions` are what the recording (or
  // the direct run before it) was made under; either moving makes it stale.
  struct StepGraph {
    gpuGraphExec_t exec = nullptr;  // null until recorded
    uint64_t generation = 0;
    uint64_t solutions = 0;
    bool ran = false;         // ran directly once under `generation` and `solutions`
    bool unrecordable = false;  // recording failed once: the key runs directly from then on
  };
  uint64_t solutions_version() const;
  void drop_graph(StepGraph& g);

  int device_;
  DType dtype_;  // kBF16 or kF16
  std::string name_;
  int multiprocessors_ = 1;
  int compute_capability_ = 0;  // major * 10 + minor (HIP: 0)
  gpuStream_t stream_ = nullptr;
  std::unique_ptr<gpu::Gemm> gemm_;
  std::unique_ptr<gpu::GpuTunableGemm> tunable_gemm_;  // on gemm_ and stream_
  gpu::GemmSolutionCache gemm_solution_cache_;        // linear()'s solutions from gemm_solutions_

  // Staging for weights: pinned host memory (grown to the largest tensor read so far) and a
  // fixed-size fp32 device scratch that converts chunk by chunk into the 16-bit destination.
  float* pinned_ = nullptr;
  size_t pinned_bytes_ = 0;
  float* scratch_ = nullptr;
  unsigned long long* first_non_finite_ = nullptr;  // the weight check's word (device memory)
  std::unique_ptr<gpu::OpProfiler> profiler_;  // TESSERA_PROFILE_OPS=1 only
  // FP8 linear: the activations' codes, then (at fp8_code_capacity_ bytes) their per-token
  // scales; grown in a direct run, never while a graph records.
  uint8_t* fp8_activations_ = nullptr;
  size_t fp8_code_capacity_ = 0;   // bytes
  size_t fp8_scale_capacity_ = 0;  // floats
  static constexpr size_t kScratchFloats = size_t{8} << 20;  // 32 MiB

  // Eager steps' metadata (moves when it grows) and graph steps' (growing it bumps
  // graph_generation_).
  StepMemory step_mem_;
  StepMemory graph_step_mem_;
  // Moves whenever memory a recording points into moves (graph step metadata, decode partials).
  uint64_t graph_generation_ = 1;
  std::unordered_map<uint64_t, StepGraph> graphs_;
  uint64_t graphs_recorded_ = 0;
  uint64_t graph_replays_ = 0;
  gpuEvent_t hop_done_ = nullptr;    // the last copy_to() to another GPU, for its stream to wait on
  std::vector<int> peers_enabled_;  // GPUs enable_peer_access() has handled
  float* decode_part_ = nullptr;  // split-KV partial accumulators, then (max, sum) pairs
  size_t decode_part_floats_ = 0;
  gpu::DeviceStep step_;
  std::vector<int32_t> step_seq_of_, step_prefill_seqs_, step_decode_seqs_;  // begin_step's scratch

  // FP8 KV cache (prepare_kv_cache): prefill kernels attend over a 16-bit copy of their
  // sequences' cached keys and values, widened per layer into kv_widened_ (K blocks, then as
  // many V blocks) of kv_widened_blocks_ blocks: one sequence of the longest context.
  bool kv_fp8_ = false;
  int32_t kv_block_size_ = 0;
  int64_t kv_row_ = 0;  // n_kv_heads x head_dim of the cache prepared for
  DeviceBuffer kv_widened_;
  int32_t kv_widened_blocks_ = 0;
  // The step's parts: prefill sequences [first, first + count) of step_.prefill_seqs whose
  // contexts fit the scratch together, and the longest of them.
  struct WidenedPart {
    int32_t first = 0, count = 0, max_context = 0;
  };
  std::vector<WidenedPart> widened_parts_;
  const int32_t* widened_tables_ = nullptr;  // device: the parts' scratch block tables
  std::vector<gpu::SampleRow> sample_rows_;  // sample()'s launch parameters (reused)
};

}  // namespace tessera
