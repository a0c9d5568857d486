// The GPU's side of GEMM tuning (runtime/backend/tunable_gemm.h), over gpu::Gemm: the candidates of
// a signature (Default, the library's, tessera's own small-M kernels), operand sets on the device
// filled with seeded random values (A = w, B = x, C = out; FP8 signatures' quantized per tensor
// or per row from 16-bit values, the scales shared by every set, x's values kept beside its codes
// for the FP8-weight kernels), the output copied back as fp32, and
// timing with device events over the rotating operand sets; many candidates' rough timings
// launched back to back with one wait (time_each); the numerics check on the device
// (output_compare.h); the next signature's candidates listed and resolved on a thread of its own
// while the current one is timed (prefetch_candidates). Warmup calls it from threads of its own
// while the engine serves (runtime/tuning/model_tuning.h), so it has its own library handle,
// workspace and stream on its device, and selects that device at every entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/gemm/gpu_gemm.h"
#include "kernels/gemm/output_compare.h"
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
  // A device copy of the output; compare_output() runs output_compare.h's kernel against it.
  absl::Status keep_reference(int copy) override;
  absl::StatusOr<OutputComparison> compare_output(int copy, double rtol, double atol) override;
  // Every candidate launched back to back, each between its own pair of events, and one wait at
  // the end: no host round trip per candidate, and host work (resolving the next candidate)
  // overlaps the device's. The untimed call is left out for a solution already run in this
  // object with the same dtypes -- its kernels are loaded -- at prefill sizes (more than
  // kWarmDecodeTokens tokens), where that call costs as much device time as the timing itself;
  // decode-sized GEMMs, short enough for a kernel load to distort them, always get it.
  std::vector<absl::StatusOr<double>> time_each(const std::vector<std::string>& solutions,
                                                int64_t iterations) override;
  // Lists `sig`'s candidates and resolves each (the library's check) on a thread of its own,
  // with a library handle of its own; candidates() and prepare() of that signature take them.
  void prefetch_candidates(const GemmSignature& sig) override;

  static constexpr int64_t kWarmDecodeTokens = 256;

 private:
  explicit GpuTunableGemm(int device) : device_(device) {}
  // Makes this object's GPU current on the calling thread.
  absl::Status select_device() const;
  absl::StatusOr<const Gemm::Solution*> solution(std::string_view name);
  absl::Status check_copy(int copy) const;
  // An FP8 signature's operands (prepare()): allocates scales_ and quantizes into every set,
  // per tensor or row-wise as the shape says.
  absl::Status fill_fp8_operands(size_t w_elems, size_t x_elems, float w_max);
  // The prepared signature's scales (none but for FP8).
  GemmScales scales() const;

  // A shape's candidates with their solutions resolved.
  struct Listing {
    std::vector<std::string> names;
    std::map<std::string, Gemm::Solution, std::less<>> solutions;
  };
  static absl::StatusOr<Listing> list(Gemm& gemm, const GemmShape& shape);
  // Waits for a listing in flight, if any (prefetch_mu_ held).
  void wait_prefetch_locked();

  // One operand set in one allocation: w [n, k], x [m, k] (both of the prepared shape's dtype),
  // out [m, n]; for FP8 shapes also x_values [m, k], x before quantization (the output dtype).
  struct Operands {
    void* base = nullptr;
    void* w = nullptr;
    void* x = nullptr;
    void* out = nullptr;
    void* x_values = nullptr;
  };
  // Runs `s` on operand set `o`: x as `s` reads it (FP8 codes, or the values before quantization
  // for tessera's FP8-weight kernels).
  absl::Status run_on(const Gemm::Solution& s, const Operands& o);

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

  std::vector<gpuEvent_t> events_;  // time_each's, two per candidate, kept for later calls
  // "<dtype>/<out dtype>/<solution>" of every solution run so far: its kernels are loaded.
  std::set<std::string> warmed_;
  void* reference_ = nullptr;  // keep_reference's output copy (shape_'s output bytes)
  // An FP8 signature's w and x scales (one fp32 each, or one per row of w and of x when
  // row-wise) and the quantizer's scratch.
  void* scales_ = nullptr;
  size_t scale_x_offset_ = 0;  // bytes from scales_ to x's
  OutputCompareResult* compare_result_ = nullptr;  // device, 8 bytes

  // Background listing: its own Gemm (library handle), the listing in flight, and what the last
  // candidates() took from it for prepare() to use.
  std::unique_ptr<Gemm> lister_;
  std::mutex prefetch_mu_;
  std::optional<GemmShape> prefetch_shape_;
  std::future<absl::StatusOr<Listing>> prefetch_;
  std::optional<GemmShape> listed_shape_;
  std::map<std::string, Gemm::Solution, std::less<>> listed_solutions_;
};

}  // namespace tessera::gpu
