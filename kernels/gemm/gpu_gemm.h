// The BLAS seam of the GPU backend: row-major out[m, n] = x[m, k] @ w[n, k]^T (gemm_shape.h), bf16
// or fp16 inputs, fp32 accumulation, output of the input type or fp32, run by a named solution:
//
//   "Default"                         the library heuristic's pick for the call (cuBLASLt on
//                                     CUDA, hipBLASLt on ROCm), as before tuning existed
//   "lt_..." / "hipblaslt_sol..."     one library algorithm (blaslt_algos.h)
//   "tessera_smallm_{mma16,mma16x3,mma32,mma64,line16,fma}_splitk{1,2,4,8}"
//                                     tessera's own kernels for m <= 16 (smallm_gemm.h), the
//                                     same names for bf16 and fp16 inputs
//
// Scaled FP8 GEMMs (gemm_shape.h: FP8 x and w, fp32 scales as device pointers -- one each, or
// row-wise a vector each -- bf16 or fp16 out) run Default and the library's algorithms; row-wise
// ones at m <= 16 also
//   "tessera_smallm_w8a16_{mma16,...}_splitk{1,2,4,8}"
//                                     tessera's FP8-weight kernels (smallm_gemm.h), which read x
//                                     in the output dtype, unquantized, and w's row scales only
//                                     (reads_unquantized_x)
// The library wants the TN layout for FP8 on Hopper, which a linear layer is.
//
// candidates() lists the solutions of a shape; resolve() turns a name into a Solution once (parse
// and library check), so that run() does neither per call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/gemm/blaslt_algos.h"
#include "kernels/gemm/gemm_shape.h"
#include "kernels/gemm/smallm_gemm.h"
#include "kernels/gpu.h"

namespace tessera::gpu {

// The FP8 type scaled GEMMs take on this build: e4m3fn on CUDA, e4m3fnuz on ROCm (MI300's; an
// MI350 would take e4m3fn).
inline GemmDType fp8_gemm_dtype() {
#if defined(TESSERA_HIP)
  return GemmDType::kF8E4M3FNUZ;
#else
  return GemmDType::kF8E4M3FN;
#endif
}

// A scaled GEMM's scales: device pointers to one fp32 each, or row-wise (GemmShape::rowwise) to
// m floats (x, per token) and n floats (w, per output feature).
struct GemmScales {
  const float* x = nullptr;
  const float* w = nullptr;
};

class Gemm {
 public:
  // What run() executes: resolved for one shape.
  struct Solution {
    enum class Kind { kDefault, kBlasLt, kSmallM };
    Kind kind = Kind::kDefault;
    std::string name = "Default";
    BlasAlgo blas;                              // kBlasLt
    SmallMKernel smallm = SmallMKernel::kFma;   // kSmallM
    int splits = 1;                             // kSmallM
  };
  struct Candidate {
    std::string name;
    CandidateOrigin origin = CandidateOrigin::kDefault;
  };

  // Creates the library handle and a workspace on the current device.
  static absl::Status create(std::unique_ptr<Gemm>* out);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // "Default" first, then the library's (heuristic list, then enumerated), then tessera's own
  // kernels where the shape suits them (m <= 16, k % 8 == 0, split-K partials fit the
  // workspace; bf16 or fp16, as every GPU GEMM).
  absl::StatusOr<std::vector<Candidate>> candidates(const GemmShape& shape);
  // The solution `name` for `shape`: InvalidArgument for a name that does not parse, NotFound for
  // one that cannot run the shape (library check, workspace, kernel not built, shape).
  absl::StatusOr<Solution> resolve(const GemmShape& shape, std::string_view name);
  // Runs `solution`, resolved for `shape`, on x and w of shape.dtype. Where the operands are less
  // aligned than the solution needs (a row view of a tensor, say; tuning used whole buffers), the
  // call runs Default. FP8 shapes need `scales` (InvalidArgument without them; only w's for a
  // solution that reads x unquantized); other shapes ignore them.
  absl::Status run(const Solution& solution, const GemmShape& shape, const void* x, const void* w,
                   void* out, gpuStream_t stream, GemmScales scales = {});

  // Whether `solution` reads x of `shape` unquantized (the output dtype) rather than as FP8 codes:
  // tessera's FP8-weight kernels.
  static bool reads_unquantized_x(const Solution& solution, const GemmShape& shape) {
    return solution.kind == Solution::Kind::kSmallM && is_fp8(shape.dtype);
  }
  // What `shape` runs when nothing was tuned: Default, but for decode-sized row-wise FP8 shapes
  // tessera's FP8-weight kernel (which one depends on the shape's rows and the device's
  // multiprocessors).
  std::string untuned_solution(const GemmShape& shape) const;

  // The library's version, for the tuning results file's validators.
  std::string library_version() const;

 private:
  // What the library needs for one shape and operand alignment: its descriptors and the
  // default heuristic's algorithm, built on first use (blaslt.cc's types stay out of this header).
  struct Plan;
  struct PlanKey {
    int64_t m, n, k;
    GemmDType dtype, out;
    bool rowwise;  // FP8: the scale modes are part of the descriptors
    uint32_t align_x, align_w, align_out;
    friend auto operator<=>(const PlanKey&, const PlanKey&) = default;
  };

  Gemm() = default;
  absl::StatusOr<const Plan*> plan(const GemmShape& shape, const void* x, const void* w,
                                   const void* out);
  absl::Status run_blaslt(const Plan& plan, const void* algo, const void* x, const void* w,
                          void* out, gpuStream_t stream, const GemmScales* scales);

  // A step's GEMMs repeat a few shapes: building descriptors and asking the heuristic on every
  // call costs more host time than the launch (the engine thread's hot path).
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
  void* handle_ = nullptr;
  void* workspace_ = nullptr;  // the library's, and the small-M kernels' split-K partials
  size_t workspace_bytes_ = 0;
  int64_t multiprocessors_ = 1;  // of the device the Gemm was created on
};

}  // namespace tessera::gpu
