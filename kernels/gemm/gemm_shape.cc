#include "kernels/gemm/gemm_shape.h"

#include "base/str_cat.h"

namespace tessera::gpu {

GemmSignature signature_of(const GemmShape& shape) {
  return GemmSignature::for_linear(shape.m, shape.n, shape.k, shape.dtype, shape.out,
                                   shape.rowwise);
}

absl::StatusOr<GemmShape> shape_of(const GemmSignature& sig) {
  if (absl::Status s = sig.validate(); !s.ok()) return s;
  GemmShape shape;
  shape.m = sig.n;
  shape.n = sig.m;
  shape.k = sig.k;
  shape.dtype = sig.dtype;
  shape.out = sig.out_dtype;
  shape.rowwise = sig.rowwise;
  if (sig.dtype == GemmDType::kF32 || signature_of(shape) != sig) {
    return absl::InvalidArgumentError(
        str_cat("GPU GEMM: ", sig.key(),
                " is not a linear-layer GEMM (bf16 or fp16 inputs, output of the input type or "
                "fp32; or FP8 inputs, bf16 or fp16 output; transa=T, transb=N, packed leading "
                "dimensions)"));
  }
  return shape;
}

}  // namespace tessera::gpu
