// The GPU's side of GEMM tuning (runtime/backend/tunable_gemm.h), over gpu::Gemm: the candidates of
// a signature (Default, the library's, tessera's own small-M kernels), operand sets on the device
// filled with seeded random values (A = w, B = x, C = out), the output copied back as fp32, and
// timing with device events over the rotating operand sets. Warmup calls it from threads of its own
// while the engine serves (runtime/tuning/model_tuning.h), so it has its own library handle,
// workspace and stream on its device, and selects that device at every entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/gemm/gpu_gemm.h"
#include "kernels/gpu.h"
#include "runtime/backend.h"

namespace tessera::gpu {

class GpuTunableGemm final : public TunableGemm {
 public:
  // On GPU `device` (its ordinal).
  static absl::StatusOr<std::unique_ptr<GpuTunableGemm>> create(int device);
  ~GpuTunableGemm() override;

  // TESSERA_VERSION, CUDA_VERSION (ROCM_VERSION), BLASLT_VERSION, GPU_ARCH ("sm_90" / the gfx
  // name) and DEVICE_NAME.
  std::vector<std::pair<std::string, std::string>> validators() const override {
    return validators_;
  }
  absl::StatusOr<std::vector<std::string>> candidates(const GemmSignature& sig) override;
  size_t operand_bytes(const GemmSignature& sig) const override;
  // The device's L2 cache.
  size_t cache_bytes() const override { return l2_bytes_; }
  absl::Status prepare(const GemmSignature& sig, int copies) override;
  absl::Status run(std::string_view solution, int copy) override;
  // Also poisons C (all bits set: NaN in bf16, fp16 and fp32) after reading it, so that the next
  // output() sees only what a later run() wrote.
  absl::StatusOr<std::vector<float>> output(int copy) override;
  absl::StatusOr<double> time_ms(std::string_view solution, int64_t iterations) override;
  void release() override;

 private:
  explicit GpuTunableGemm(int device) : device_(device) {}
  // Makes this object's GPU current on the calling thread.
  absl::Status select_device() const;
  absl::StatusOr<const Gemm::Solution*> solution(std::string_view name);
  absl::Status check_copy(int copy) const;

  // One operand set in one allocation: w [n, k], x [m, k] (both of the prepared shape's dtype),
  // out [m, n].
  struct Operands {
    void* base = nullptr;
    void* w = nullptr;
    void* x = nullptr;
    void* out = nullptr;
  };

  int device_;
  std::unique_ptr<Gemm> gemm_;
  gpuStream_t stream_ = nullptr;
  gpuEvent_t start_ = nullptr, stop_ = nullptr;
  size_t l2_bytes_ = 0;
  std::vector<std::pair<std::string, std::string>> validators_;
  bool prepared_ = false;
  GemmShape shape_;
  std::vector<Operands> copies_;
  std::map<std::string, Gemm::Solution, std::less<>> resolved_;  // for shape_
};

}  // namespace tessera::gpu
