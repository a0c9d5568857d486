// The tensor-core building blocks of the CUDA attention and small-M GEMM kernels: 16-byte
// cp.async copies into shared memory, the swizzled tile layout they fill, ldmatrix fragment loads,
// the bf16 and fp16 m16n8k16 MMAs (sm_80 and newer, sm_90a included), and a load that skips L1.
// PTX, so CUDA only: on ROCm the same roles belong to MFMA, which is not written yet (the kernels
// say what HIP builds run).
#pragma once

#include <type_traits>

#include "kernels/gpu.h"

#if defined(TESSERA_CUDA) && defined(__CUDACC__)

namespace tessera::gpu::sm80 {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; `bytes` < 16 zero-fills the rest (0 = all zeros, src not read).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)),
               "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N committed groups of this thread's copies are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait_pending() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { cp_async_wait_pending<0>(); }

// Element offset of 16-byte chunk c of row r in a tile of D-element rows; the XOR swizzle puts
// the 8 rows an ldmatrix reads at one logical chunk into 8 different bank groups.
template <int D>
__device__ __forceinline__ int swz(int r, int c) {
  return r * D + ((c ^ (r & 7)) << 3);
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}
// The same, each matrix transposed.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(smem)));
}

// Asks L2 for the 128-byte line holding `p`, without waiting for it: the small-M kernels fetch
// their first weights this way while they wait for the previous kernel (kernels/launch.h).
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// 16 bytes at `p` read through the non-coherent path without allocating in L1: data read once,
// which should not evict what is re-read. The pointer keeps its element type: taking const void*
// reordered the small-M kernels' address arithmetic in nvcc 13.0's PTX.
template <typename T>
__device__ __forceinline__ uint4 load_once(const T* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// An asm statement whose PTX names the two 16-bit input types of element type T: BEFORE, then
// "bf16.bf16" or "f16.f16", then AFTER, then the operand lists. PTX names the A/B type in the
// instruction, not in an operand, so one text serves both types (mma.sync here, wgmma in
// attention_prefill.cu).
#define TESSERA_TYPED_MMA_ASM(T, BEFORE, AFTER, ...)       \
  if constexpr (std::is_same_v<T, gpu_f16>) {              \
    asm volatile(BEFORE "f16.f16" AFTER __VA_ARGS__);      \
  } else {                                                 \
    asm volatile(BEFORE "bf16.bf16" AFTER __VA_ARGS__);    \
  }

// c[16x8] += a[16x16] b[16x8] with inputs of element type T (gpu_bf16 or gpu_f16), fp32
// accumulators (PTX fragment layouts).
template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
  TESSERA_TYPED_MMA_ASM(T, "mma.sync.aligned.m16n8k16.row.col.f32.",
      ".f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n",
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

}  // namespace tessera::gpu::sm80

#endif
