#include "kernels/gemm/gpu_gemm.h"

#include <utility>

#include "kernels/element_dispatch.h"
#include "kernels/gemm/blaslt.h"
#include "base/status_macros.h"

namespace tessera::gpu {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;

constexpr std::string_view kSmallMPrefix = "tessera_smallm_";
// FP8 weights with 16-bit activations (row-wise scaled FP8 shapes).
constexpr std::string_view kW8A16Prefix = "tessera_smallm_w8a16_";
constexpr int kSmallMSplits[] = {1, 2, 4, 8};

struct SmallMName {
  SmallMKernel kernel;
  std::string_view token;
};
constexpr SmallMName kSmallMNames[] = {{SmallMKernel::kMmaRows16, "mma16"},
                                       {SmallMKernel::kMmaRows32, "mma32"},
                                       {SmallMKernel::kMmaRows64, "mma64"},
                                       {SmallMKernel::kLineRows16, "line16"},
                                       {SmallMKernel::kMmaRows16ThreePerSm, "mma16x3"},
                                       {SmallMKernel::kFma, "fma"}};
// What an untuned decode-sized FP8 shape runs (Gemm::untuned_solution): the 16-row kernel with
// four vectors in flight per lane while its row tiles fit in one wave at two CTAs per
// multiprocessor; with more tiles, the three-per-multiprocessor one (half the vectors in flight,
// more CTAs overlapping each other's start and end). On an H100 and an H200 (132 SMs) each was
// the faster of the two on the 8B shapes at M = 1 and 16 -- qkv (384 tiles) 9.8 / 11.4 us and
// gate_up (1,792) 37.8 / 39.1 on the H200, o and down (256) 9.4 / 6.7 and 28.1 / 17.7.
constexpr SmallMName kUntunedW8A16OneWave = {SmallMKernel::kMmaRows16, "mma16"};
constexpr SmallMName kUntunedW8A16Waves = {SmallMKernel::kMmaRows16ThreePerSm, "mma16x3"};
constexpr int64_t kUntunedOneWaveCtasPerSm = 2;

std::string smallm_name(const GemmShape& shape, std::string_view token, int splits) {
  return str_cat(is_fp8(shape.dtype) ? kW8A16Prefix : kSmallMPrefix, token, "_splitk", splits);
}

// Whether tessera's small-M kernels take `shape`: bf16 or fp16 operands, m <= 16, rows of 16-byte
// vectors; or FP8 weights with row-wise scales and 16-bit activations (the FP8-weight kernels).
bool smallm_takes(const GemmShape& shape) {
  if (is_fp8(shape.dtype)) {
    return shape.rowwise && shape.dtype == fp8_gemm_dtype() &&
           smallm_fp8_shape_supported(shape.m, shape.n, shape.k);
  }
  return (shape.dtype == GemmDType::kBF16 || shape.dtype == GemmDType::kF16) &&
         smallm_shape_supported(shape.m, shape.n, shape.k);
}

bool smallm_available(const GemmShape& shape, SmallMKernel kernel) {
  return is_fp8(shape.dtype) ? smallm_fp8_kernel_available(kernel)
                             : smallm_kernel_available(kernel);
}

// The largest power of two (up to 256) that divides the address.
uint32_t alignment_of(const void* p) {
  uint32_t a = 256;
  while (a > 1 && reinterpret_cast<uintptr_t>(p) % a != 0) a /= 2;
  return a;
}

}  // namespace

absl::Status Gemm::create(std::unique_ptr<Gemm>* out) {
  std::unique_ptr<Gemm> g(new Gemm());
  blasLtHandle_t handle = nullptr;
  BLAS_CHECK(blasLtCreate(&handle));
  g->handle_ = handle;
  GPU_CHECK(gpuMalloc(&g->workspace_, kWorkspaceBytes));
  g->workspace_bytes_ = kWorkspaceBytes;
  // One attribute, not the whole property record (the backend and the tuner read that already).
  int device = 0, multiprocessors = 0;
  GPU_CHECK(gpuGetDevice(&device));
  GPU_CHECK(gpuDeviceGetAttribute(&multiprocessors, gpuDevAttrMultiProcessorCount, device));
  g->multiprocessors_ = multiprocessors;
  *out = std::move(g);
  return absl::OkStatus();
}

Gemm::~Gemm() {
  if (workspace_ != nullptr) (void)gpuFree(workspace_);
  if (handle_ != nullptr) blasLtDestroy(static_cast<blasLtHandle_t>(handle_));
}

std::string Gemm::library_version() const {
  return blaslt_version(static_cast<blasLtHandle_t>(handle_));
}

absl::StatusOr<std::vector<Gemm::Candidate>> Gemm::candidates(const GemmShape& shape) {
  std::vector<Candidate> out = {{"Default", CandidateOrigin::kDefault}};
  TESSERA_ASSIGN_OR_RETURN(auto library,
                           blaslt_candidates(handle_, shape, workspace_bytes_, workspace_));
  for (auto& [name, origin] : library) out.push_back({std::move(name), origin});
  if (smallm_takes(shape)) {
    for (const SmallMName& kernel : kSmallMNames) {
      if (!smallm_available(shape, kernel.kernel)) continue;
      for (int splits : kSmallMSplits) {
        if (smallm_workspace_floats(shape.m, shape.n, splits) * sizeof(float) > workspace_bytes_) {
          continue;
        }
        out.push_back({smallm_name(shape, kernel.token, splits), CandidateOrigin::kOwn});
      }
    }
  }
  return out;
}

std::string Gemm::untuned_solution(const GemmShape& shape) const {
  // Decode-sized FP8 weights: the FP8-weight kernel reads half the bytes of a bf16 GEMM without
  // quantizing x; cuBLASLt's FP8 GEMMs stream the weights at well under copy bandwidth there.
  if (!is_fp8(shape.dtype) || !smallm_takes(shape)) return "Default";
  const int64_t row_tiles = (shape.n + 15) / 16;
  const SmallMName& kernel = row_tiles > kUntunedOneWaveCtasPerSm * multiprocessors_
                                 ? kUntunedW8A16Waves
                                 : kUntunedW8A16OneWave;
  return smallm_available(shape, kernel.kernel) ? smallm_name(shape, kernel.token, 1) : "Default";
}

absl::StatusOr<Gemm::Solution> Gemm::resolve(const GemmShape& shape, std::string_view name) {
  Solution s;
  if (name == "Default") return s;
  s.name = std::string(name);
  if (is_blaslt_name(name)) {
    s.kind = Solution::Kind::kBlasLt;
    TESSERA_ASSIGN_OR_RETURN(s.blas,
                             blaslt_algo(handle_, shape, name, workspace_bytes_, workspace_));
    return s;
  }
  if (name.substr(0, kSmallMPrefix.size()) == kSmallMPrefix) {
    for (const SmallMName& kernel : kSmallMNames) {
      for (int splits : kSmallMSplits) {
        if (name != smallm_name(shape, kernel.token, splits)) continue;
        if (!smallm_available(shape, kernel.kernel)) {
          return absl::NotFoundError(
              str_cat(name, " is not built for this GPU vendor and weight type"));
        }
        if (!smallm_takes(shape) ||
            smallm_workspace_floats(shape.m, shape.n, splits) * sizeof(float) > workspace_bytes_) {
          return absl::NotFoundError(str_cat(
              name, " cannot run ", gemm_dtype_name(shape.dtype), shape.rowwise ? " row-wise" : "",
              " m=", shape.m, " n=", shape.n, " k=", shape.k, " (it takes m <= ",
              kSmallMMaxTokens, ", k a multiple of 16; BFloat16 or Half, or ",
              gemm_dtype_name(fp8_gemm_dtype()),
              " row-wise for the w8a16 kernels; partials within the workspace)"));
        }
        s.kind = Solution::Kind::kSmallM;
        s.smallm = kernel.kernel;
        s.splits = splits;
        return s;
      }
    }
  }
  return absl::InvalidArgumentError(str_cat("unknown GEMM solution \"", name, "\""));
}

struct Gemm::Plan {
  MatmulDescriptors d;
  blasLtMatmulAlgo_t default_algo{};
};

absl::StatusOr<const Gemm::Plan*> Gemm::plan(const GemmShape& shape, const void* x, const void* w,
                                             const void* out) {
  const PlanKey key{shape.m,        shape.n,         shape.k,         shape.dtype,
                    shape.out,      shape.rowwise,   alignment_of(x), alignment_of(w),
                    alignment_of(out)};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second.get();
  auto p = std::make_unique<Plan>();
  TESSERA_RETURN_IF_ERROR(p->d.create(shape, workspace_));
  blasLtMatmulPreference_t pref = nullptr;
  BLAS_CHECK(blasLtMatmulPreferenceCreate(&pref));
  struct PrefGuard {
    blasLtMatmulPreference_t p;
    ~PrefGuard() { blasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  const size_t ws = workspace_bytes_;
  BLAS_CHECK(blasLtMatmulPreferenceSetAttribute(pref, BLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &ws, sizeof(ws)));
#if !defined(TESSERA_HIP)
  // The heuristic assumes 256-byte aligned operands unless told otherwise; row views of a
  // tensor can be less aligned.
  BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &key.align_w, sizeof(key.align_w)));
  BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &key.align_x, sizeof(key.align_x)));
  BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &key.align_out, sizeof(key.align_out)));
  BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &key.align_out, sizeof(key.align_out)));
#endif
  blasLtMatmulHeuristicResult_t result{};
  int found = 0;
  BLAS_CHECK(blasLtMatmulAlgoGetHeuristic(static_cast<blasLtHandle_t>(handle_), p->d.op, p->d.a,
                                          p->d.b, p->d.d, p->d.d, pref, 1, &result, &found));
  if (found == 0) {
    return absl::InternalError(str_cat(BLAS_LIB " has no algorithm for ",
                                       gemm_dtype_name(shape.dtype), " GEMM m=", shape.m,
                                       " n=", shape.n, " k=", shape.k));
  }
  p->default_algo = result.algo;
  return plans_.emplace(key, std::move(p)).first->second.get();
}

absl::Status Gemm::run(const Solution& solution, const GemmShape& shape, const void* x,
                       const void* w, void* out, gpuStream_t stream, GemmScales scales) {
  if (shape.m <= 0 || shape.n <= 0 || shape.k <= 0) return absl::OkStatus();
  const bool scaled = is_fp8(shape.dtype);
  if (reads_unquantized_x(solution, shape)) {
    // FP8 weights, x of the output dtype: no library fallback reads that, so misaligned operands
    // are an error (the backend's buffers are 256-byte aligned).
    if (scales.w == nullptr || alignment_of(x) < 16 || alignment_of(w) < 16) {
      return absl::InvalidArgumentError(str_cat(solution.name, " needs w's row scales and ",
                                                "16-byte aligned x and w"));
    }
    GPU_CHECK(launch_as(shape.out, [&]<typename T>() {
      return smallm_linear_fp8(solution.smallm, solution.splits, static_cast<const T*>(x),
                               static_cast<const uint8_t*>(w), scales.w, /*per_channel=*/true,
                               out, /*out_f32=*/false, shape.m, shape.n, shape.k,
                               static_cast<float*>(workspace_), stream);
    }));
    return absl::OkStatus();
  }
  if (scaled && (scales.x == nullptr || scales.w == nullptr)) {
    return absl::InvalidArgumentError(str_cat(gemm_dtype_name(shape.dtype),
                                              " GEMM run without its x and w scales"));
  }
  if (solution.kind == Solution::Kind::kSmallM && alignment_of(x) >= 16 && alignment_of(w) >= 16) {
    const bool out_f32 = shape.out == GemmDType::kF32;
    float* const partials = static_cast<float*>(workspace_);
    GPU_CHECK(launch_as(shape.dtype, [&]<typename T>() {
      return smallm_linear(solution.smallm, solution.splits, static_cast<const T*>(x),
                           static_cast<const T*>(w), out, out_f32, shape.m, shape.n, shape.k,
                           partials, stream);
    }));
    return absl::OkStatus();
  }
  TESSERA_ASSIGN_OR_RETURN(const Plan* p, plan(shape, x, w, out));
  const void* algo = &p->default_algo;
  if (solution.kind == Solution::Kind::kBlasLt) {
    // Where the operands are less aligned than the tuned algorithm needs, Default runs.
    const uint32_t need = solution.blas.min_alignment;
    if (alignment_of(x) >= need && alignment_of(w) >= need && alignment_of(out) >= need) {
      algo = solution.blas.storage.data();
    }
  }
  return run_blaslt(*p, algo, x, w, out, stream, scaled ? &scales : nullptr);
}

absl::Status Gemm::run_blaslt(const Plan& p, const void* algo, const void* x, const void* w,
                              void* out, gpuStream_t stream, const GemmScales* scales) {
  // The scale pointers are attributes of the (cached) operation, read when the call is enqueued.
  if (scales != nullptr) {
    TESSERA_RETURN_IF_ERROR(p.d.set_scales(scales->x, scales->w));
  }
  const float alpha = 1.0f, beta = 0.0f;
  BLAS_CHECK(blasLtMatmul(static_cast<blasLtHandle_t>(handle_), p.d.op, &alpha, w, p.d.a, x,
                          p.d.b, &beta, out, p.d.d, out, p.d.d,
                          static_cast<const blasLtMatmulAlgo_t*>(algo), workspace_,
                          workspace_bytes_, stream));
  return absl::OkStatus();
}

}  // namespace tessera::gpu
