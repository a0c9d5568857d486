// The BLAS library of the build, cuBLASLt (CUDA) or hipBLASLt (ROCm), under neutral names, and
// the descriptors of one linear-layer GEMM. Host code only; included by kernels/gemm/*.cc.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "kernels/gemm/gemm_shape.h"
#include "kernels/gpu.h"
#include "base/str_cat.h"

#if defined(TESSERA_HIP)
// hipBLASLt mirrors cuBLASLt name for name (unverified here: no ROCm toolchain on the build host).
#include <hipblaslt/hipblaslt.h>
using blasLtHandle_t = hipblasLtHandle_t;
using blasLtMatmulDesc_t = hipblasLtMatmulDesc_t;
using blasLtMatrixLayout_t = hipblasLtMatrixLayout_t;
using blasLtMatmulPreference_t = hipblasLtMatmulPreference_t;
using blasLtMatmulHeuristicResult_t = hipblasLtMatmulHeuristicResult_t;
using blasStatus_t = hipblasStatus_t;
using blasOperation_t = hipblasOperation_t;
#define BLAS_STATUS_SUCCESS HIPBLAS_STATUS_SUCCESS
#define BLAS_OP_N HIPBLAS_OP_N
#define BLAS_OP_T HIPBLAS_OP_T
#define BLAS_COMPUTE_32F HIPBLAS_COMPUTE_32F
#define BLAS_R_32F HIP_R_32F
#define BLAS_R_16BF HIP_R_16BF
#define BLAS_R_16F HIP_R_16F
// FP8: MI300's e4m3fnuz; the OCP e4m3fn of MI350 where the headers have it (ROCm 6.3+).
#define BLAS_R_8F_E4M3_FNUZ HIP_R_8F_E4M3_FNUZ
#if defined(HIP_R_8F_E4M3) || (HIP_VERSION >= 60300000)
#define BLAS_R_8F_E4M3 HIP_R_8F_E4M3
#endif
#define BLASLT_MATMUL_DESC_A_SCALE_POINTER HIPBLASLT_MATMUL_DESC_A_SCALE_POINTER
#define BLASLT_MATMUL_DESC_B_SCALE_POINTER HIPBLASLT_MATMUL_DESC_B_SCALE_POINTER
#define BLASLT_MATMUL_DESC_TRANSA HIPBLASLT_MATMUL_DESC_TRANSA
#define BLASLT_MATMUL_DESC_TRANSB HIPBLASLT_MATMUL_DESC_TRANSB
#define BLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
#define blasLtCreate hipblasLtCreate
#define blasLtDestroy hipblasLtDestroy
#define blasLtMatmulDescCreate hipblasLtMatmulDescCreate
#define blasLtMatmulDescDestroy hipblasLtMatmulDescDestroy
#define blasLtMatmulDescSetAttribute hipblasLtMatmulDescSetAttribute
#define blasLtMatrixLayoutCreate hipblasLtMatrixLayoutCreate
#define blasLtMatrixLayoutDestroy hipblasLtMatrixLayoutDestroy
#define blasLtMatmulPreferenceCreate hipblasLtMatmulPreferenceCreate
#define blasLtMatmulPreferenceDestroy hipblasLtMatmulPreferenceDestroy
#define blasLtMatmulPreferenceSetAttribute hipblasLtMatmulPreferenceSetAttribute
#define blasLtMatmulAlgoGetHeuristic hipblasLtMatmulAlgoGetHeuristic
#define blasLtMatmul hipblasLtMatmul
using blasLtMatmulAlgo_t = hipblasLtMatmulAlgo_t;
#define BLAS_LIB "hipBLASLt"
#else
#include <cublasLt.h>
using blasLtHandle_t = cublasLtHandle_t;
using blasLtMatmulDesc_t = cublasLtMatmulDesc_t;
using blasLtMatrixLayout_t = cublasLtMatrixLayout_t;
using blasLtMatmulPreference_t = cublasLtMatmulPreference_t;
using blasLtMatmulHeuristicResult_t = cublasLtMatmulHeuristicResult_t;
using blasStatus_t = cublasStatus_t;
using blasOperation_t = cublasOperation_t;
#define BLAS_STATUS_SUCCESS CUBLAS_STATUS_SUCCESS
#define BLAS_OP_N CUBLAS_OP_N
#define BLAS_OP_T CUBLAS_OP_T
#define BLAS_COMPUTE_32F CUBLAS_COMPUTE_32F
#define BLAS_R_32F CUDA_R_32F
#define BLAS_R_16BF CUDA_R_16BF
#define BLAS_R_16F CUDA_R_16F
#define BLAS_R_8F_E4M3 CUDA_R_8F_E4M3  // OCP e4m3fn; CUDA has no e4m3fnuz
#define BLASLT_MATMUL_DESC_A_SCALE_POINTER CUBLASLT_MATMUL_DESC_A_SCALE_POINTER
#define BLASLT_MATMUL_DESC_B_SCALE_POINTER CUBLASLT_MATMUL_DESC_B_SCALE_POINTER
#define BLASLT_MATMUL_DESC_TRANSA CUBLASLT_MATMUL_DESC_TRANSA
#define BLASLT_MATMUL_DESC_TRANSB CUBLASLT_MATMUL_DESC_TRANSB
#define BLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
#define blasLtCreate cublasLtCreate
#define blasLtDestroy cublasLtDestroy
#define blasLtMatmulDescCreate cublasLtMatmulDescCreate
#define blasLtMatmulDescDestroy cublasLtMatmulDescDestroy
#define blasLtMatmulDescSetAttribute cublasLtMatmulDescSetAttribute
#define blasLtMatrixLayoutCreate cublasLtMatrixLayoutCreate
#define blasLtMatrixLayoutDestroy cublasLtMatrixLayoutDestroy
#define blasLtMatmulPreferenceCreate cublasLtMatmulPreferenceCreate
#define blasLtMatmulPreferenceDestroy cublasLtMatmulPreferenceDestroy
#define blasLtMatmulPreferenceSetAttribute cublasLtMatmulPreferenceSetAttribute
#define blasLtMatmulAlgoGetHeuristic cublasLtMatmulAlgoGetHeuristic
#define blasLtMatmul cublasLtMatmul
using blasLtMatmulAlgo_t = cublasLtMatmulAlgo_t;
#define BLAS_LIB "cuBLASLt"
#endif

// Evaluates a BLAS call; on failure returns an Internal status naming the call and the code.
#define BLAS_CHECK(expr)                                                                     \
  do {                                                                                       \
    const blasStatus_t st_ = (expr);                                                         \
    if (st_ != BLAS_STATUS_SUCCESS) {                                                        \
      return absl::InternalError(tessera::str_cat(__FILE__, ":", __LINE__, ": " BLAS_LIB " ", \
                                                  #expr, " failed with status ",             \
                                                  static_cast<int>(st_)));                   \
    }                                                                                        \
  } while (0)

namespace tessera::gpu {

// Whether the build's library has the element type `t` (FP8: e4m3fn on CUDA, e4m3fnuz on ROCm
// and e4m3fn where its headers have it).
inline bool blas_has_type(GemmDType t) {
  switch (t) {
    case GemmDType::kF8E4M3FN:
#if defined(BLAS_R_8F_E4M3)
      return true;
#else
      return false;
#endif
    case GemmDType::kF8E4M3FNUZ:
#if defined(BLAS_R_8F_E4M3_FNUZ)
      return true;
#else
      return false;
#endif
    default:
      return true;
  }
}

// The library's element type of `t` (one blas_has_type() accepts).
inline auto blas_type(GemmDType t) {
  switch (t) {
    case GemmDType::kF16:
      return BLAS_R_16F;
    case GemmDType::kF32:
      return BLAS_R_32F;
#if defined(BLAS_R_8F_E4M3)
    case GemmDType::kF8E4M3FN:
      return BLAS_R_8F_E4M3;
#endif
#if defined(BLAS_R_8F_E4M3_FNUZ)
    case GemmDType::kF8E4M3FNUZ:
      return BLAS_R_8F_E4M3_FNUZ;
#endif
    default:
      return BLAS_R_16BF;
  }
}

// The library's element types of a shape: its inputs (A = w, B = x) and its output (C and D).
inline auto blas_input_type(const GemmShape& shape) { return blas_type(shape.dtype); }
inline auto blas_output_type(const GemmShape& shape) { return blas_type(shape.out); }

// The operation and matrix layouts of one linear-layer GEMM, destroyed however a call ends.
// Column-major, as the library reads it: out^T[n, m] = w^T x^T, A = w (k x n, transposed),
// B = x (k x m), D = out (n x m).
struct MatmulDescriptors {
  blasLtMatmulDesc_t op = nullptr;
  blasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;

  MatmulDescriptors() = default;
  MatmulDescriptors(const MatmulDescriptors&) = delete;
  MatmulDescriptors& operator=(const MatmulDescriptors&) = delete;
  ~MatmulDescriptors();
  // InvalidArgument when the library of the build has no such type (FP8: see blas_has_type).
  // A row-wise FP8 shape sets outer-vector scale modes (Unimplemented on hipBLASLt for now) and
  // `scale_placeholder` (any device address) as both scale pointers: cuBLASLt's heuristic and
  // algorithm check refuse outer-vector scales (INVALID_VALUE) until the pointers are set
  // (cuBLASLt 13.1, H100, 2026-11-28); each call sets its own with set_scales().
  absl::Status create(const GemmShape& shape, const void* scale_placeholder);
  // A scaled (FP8) GEMM's fp32 scales, device pointers (one each, or vectors when row-wise):
  // out = (w * w_scale) and (x * x_scale) multiplied. Sets the operation's attributes: host memory only, no device work,
  // read when a call is enqueued (const: the handles stay what they are).
  absl::Status set_scales(const float* x_scale, const float* w_scale) const;
};

// The library's version, for the tuning results file's validators.
std::string blaslt_version(blasLtHandle_t handle);

}  // namespace tessera::gpu
