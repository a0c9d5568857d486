// tessera's own GEMM kernels for decode-sized batches: out[m, n] = x[m, k] @ w[n, k]^T with
// m (tokens) <= kSmallMMaxTokens, bf16 or fp16 inputs, fp32 accumulation, output of the input
// type or fp32. At such m the GEMM is a weight stream: every byte of w is read once, so the
// kernels aim at memory bandwidth (16-byte loads, many in flight) rather than at the matrix
// units' rate.
//
//   kMmaRows16 / 32 / 64  (CUDA) each warp streams 16, 32 or 64 rows of w straight from global
//            memory into mma.sync m16n8k16 fragments (rows of w as the 16-row side, tokens as
//            n8); the warps of a CTA split the CTA's k range and sum through shared memory.
//   kMmaRows16ThreePerSm (CUDA) the 16-row mma kernel with half the chunks in flight per warp,
//            so that three CTAs fit on an SM instead of two: one wave where the two-CTA grid needs
//            one and a half (qkv: 384 CTAs on an H100's 132 SMs), at less memory in flight per CTA.
//   kLineRows16 (CUDA) the 16-row mma kernel with whole-line loads (each warp instruction 256
//            contiguous bytes of 2 rows instead of 64 bytes of 8), the fragments put together by
//            lane shuffles: faster where rows are long or there are many of them (gate_up, down,
//            lm_head), slower on qkv and o (see smallm_gemm.cu).
//   kFma     (both vendors) each warp computes two rows of w for every token with fp32 FMAs
//            and a butterfly sum: the portable fallback, and a candidate of its own.
//
// `splits` > 1 also splits k across CTAs (more CTAs for small n); the splits' fp32 partials go
// to `workspace` and a second kernel sums them into out.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/gpu.h"

namespace tessera::gpu {

inline constexpr int64_t kSmallMMaxTokens = 16;

enum class SmallMKernel {
  kMmaRows16,
  kMmaRows32,
  kMmaRows64,
  kFma,
  kLineRows16,
  kMmaRows16ThreePerSm,
};

// Whether `kernel` is built for this vendor (the mma and line kernels are CUDA PTX).
bool smallm_kernel_available(SmallMKernel kernel);
// 1 <= m <= kSmallMMaxTokens, n >= 1, k a positive multiple of 8 (rows of 16-byte vectors). The
// caller also needs x and w 16-byte aligned.
bool smallm_shape_supported(int64_t m, int64_t n, int64_t k);
// fp32 elements of `workspace` that `splits` needs (0 for one split).
size_t smallm_workspace_floats(int64_t m, int64_t n, int splits);

// out: [m, n] row-major, fp32 when out_f32 else T. Returns gpuErrorInvalidValue for an
// unsupported shape, kernel or split count, else the launch's error. Built for T = gpu_bf16 and
// gpu_f16 (gpu.h's element types).
template <typename T>
gpuError_t smallm_linear(SmallMKernel kernel, int splits, const T* x, const T* w, void* out,
                         bool out_f32, int64_t m, int64_t n, int64_t k, float* workspace,
                         gpuStream_t stream);

}  // namespace tessera::gpu
