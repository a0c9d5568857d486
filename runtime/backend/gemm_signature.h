// The key of one tuned GEMM: dtypes, transposes, M, N, K and leading dimensions, in PyTorch
// TunableOp's convention (column-major BLAS: C[m, n] = op(A)[m, k] * op(B)[k, n]).
//
// tessera's linear layer is row-major: out[tokens, out_features] = x[tokens, in] @ w[out, in]^T.
// Read column-major, that is the BLAS call transa='T', transb='N', m=out, n=tokens, k=in,
// lda=in, ldb=in, ldc=out -- exactly what PyTorch's F.linear produces, so a tessera results file
// reads like a PyTorch one:
//
//   GemmTunableOp_BFloat16_TN,tn_4096_1_4096_ld_4096_4096_4096,<solution>,0.0123
//
// Op names follow PyTorch ("GemmTunableOp_<type>_<TA><TB>", type BFloat16 / Half / float). A GEMM
// whose output dtype differs from its input dtype (tessera's lm_head: bf16 inputs, fp32 logits)
// has no PyTorch twin; its op name appends "_F32out" ("GemmTunableOp_BFloat16_TN_F32out") so that
// it never shares a result with the same-shape bf16-output GEMM, which runs different kernels.
//
// Scaled FP8 GEMMs (C = (A * a_scale) (B * b_scale), fp32 scales per tensor or per row, bf16 or
// fp16 output)
// are PyTorch's ScaledGemmTunableOp, whose op name spells all three types and whose params add
// the row-wise flag and the bias type:
//
//   ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN,
//       tn_6144_16_4096_ld_4096_4096_6144_rw_0_bias_None,<solution>,0.0123
//
// tessera runs per-tensor scales (rw_0) and row-wise ones (rw_1: a scale per row of A -- per output
// feature of the weights -- and per column of B -- per token), without a bias (bias_None), both
// inputs of one type: e4m3fn (OCP, NVIDIA Hopper and AMD MI350) or e4m3fnuz (AMD MI300), which the
// name tells apart.
#pragma once

#include <compare>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"

namespace tessera {

// Element types a tuned GEMM reads or writes.
enum class GemmDType { kBF16, kF16, kF32, kF8E4M3FN, kF8E4M3FNUZ };

// PyTorch's type name: "BFloat16", "Half", "float", "Float8_e4m3fn", "Float8_e4m3fnuz".
std::string_view gemm_dtype_name(GemmDType t);
// The GEMM dtype of a backend's compute dtype (fp32 -> kF32, bf16 -> kBF16, fp16 -> kF16).
GemmDType gemm_dtype_of(DType compute);
// Whether `t` is an FP8 type (a scaled GEMM's inputs).
inline bool is_fp8(GemmDType t) {
  return t == GemmDType::kF8E4M3FN || t == GemmDType::kF8E4M3FNUZ;
}

struct GemmSignature {
  GemmDType dtype = GemmDType::kBF16;      // A and B
  // C: equal to dtype, or kF32 with 16-bit inputs; kBF16 or kF16 with FP8 inputs.
  GemmDType out_dtype = GemmDType::kBF16;
  bool trans_a = false;
  bool trans_b = false;
  int64_t m = 0;  // rows of op(A) and C
  int64_t n = 0;  // columns of op(B) and C
  int64_t k = 0;  // columns of op(A), rows of op(B)
  int64_t lda = 0;
  int64_t ldb = 0;
  int64_t ldc = 0;
  // FP8 only: row-wise scales (rw_1), a vector per operand, instead of one scale each (rw_0).
  bool rowwise = false;

  // The BLAS call of a row-major linear layer (see the file comment):
  // out[tokens, out_features] = x[tokens, in_features] @ w[out_features, in_features]^T.
  static GemmSignature for_linear(int64_t tokens, int64_t out_features, int64_t in_features,
                                  GemmDType dtype, GemmDType out_dtype, bool rowwise = false);

  // "GemmTunableOp_BFloat16_TN", or "..._TN_F32out" for fp32 output from 16-bit inputs;
  // "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN" for FP8 inputs.
  std::string op_name() const;
  // "tn_{m}_{n}_{k}_ld_{lda}_{ldb}_{ldc}" (PyTorch's format with leading dimensions), followed
  // by "_rw_0_bias_None" for FP8 inputs ("_rw_1_bias_None" row-wise).
  std::string params() const;
  // "op,params": the first two fields of a results-file line; unique per signature.
  std::string key() const;

  // Sizes positive; leading dimensions at least the stored rows (lda >= m, or k when trans_a;
  // ldb >= k, or n when trans_b; ldc >= m); the dtype pair one that has an op name (FP8 only as
  // input, with bf16 or fp16 output; row-wise only with FP8 inputs).
  absl::Status validate() const;

  // Inverse of op_name() / params(). Also reads PyTorch's older params without leading
  // dimensions ("tn_200_100_20"), taking the smallest valid ones. The transposes in `params`
  // must match the op name's. A ScaledGemmTunableOp's params need the leading dimensions, rw_0
  // or rw_1, and bias_None, and its A and B types must be one FP8 type. Errors name the text and what is
  // wrong with it.
  static absl::StatusOr<GemmSignature> parse(std::string_view op, std::string_view params);

  friend bool operator==(const GemmSignature&, const GemmSignature&) = default;
  // Orders by dtypes, transposes, then m, n, k: a linear layer's shapes group together, tokens
  // ascending within them (the order of a results file).
  friend auto operator<=>(const GemmSignature&, const GemmSignature&) = default;
};

// Prints key(), for logs and test failures.
inline std::ostream& operator<<(std::ostream& os, const GemmSignature& s) {
  return os << s.key();
}

}  // namespace tessera
