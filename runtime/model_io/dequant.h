// Conversion of stored tensor elements (plain, FP8, GGML block-quantized) to fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/dtype.h"
#include "runtime/model_io/weight_scales.h"

namespace tessera {

// Bytes that `n_elements` of `type` occupy. Errors: unknown type, negative count, count not a
// multiple of the type's block size, or overflow.
absl::StatusOr<size_t> dtype_nbytes(DType type, int64_t n_elements);

// Converts `out.size()` elements stored as `type` in `src` to fp32.
// `src` must hold exactly dtype_nbytes(type, out.size()) bytes (it may be unaligned); errors name
// the type and the sizes, or say that the type is not dequantizable by this build (see
// DTypeTraits::dequantizable). Blocks are independent, so a row of a quantized matrix (whose length
// is a multiple of the block size) can be converted on its own.
absl::Status dequantize_f32(DType type, std::span<const uint8_t> src, std::span<float> out);

// dequantize_f32 that also finds the first element of `out` that is NaN or infinite: each block
// (or run of plain elements) is checked as it is written, while it is in cache, so the check
// costs no second pass over the tensor. Returns that element's index in `out` (conversion stops
// there: the rest of `out` is unspecified), or -1 when every element is finite; errors as
// dequantize_f32's.
absl::StatusOr<int64_t> dequantize_f32_checked(DType type, std::span<const uint8_t> src,
                                               std::span<float> out);

// The one conversion of stored bytes with their scales (FP8 checkpoints), which read_f32, the
// GPU's host path (through read_f32) and WeightSlice all use: dequantize_f32_checked, then each
// element times its scale, scales.at(row, col), for a tensor of rows of `row_elems` elements
// whose first row here is row `first_row` of the tensor `scales` describe (so that a tensor can
// be converted in pieces of whole rows). The non-finite check sees the scaled values. Without
// scales it is dequantize_f32_checked. `src` holds out.size() elements; out.size() must be a
// multiple of row_elems.
absl::StatusOr<int64_t> dequantize_scaled_f32_checked(DType type, std::span<const uint8_t> src,
                                                      const WeightScales& scales,
                                                      int64_t row_elems, int64_t first_row,
                                                      std::span<float> out);

}  // namespace tessera
