#include "runtime/model/weight_loader.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tessera {

std::string layer_weight_name(int64_t layer, std::string_view suffix) {
  return absl::StrCat("model.layers.", layer, ".", std::string(suffix));
}

absl::StatusOr<Tensor> WeightLoader::load(Backend& backend,
                                          std::initializer_list<std::string_view> names,
                                          std::initializer_list<int64_t> dims) {
  std::vector<WeightPart> parts;
  for (std::string_view name : names) parts.push_back(WeightPart{std::string(name), {}, {}});
  return load_parts(backend, parts, dims, /*zero_rest=*/false);
}

absl::StatusOr<Tensor> WeightLoader::load_parts(Backend& backend,
                                                std::initializer_list<WeightPart> parts,
                                                std::initializer_list<int64_t> dims,
                                                bool zero_rest) {
  return load_parts(backend, std::span<const WeightPart>(parts.begin(), parts.size()), dims,
                    zero_rest);
}

absl::StatusOr<Tensor> WeightLoader::load_parts(Backend& backend,
                                                std::span<const WeightPart> parts,
                                                std::initializer_list<int64_t> dims,
                                                bool zero_rest) {
  TESSERA_ASSIGN_OR_RETURN(Tensor t, arena_.allocate(backend, backend.compute_dtype(), dims));
  const bool matrix = t.rank == 2;
  int64_t row = 0;
  for (const WeightPart& part : parts) {
    if (part.whole()) {
      // The stored tensor as it is: its own rows.
      auto raw = weights_.raw(part.name);
      if (!raw.ok()) return raw.status();
      const int64_t rows = raw->info.shape.empty() ? 0 : raw->info.shape[0];
      if (row + rows > t.dim(0)) {
        return absl::InvalidArgumentError(absl::StrCat(weights_.path(), ": tensor ", part.name,
                                                       " has ", rows, " rows; the weight has room for ",
                                                       t.dim(0) - row, " more"));
      }
      TESSERA_RETURN_IF_ERROR(backend.load_weight(weights_, part.name, t.rows(row, rows)));
      row += rows;
      continue;
    }
    IndexRange rows = part.rows;
    IndexRange cols = part.cols;
    auto raw = weights_.raw(part.name);
    if (!raw.ok()) return raw.status();
    const std::vector<int64_t>& shape = raw->info.shape;
    if (rows.count == 0 && !shape.empty()) rows = IndexRange{0, shape[0]};
    if (matrix && cols.count == 0 && shape.size() == 2) cols = IndexRange{0, shape[1]};
    if (row + rows.count > t.dim(0)) {
      return absl::InvalidArgumentError(absl::StrCat(weights_.path(), ": ", rows.count, " rows of tensor ",
                                                     part.name, " do not fit the ", t.dim(0) - row,
                                                     " rows left of the weight"));
    }
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<WeightSlice> slice,
                             WeightSlice::create(weights_, part.name, rows, cols));
    TESSERA_RETURN_IF_ERROR(backend.load_weight(*slice, part.name, t.rows(row, rows.count)));
    row += rows.count;
  }
  if (row < t.dim(0) && zero_rest) {
    const Tensor rest = t.rows(row, t.dim(0) - row);
    backend.upload_f32(std::vector<float>(static_cast<size_t>(rest.numel()), 0.0f), rest);
    row = t.dim(0);
  }
  if (row != t.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat(weights_.path(), ": weight ",
                                                   parts.empty() ? "" : parts.front().name,
                                                   "... has ", row,
                                                   " rows, expected ", t.dim(0)));
  }
  bytes_loaded_ += t.nbytes();
  return t;
}

absl::StatusOr<bool> WeightLoader::stored_in_fp8(std::span<const WeightPart> parts) const {
  for (const WeightPart& part : parts) {
    TESSERA_ASSIGN_OR_RETURN(const RawTensor raw, weights_.raw(part.name));
    if (!is_fp8(raw.info.dtype)) return false;
  }
  return !parts.empty();
}

absl::StatusOr<std::optional<Tensor>> WeightLoader::load_fp8_codes(
    Backend& backend, std::span<const WeightPart> parts, int64_t rows, int64_t cols) {
  std::vector<uint8_t> codes(static_cast<size_t>(rows * cols));
  std::vector<float> scales(static_cast<size_t>(rows));
  int64_t row = 0;
  for (const WeightPart& part : parts) {
    // The part's bytes: the stored tensor's, or a slice's (its rows, or its columns gathered).
    // Whether the stored tensor keeps codes, before any slice gathers its columns.
    TESSERA_ASSIGN_OR_RETURN(RawTensor raw, weights_.raw(part.name));
    const WeightScales::Kind kind = raw.scales.kind;
    if (raw.info.dtype != DType::kF8_E4M3 || raw.info.shape.size() != 2 ||
        (kind != WeightScales::Kind::kTensor && kind != WeightScales::Kind::kRow)) {
      return std::nullopt;
    }
    std::unique_ptr<WeightSlice> slice;
    if (!part.whole()) {
      const std::vector<int64_t>& shape = raw.info.shape;
      const IndexRange r = part.rows.count == 0 ? IndexRange{0, shape[0]} : part.rows;
      const IndexRange c = part.cols.count == 0 ? IndexRange{0, shape[1]} : part.cols;
      TESSERA_ASSIGN_OR_RETURN(slice, WeightSlice::create(weights_, part.name, r, c));
      TESSERA_ASSIGN_OR_RETURN(raw, slice->raw(part.name));
    }
    const int64_t part_rows = raw.info.shape[0];
    if (raw.info.shape[1] != cols || row + part_rows > rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          weights_.path(), ": tensor ", part.name, " is ", part_rows, " x ", raw.info.shape[1],
          "; the weight has room for ", rows - row, " more rows of ", cols));
    }
    for (int64_t i = 0; i < part_rows * cols; ++i) {
      const uint8_t code = raw.data[i];
      if ((code & 0x7f) == 0x7f) {  // e4m3fn's NaN
        return non_finite_weight_error(absl::StrCat(weights_.path(), ": tensor ", part.name),
                                       raw, i, DType::kF8_E4M3);
      }
      codes[static_cast<size_t>(row * cols + i)] = code;
    }
    for (int64_t r = 0; r < part_rows; ++r) scales[static_cast<size_t>(row + r)] = raw.scales.at(r, 0);
    row += part_rows;
  }
  if (row != rows) {
    return absl::InvalidArgumentError(absl::StrCat(weights_.path(), ": weight ",
                                                   parts.empty() ? "" : parts.front().name,
                                                   "... has ", row, " rows, expected ", rows));
  }
  TESSERA_ASSIGN_OR_RETURN(Tensor t, arena_.allocate(backend, DType::kF8_E4M3, {rows, cols}));
  TESSERA_ASSIGN_OR_RETURN(const Tensor scale, arena_.allocate(backend, DType::kF32, {rows}));
  backend.upload_bytes(codes, t);
  backend.upload_f32(scales, scale);
  t.scale = scale.as<float>();
  bytes_loaded_ += t.nbytes() + scale.nbytes();
  return t;
}

absl::StatusOr<Tensor> WeightLoader::load_row_slice(Backend& backend, std::string name,
                                                    int64_t first, int64_t count, int64_t rows,
                                                    int64_t cols) {
  // A part of no rows would read as the whole tensor (WeightPart: a count of 0 is every row).
  if (count == 0) return load_parts(backend, {}, {rows, cols}, /*zero_rest=*/true);
  return load_parts(backend, {WeightPart{std::move(name), IndexRange{first, count}, {}}},
                    {rows, cols}, /*zero_rest=*/true);
}

}  // namespace tessera
