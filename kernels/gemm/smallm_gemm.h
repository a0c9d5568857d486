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
//
// FP8 weights (W8A16, smallm_linear_fp8): w holds e4m3 codes (kSmallMFp8Encoding) with fp32
// scales, x stays bf16 / fp16 (no activation quantization: more accurate than W8A8, and no
// quantization pass), half the bytes of a 16-bit w to stream. The kernels widen the codes to x's
// type in registers (exactly, by bit placement: fp8_widen.h), accumulate in fp32 and apply the
// scale once per output element, before the split-K partials are stored. Built for the mma
// kernels kMmaRows16 / 32 / 64 and kMmaRows16ThreePerSm (CUDA: each lane's 16 bytes of a row are
// 16 k, four MMAs) and kFma (both vendors); not kLineRows16.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/fp8.h"
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
// fp32 elements of `workspace` that `splits` needs (0 for one split), FP8 weights' included.
size_t smallm_workspace_floats(int64_t m, int64_t n, int splits);

// out: [m, n] row-major, fp32 when out_f32 else T. Returns gpuErrorInvalidValue for an
// unsupported shape, kernel or split count, else the launch's error. Built for T = gpu_bf16 and
// gpu_f16 (gpu.h's element types).
template <typename T>
gpuError_t smallm_linear(SmallMKernel kernel, int splits, const T* x, const T* w, void* out,
                         bool out_f32, int64_t m, int64_t n, int64_t k, float* workspace,
                         gpuStream_t stream);

// The FP8 weights' encoding: OCP e4m3fn on CUDA, e4m3fnuz (MI300's: bias 8, 0x80 the only NaN)
// on ROCm. NaN codes are not checked for (they compute as finite values, fp8_widen.h).
#if defined(TESSERA_HIP)
inline constexpr Fp8Encoding kSmallMFp8Encoding = Fp8Encoding::kE4M3FNUZ;
#else
inline constexpr Fp8Encoding kSmallMFp8Encoding = Fp8Encoding::kE4M3FN;
#endif

// Whether smallm_linear_fp8 runs `kernel` in this build (see the top of this file).
bool smallm_fp8_kernel_available(SmallMKernel kernel);
// As smallm_shape_supported, with k a multiple of 16 (16-byte vectors of codes). The caller also
// needs x and w 16-byte aligned.
bool smallm_fp8_shape_supported(int64_t m, int64_t n, int64_t k);

// out[m, n] = x[m, k] @ (w[n, k] * scale)^T, with w's codes row-major and scale = w_scale[row]
// when w_scale_per_channel, else w_scale[0] (w_scale: device memory, n or 1 floats). Otherwise
// as smallm_linear (out, workspace, errors, T).
template <typename T>
gpuError_t smallm_linear_fp8(SmallMKernel kernel, int splits, const T* x, const uint8_t* w,
                             const float* w_scale, bool w_scale_per_channel, void* out,
                             bool out_f32, int64_t m, int64_t n, int64_t k, float* workspace,
                             gpuStream_t stream);

}  // namespace tessera::gpu
