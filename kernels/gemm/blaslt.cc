#include "kernels/gemm/blaslt.h"

namespace tessera::gpu {

MatmulDescriptors::~MatmulDescriptors() {
  if (d) blasLtMatrixLayoutDestroy(d);
  if (b) blasLtMatrixLayoutDestroy(b);
  if (a) blasLtMatrixLayoutDestroy(a);
  if (op) blasLtMatmulDescDestroy(op);
}

absl::Status MatmulDescriptors::create(const GemmShape& shape) {
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
