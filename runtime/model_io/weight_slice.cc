#include "runtime/model_io/weight_slice.h"

#include <cstring>

#include "base/str_cat.h"
#include "runtime/model_io/dequant.h"
#include "runtime/model_io/gguf_weights.h"
#include "runtime/model_io/tensor_checks.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<WeightSlice>> WeightSlice::create(const WeightSource& base,
                                                                 std::string_view name,
                                                                 IndexRange rows, IndexRange cols) {
  absl::StatusOr<RawTensor> stored = base.raw(name);
  if (!stored.ok()) return stored.status();
  const std::vector<int64_t>& shape = stored->info.shape;
  const bool matrix = shape.size() == 2;
  const std::string range =
      matrix ? str_cat("rows [", rows.begin, ", ", rows.end(), ") and columns [", cols.begin, ", ",
                       cols.end(), ")")
             : str_cat("elements [", rows.begin, ", ", rows.end(), ")");
  const std::string where = str_cat(base.path(), ": ", range, " of tensor '", name, "' ",
                                    shape_string(shape));
  auto refuse = [&](std::string_view why) {
    return absl::InvalidArgumentError(str_cat(where, ": ", why));
  };
  if (shape.empty() || shape.size() > 2) return refuse("only vectors and matrices are sliced");
  const int64_t n_rows = shape[0];
  const int64_t n_cols = matrix ? shape[1] : 1;
  if (!matrix && (cols.begin != 0 || cols.count != 0)) return refuse("a vector has no columns");
  if (!matrix) cols = IndexRange{0, 1};
  if (rows.begin < 0 || rows.count <= 0 || rows.end() > n_rows || cols.begin < 0 ||
      cols.count <= 0 || cols.end() > n_cols) {
    return refuse("the range is empty or outside the tensor");
  }
  const DTypeTraits* traits = dtype_traits(static_cast<uint32_t>(stored->info.dtype));
  if (traits == nullptr) return refuse("unknown stored type");
  const int64_t block = static_cast<int64_t>(traits->block_elems);
  const int64_t row_elems = matrix ? n_cols : n_rows;  // a vector is one row of blocks
  if (!matrix) {
    if (rows.begin % block != 0 || rows.count % block != 0) {
      return refuse(str_cat(dtype_name(stored->info.dtype), " stores blocks of ", block,
                            " elements; a slice must hold whole blocks"));
    }
  } else if (cols.begin % block != 0 || cols.count % block != 0) {
    return refuse(str_cat(dtype_name(stored->info.dtype), " stores blocks of ", block,
                          " elements along a row; a column range must hold whole blocks"));
  }
  if (stored->qk_permuted &&
      (rows.begin % stored->qk_head_dim != 0 || rows.count % stored->qk_head_dim != 0)) {
    return refuse(str_cat("its rows are interleaved per head of ", stored->qk_head_dim,
                          " rows (GGUF q/k); a slice must hold whole heads"));
  }
  const size_t block_bytes = traits->block_bytes;
  std::unique_ptr<WeightSlice> slice(new WeightSlice(base, where));
  RawTensor& raw = slice->raw_;
  raw = *stored;
  // Scales (FP8) stay those of the stored tensor, seen from the slice's first row and column:
  // per-row scales follow their rows, a block grid is indexed from the slice's offset, so a
  // range need not hold whole blocks.
  raw.scales.row0 += rows.begin;
  if (matrix) raw.scales.col0 += cols.begin;
  if (!matrix) {
    raw.info.shape = {rows.count};
    raw.data = stored->data + rows.begin / block * block_bytes;
    raw.nbytes = static_cast<size_t>(rows.count / block) * block_bytes;
    return slice;
  }
  raw.info.shape = {rows.count, cols.count};
  const size_t stored_row_bytes = static_cast<size_t>(row_elems / block) * block_bytes;
  const size_t slice_row_bytes = static_cast<size_t>(cols.count / block) * block_bytes;
  const uint8_t* first = stored->data + static_cast<size_t>(rows.begin) * stored_row_bytes;
  raw.nbytes = slice_row_bytes * static_cast<size_t>(rows.count);
  if (cols.count == n_cols) {
    raw.data = first;  // whole rows: a view
    return slice;
  }
  slice->gathered_.resize(raw.nbytes);
  const size_t col_offset = static_cast<size_t>(cols.begin / block) * block_bytes;
  for (int64_t r = 0; r < rows.count; ++r) {
    std::memcpy(slice->gathered_.data() + static_cast<size_t>(r) * slice_row_bytes,
                first + static_cast<size_t>(r) * stored_row_bytes + col_offset, slice_row_bytes);
  }
  raw.data = slice->gathered_.data();
  return slice;
}

absl::StatusOr<RawTensor> WeightSlice::raw(std::string_view hf_name) const {
  if (!has(hf_name)) {
    return absl::NotFoundError(str_cat(where_, ": asked for tensor '", hf_name, "' instead"));
  }
  return raw_;
}

absl::Status WeightSlice::read_f32(std::string_view hf_name,
                                   std::span<const int64_t> expected_shape,
                                   std::span<float> out) const {
  if (!has(hf_name)) {
    return absl::NotFoundError(str_cat(where_, ": asked for tensor '", hf_name, "' instead"));
  }
  if (absl::Status st = check_read_f32_request(where_, raw_.info.shape, expected_shape, out.size());
      !st.ok()) {
    return st;
  }
  const std::span<const uint8_t> bytes(raw_.data, raw_.nbytes);
  auto check = [&](const absl::StatusOr<int64_t>& bad, int64_t first) -> absl::Status {
    if (!bad.ok()) return absl::Status(bad.status().code(), str_cat(where_, ": ", bad.status().message()));
    if (*bad < 0) return absl::OkStatus();
    return non_finite_weight_error(where_, raw_, first + *bad, DType::kF32);
  };
  if (!raw_.qk_permuted) {
    const int64_t row_elems =
        raw_.info.shape.size() == 2 ? raw_.info.shape[1] : static_cast<int64_t>(out.size());
    return check(dequantize_scaled_f32_checked(raw_.info.dtype, bytes, raw_.scales, row_elems, 0, out),
                 0);
  }
  // Whole heads of GGUF's interleaved q/k rows: each stored row goes to the HF row it holds.
  const int64_t rows = raw_.info.shape[0];
  const size_t row_elems = out.size() / static_cast<size_t>(rows);
  const size_t row_bytes = bytes.size() / static_cast<size_t>(rows);
  for (int64_t s = 0; s < rows; ++s) {
    const int64_t dst = qk_unpermuted_row(s, raw_.qk_head_dim);
    absl::Status st = check(dequantize_f32_checked(raw_.info.dtype, bytes.subspan(s * row_bytes, row_bytes),
                                                   out.subspan(dst * row_elems, row_elems)),
                            s * static_cast<int64_t>(row_elems));
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace tessera
