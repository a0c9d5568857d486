// Conversion of stored weight blocks (GGML block-quantized, or plain f32/f16/bf16) to the GPU's
// element type T (gpu_bf16 or gpu_f16) on the GPU, so that a weight crosses the bus in its stored
// size and the host does no per-element work. Each type's arithmetic repeats
// runtime/model/dequant.cc operation for operation, without fused multiply-adds, so that the
// results equal dequantize_f32's fp32 values rounded to T (round to nearest even) bit for bit: a
// bf16 checkpoint served in fp16 is converted here too. Kernels in dequant.cu.
#pragma once

#include <cstdint>

#include "kernels/gpu.h"
#include "base/dtype.h"

namespace tessera::gpu {

// Whether dequantize converts `type`: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and
// Q2_K..Q8_K (every dequantizable dtype but F64 and the integer types).
bool dequantizes_on_device(DType type);

// Where a tensor's converted elements go: a dense row-major [rows, row_elems] matrix of T at
// `dst`. Stored row s lands in row s, or, when qk_head_dim > 0, in row
// qk_unpermuted_row(s, qk_head_dim) (runtime/model_io/gguf_weights.h: GGUF's llama q/k rotary
// interleave undone).
// The weight check: when `first_non_finite` is set, every element whose converted value (in T)
// is NaN or infinite lowers it (atomicMin) to its index counted over the whole tensor's stored
// elements, row-major over the stored rows (runtime/model_io/weight_source.h's
// non_finite_weight_error counts the same way). The caller sets it to ~0 before a tensor's first
// chunk and reads it once after the last.
template <typename T>
struct DequantTarget {
  T* dst = nullptr;
  int64_t row_elems = 0;    // a multiple of the type's block size
  int64_t qk_head_dim = 0;  // even, dividing the row count; 0: rows stay where they are
  unsigned long long* first_non_finite = nullptr;  // device memory; null: no check
};

// Converts `n_blocks` consecutive stored blocks of `type` at `src` (device memory, packed as in
// the file, any alignment) into `target`. The first of them is block `first_block` of the whole
// tensor, counting row-major over the stored rows, so that a tensor can be converted in chunks of
// whole blocks that need not be whole rows. gpuErrorInvalidValue for a type that
// dequantizes_on_device() rejects. T is gpu_bf16 or gpu_f16.
template <typename T>
gpuError_t dequantize(DType type, const uint8_t* src, int64_t first_block, int64_t n_blocks,
                      const DequantTarget<T>& target, gpuStream_t stream);

}  // namespace tessera::gpu
