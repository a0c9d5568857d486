#include "kernels/gemm/gpu_gemm.h"

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
#define BLAS_LIB "cuBLASLt"
#endif

namespace tessera::gpu {

namespace {

constexpr size_t kWorkspaceBytes = 32u << 20;

#define BLAS_CHECK(expr)                                                                     \
  do {                                                                                       \
    const blasStatus_t st_ = (expr);                                                         \
    if (st_ != BLAS_STATUS_SUCCESS) {                                                        \
      return absl::InternalError(tessera::str_cat(__FILE__, ":", __LINE__, ": " BLAS_LIB " ", \
                                                  #expr, " failed with status ",             \
                                                  static_cast<int>(st_)));                   \
    }                                                                                        \
  } while (0)

// Destroys the descriptors of one call however it ends.
struct Descriptors {
  blasLtMatmulDesc_t op = nullptr;
  blasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  blasLtMatmulPreference_t pref = nullptr;
  ~Descriptors() {
    if (pref) blasLtMatmulPreferenceDestroy(pref);
    if (d) blasLtMatrixLayoutDestroy(d);
    if (b) blasLtMatrixLayoutDestroy(b);
    if (a) blasLtMatrixLayoutDestroy(a);
    if (op) blasLtMatmulDescDestroy(op);
  }
};

}  // namespace

absl::Status Gemm::create(std::unique_ptr<Gemm>* out) {
  std::unique_ptr<Gemm> g(new Gemm());
  blasLtHandle_t handle = nullptr;
  BLAS_CHECK(blasLtCreate(&handle));
  g->handle_ = handle;
  GPU_CHECK(gpuMalloc(&g->workspace_, kWorkspaceBytes));
  g->workspace_bytes_ = kWorkspaceBytes;
  *out = std::move(g);
  return absl::OkStatus();
}

Gemm::~Gemm() {
  if (workspace_ != nullptr) gpuFree(workspace_);
  if (handle_ != nullptr) blasLtDestroy(static_cast<blasLtHandle_t>(handle_));
}

absl::Status Gemm::linear(const gpu_bf16* x, const gpu_bf16* w, void* out, OutType out_type,
                          int64_t m, int64_t n, int64_t k, gpuStream_t stream) {
  if (m <= 0 || n <= 0 || k <= 0) return absl::OkStatus();
  // Row-major out[m, n] = x[m, k] w[n, k]^T is column-major out^T[n, m] = w^T x^T, with w read
  // as a column-major k x n matrix (transposed) and x as a column-major k x m matrix.
  Descriptors d;
  BLAS_CHECK(blasLtMatmulDescCreate(&d.op, BLAS_COMPUTE_32F, BLAS_R_32F));
  const blasOperation_t ta = BLAS_OP_T, tb = BLAS_OP_N;
  BLAS_CHECK(blasLtMatmulDescSetAttribute(d.op, BLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  BLAS_CHECK(blasLtMatmulDescSetAttribute(d.op, BLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  BLAS_CHECK(blasLtMatrixLayoutCreate(&d.a, BLAS_R_16BF, k, n, k));
  BLAS_CHECK(blasLtMatrixLayoutCreate(&d.b, BLAS_R_16BF, k, m, k));
  BLAS_CHECK(blasLtMatrixLayoutCreate(&d.d, out_type == OutType::kF32 ? BLAS_R_32F : BLAS_R_16BF,
                                      n, m, n));
  BLAS_CHECK(blasLtMatmulPreferenceCreate(&d.pref));
  const size_t ws = workspace_bytes_;
  BLAS_CHECK(blasLtMatmulPreferenceSetAttribute(d.pref, BLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &ws, sizeof(ws)));
#if !defined(TESSERA_HIP)
  // The heuristic assumes 256-byte aligned operands unless told otherwise; row views of a
  // tensor can be less aligned.
  auto alignment = [](const void* p) {
    uint32_t a = 256;
    while (a > 2 && reinterpret_cast<uintptr_t>(p) % a != 0) a /= 2;
    return a;
  };
  const uint32_t align_a = alignment(w), align_b = alignment(x), align_d = alignment(out);
  BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
  BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
  BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d)));
  BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d)));
#endif
  blasLtMatmulHeuristicResult_t result{};
  int found = 0;
  auto* handle = static_cast<blasLtHandle_t>(handle_);
  BLAS_CHECK(blasLtMatmulAlgoGetHeuristic(handle, d.op, d.a, d.b, d.d, d.d, d.pref, 1, &result,
                                          &found));
  if (found == 0) {
    return absl::InternalError(tessera::str_cat(BLAS_LIB " has no algorithm for bf16 GEMM m=", m,
                                                " n=", n, " k=", k));
  }
  const float alpha = 1.0f, beta = 0.0f;
  BLAS_CHECK(blasLtMatmul(handle, d.op, &alpha, w, d.a, x, d.b, &beta, out, d.d, out, d.d,
                          &result.algo, workspace_, workspace_bytes_, stream));
  return absl::OkStatus();
}

}  // namespace tessera::gpu
