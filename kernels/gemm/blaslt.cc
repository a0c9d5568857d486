#include "kernels/gemm/blaslt.h"

#include "base/status_macros.h"

namespace tessera::gpu {

MatmulDescriptors::~MatmulDescriptors() {
  if (d) blasLtMatrixLayoutDestroy(d);
  if (b) blasLtMatrixLayoutDestroy(b);
  if (a) blasLtMatrixLayoutDestroy(a);
  if (op) blasLtMatmulDescDestroy(op);
}

absl::Status MatmulDescriptors::create(const GemmShape& shape, const void* scale_placeholder) {
  if (!blas_has_type(shape.dtype) || !blas_has_type(shape.out)) {
    return absl::InvalidArgumentError(str_cat(BLAS_LIB " of this build has no ",
                                              gemm_dtype_name(shape.dtype), " -> ",
                                              gemm_dtype_name(shape.out), " GEMM"));
  }
  BLAS_CHECK(blasLtMatmulDescCreate(&op, BLAS_COMPUTE_32F, BLAS_R_32F));
  const blasOperation_t ta = BLAS_OP_T, tb = BLAS_OP_N;
  BLAS_CHECK(blasLtMatmulDescSetAttribute(op, BLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  BLAS_CHECK(blasLtMatmulDescSetAttribute(op, BLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  BLAS_CHECK(blasLtMatrixLayoutCreate(&a, blas_input_type(shape), shape.k, shape.n, shape.k));
  BLAS_CHECK(blasLtMatrixLayoutCreate(&b, blas_input_type(shape), shape.k, shape.m, shape.k));
  BLAS_CHECK(blasLtMatrixLayoutCreate(&d, blas_output_type(shape), shape.n, shape.m, shape.n));
  if (shape.rowwise) {
#if defined(TESSERA_HIP)
    // hipBLASLt names its row-wise scales differently by version; unbuilt here (no ROCm toolchain).
    return absl::UnimplementedError(
        "row-wise FP8 scales are not built for hipBLASLt yet (per-tensor scales are)");
#else
    // A = w: a scale per row of w (per column of the library's A^T: M = n entries); B = x: a
    // scale per token (N = m entries). cuBLASLt calls these outer vectors.
    const cublasLtMatmulMatrixScale_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    BLAS_CHECK(blasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode,
                                            sizeof(mode)));
    BLAS_CHECK(blasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode,
                                            sizeof(mode)));
    const float* placeholder = static_cast<const float*>(scale_placeholder);
    TESSERA_RETURN_IF_ERROR(set_scales(placeholder, placeholder));
#endif
  }
  return absl::OkStatus();
}

absl::Status MatmulDescriptors::set_scales(const float* x_scale, const float* w_scale) const {
  // A = w, B = x (the library's operand order of a linear layer).
  BLAS_CHECK(blasLtMatmulDescSetAttribute(op, BLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale,
                                          sizeof(w_scale)));
  BLAS_CHECK(blasLtMatmulDescSetAttribute(op, BLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scale,
                                          sizeof(x_scale)));
  return absl::OkStatus();
}

std::string blaslt_version(blasLtHandle_t handle) {
#if defined(TESSERA_HIP)
  // Uncompiled here (no hipBLASLt on the build host).
  int version = 0;
  if (hipblasLtGetVersion(handle, &version) != HIPBLAS_STATUS_SUCCESS) return "unknown";
  return std::to_string(version);
#else
  (void)handle;
  return std::to_string(cublasLtGetVersion());
#endif
}

}  // namespace tessera::gpu
