#include "kernels/gemm/gemm_shape.h"

#include "runtime/str_cat.h"

namespace tessera::gpu {

GemmSignature signature_of(const GemmShape& shape) {
  return GemmSignature::for_linear(shape.m, shape.n, shape.k, GemmDType::kBF16,
                                   shape.out == GemmOut::kF32 ? GemmDType::kF32 : GemmDType::kBF16);
}

absl::StatusOr<GemmShape> shape_of(const GemmSignature& sig) {
  if (absl::Status s = sig.validate(); !s.ok()) return s;
  GemmShape shape;
  shape.m = sig.n;
  shape.n = sig.m;
  shape.k = sig.k;
  shape.out = sig.out_dtype == GemmDType::kF32 ? GemmOut::kF32 : GemmOut::kBF16;
  if (sig.dtype != GemmDType::kBF16 || sig.out_dtype == GemmDType::kF16 ||
      signature_of(shape) != sig) {
    return absl::InvalidArgumentError(
        str_cat("GPU GEMM: ", sig.key(),
                " is not a linear-layer GEMM (bf16 inputs, bf16 or fp32 output, transa=T, "
                "transb=N, packed leading dimensions)"));
  }
  return shape;
}

}  // namespace tessera::gpu
