#include "runtime/model/weight_loader.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tessera {

std::string layer_weight_name(int64_t layer, std::string_view suffix) {
  return absl::StrCat("model.layers.", layer, ".", std::string(suffix));
}

absl::StatusOr<Tensor> WeightLoader::load(Backend& backend,
                                          std::initializer_list<std::string_view> names,
                                          std::initializer_list<int64_t> dims) {
  TESSERA_ASSIGN_OR_RETURN(Tensor t, arena_.allocate(backend, backend.compute_dtype(), dims));
  const int64_t rows_each = t.dim(0) / static_cast<int64_t>(names.size());
  int64_t row = 0;
  for (std::string_view name : names) {
    // Parts of a fused weight may differ in rows (q vs k/v): take each one's stored rows.
    int64_t rows = rows_each;
    if (names.size() > 1) {
      auto raw = weights_.raw(name);
      if (!raw.ok()) return raw.status();
      rows = raw->info.shape.empty() ? 0 : raw->info.shape[0];
      if (row + rows > t.dim(0)) {
        return absl::InvalidArgumentError(absl::StrCat(weights_.path(), ": tensor ", std::string(name),
                                                       " has ", rows,
                                                       " rows; the fused weight has room for ",
                                                       t.dim(0) - row));
      }
    }
    TESSERA_RETURN_IF_ERROR(backend.load_weight(weights_, name, t.rows(row, rows)));
    row += rows;
  }
  if (row != t.dim(0)) {
    return absl::InvalidArgumentError(absl::StrCat(weights_.path(), ": fused weight ",
                                                   std::string(*names.begin()), "... has ", row,
                                                   " rows, expected ", t.dim(0)));
  }
  bytes_loaded_ += t.nbytes();
  return t;
}

}  // namespace tessera
