// The CPU backend: fp32 weights, activations and KV cache in host memory; the reference that
// every other backend is tested against. An op handed a tensor that is not fp32 does nothing and
// fails the step (Backend::record_error), as on the GPU.
#pragma once

#include <string>

#include "kernels/cpu/cpu_gemm_selector.h"
#include "kernels/cpu/cpu_tunable_gemm.h"
#include "runtime/backend.h"

namespace tessera {

class CpuBackend final : public Backend {
 public:
  // `threads` <= 0: use every available core. `device` numbers the CPU "devices" of a model
  // split over several (placement tests and development; they share the host's memory).
  explicit CpuBackend(int threads = 0, int device = 0);

  std::string name() const override { return name_; }
  DType compute_dtype() const override { return DType::kF32; }

  absl::StatusOr<DeviceBuffer> allocate(size_t bytes) override;
  void free(void* data) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  size_t free_memory() const override;
  bool uses_host_memory() const override { return true; }
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
  void rope_and_cache(const Tensor& qkv, const Tensor& inv_freq, AttentionShape shape,
                      const QkvPrologue& prologue, const KvLayerView& cache) override;
  void attention(const Tensor& qkv, const KvLayerView& cache, AttentionShape shape,
                 const AttentionSpec& spec, const Tensor& out) override;
  void gated_activation(const Tensor& gate_up, Activation act, const Tensor& out) override;
  void soft_cap(const Tensor& x, float cap) override;
  void gather_logit_rows(const Tensor& x, const Tensor& out) override;
  void sample(const Tensor& logits, std::span<const SamplingRow> rows,
              const Tensor& tokens) override;
  // The step's first error (an op handed a tensor that is not fp32), cleared.
  absl::Status synchronize() override { return take_step_error(); }

  TunableGemm* tunable_gemm() override { return &tunable_gemm_; }

 private:
  // check_dtype for fp32, the one dtype this backend computes in.
  bool f32(const Tensor& t, const char* op, const char* what) {
    return check_dtype(t, DType::kF32, op, what);
  }

  std::string name_;
  int threads_;  // OpenMP threads; set on the calling thread at each step (a per-thread setting)
  const StepBatch* batch_ = nullptr;  // the current step, owned by the caller
  SamplingScratch sampling_scratch_;
  CpuTunableGemm tunable_gemm_;       // the tuner's; its operands are its own
  CpuGemmSelector gemm_selector_;     // linear()'s algorithm per shape
};

}  // namespace tessera
