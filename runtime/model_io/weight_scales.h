// The scales of a tensor stored scaled (FP8 checkpoints): value(r, c) = stored(r, c) * scale(r, c),
// with one scale for the whole tensor, one per row (output channel), or one per block of
// block_rows x block_cols elements. A RawTensor carries them, so that every consumer of its bytes
// (read_f32, the GPU's host path, a tensor-parallel WeightSlice) applies the same scales through
// the one conversion, dequantize_scaled_f32_checked (dequant.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

struct WeightScales {
  enum class Kind { kNone, kTensor, kRow, kBlock };
  Kind kind = Kind::kNone;
  // The scales in fp32, converted from the scale tensor and checked (finite, > 0) when the
  // weights were opened: kTensor [1]; kRow [stored rows]; kBlock the grid
  // [ceil(rows / block_rows), grid_cols] row-major. Shared by every copy of the RawTensor.
  std::shared_ptr<const std::vector<float>> values;
  int64_t block_rows = 0;  // kBlock
  int64_t block_cols = 0;  // kBlock
  int64_t grid_cols = 0;   // kBlock: ceil(stored columns / block_cols)
  // Where this tensor's element (0, 0) lies in the stored tensor that `values` describes: (0, 0)
  // for the stored tensor itself, the first row and column of a WeightSlice's rectangle.
  int64_t row0 = 0;
  int64_t col0 = 0;
  std::string name;  // the scale tensor ("model.layers.0.mlp.down_proj.weight_scale"), for messages
  // The linear's static activation scale (`<prefix>.input_scale`), checked finite and > 0; 0 when
  // the checkpoint has none. The dequantized path does not use it: it is for FP8 compute.
  float input_scale = 0.0f;

  bool scaled() const { return kind != Kind::kNone; }

  // The scale of element (row, col) of this tensor (rows and columns of a slice count from the
  // slice's first); 1 when not scaled. A 1-D tensor is a column: element i is (i, 0).
  float at(int64_t row, int64_t col) const {
    switch (kind) {
      case Kind::kNone:
        return 1.0f;
      case Kind::kTensor:
        return (*values)[0];
      case Kind::kRow:
        return (*values)[static_cast<size_t>(row0 + row)];
      case Kind::kBlock:
        return (*values)[static_cast<size_t>((row0 + row) / block_rows * grid_cols +
                                             (col0 + col) / block_cols)];
    }
    return 1.0f;
  }

  // "per-tensor scale 'x.weight_scale'", "per-row scales ...", "128x128-block scales ...".
  std::string describe() const;
};

}  // namespace tessera
