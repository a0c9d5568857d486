#include "runtime/model_io/gguf_weights.h"

#include "absl/status/status.h"
#include "runtime/model_io/dequant.h"
#include "runtime/model_io/gguf_config.h"
#include "base/str_cat.h"
#include "runtime/model_io/tensor_checks.h"
#include "runtime/model_io/weight_names.h"

namespace tessera {

int64_t qk_unpermuted_row(int64_t stored_row, int64_t head_dim) {
  const int64_t head = stored_row / head_dim;
  const int64_t r = stored_row % head_dim;  // = 2 * j + t
  return head * head_dim + (r % 2) * (head_dim / 2) + r / 2;
}

absl::StatusOr<std::unique_ptr<GgufWeights>> GgufWeights::open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::open(path);
  if (!file.ok()) return file.status();
  std::unique_ptr<GgufWeights> w(new GgufWeights());
  w->gguf_ = *std::move(file);
  absl::StatusOr<ModelConfig> config = config_from_gguf(*w->gguf_);
  if (!config.ok()) return config.status();
  w->config_ = *std::move(config);

  const std::vector<GgufTensorInfo>& infos = w->gguf_->tensors();
  w->entries_.reserve(infos.size());
  for (const GgufTensorInfo& info : infos) {
    Entry e;
    e.info = &info;
    std::optional<std::string> hf = gguf_to_hf_name(info.name, w->config_.architecture);
    e.hf_name = hf.has_value() ? *std::move(hf) : info.name;
    bool is_k = false;
    if (is_gguf_qk_projection(info.name, &is_k, w->config_.architecture)) {
      e.qk_heads = is_k ? w->config_.num_kv_heads : w->config_.num_heads;
      // Rows come in heads of head_dim, each split in two halves.
      const int64_t rows = info.shape[0];
      if (rows % e.qk_heads != 0 || (rows / e.qk_heads) % 2 != 0) {
        return absl::InvalidArgumentError(
            str_cat(path, ": tensor '", info.name, "': ", rows, " rows cannot be split into ",
                    e.qk_heads, " heads of even size to undo the rotary permutation"));
      }
    }
    if (!w->index_.emplace(e.hf_name, w->entries_.size()).second) {
      return absl::InvalidArgumentError(str_cat(path, ": tensor '", info.name,
                                                "' maps to HF name '", e.hf_name,
                                                "', which another tensor already has"));
    }
    w->entries_.push_back(std::move(e));
  }
  return w;
}

const GgufWeights::Entry* GgufWeights::find(std::string_view hf_name) const {
  auto it = index_.find(hf_name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

std::vector<TensorInfo> GgufWeights::tensors() const {
  std::vector<TensorInfo> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) out.push_back({e.hf_name, e.info->dtype, e.info->shape});
  return out;
}

bool GgufWeights::has(std::string_view hf_name) const {
  return find(hf_name) != nullptr;
}

absl::StatusOr<RawTensor> GgufWeights::raw(std::string_view hf_name) const {
  const Entry* e = find(hf_name);
  if (e == nullptr) {
    return absl::NotFoundError(str_cat(path(), ": tensor '", hf_name, "' is not in the file"));
  }
  RawTensor r;
  r.info = {e->hf_name, e->info->dtype, e->info->shape};
  const std::span<const uint8_t> bytes = gguf_->tensor_bytes(*e->info);
  r.data = bytes.data();
  r.nbytes = bytes.size();
  r.qk_permuted = e->qk_heads > 0;
  r.qk_head_dim = r.qk_permuted ? e->info->shape[0] / e->qk_heads : 0;  // as read_f32 splits rows
  return r;
}

absl::Status GgufWeights::read_f32(std::string_view hf_name,
                                   std::span<const int64_t> expected_shape,
                                   std::span<float> out) const {
  const Entry* e = find(hf_name);
  if (e == nullptr) {
    return absl::NotFoundError(str_cat(path(), ": tensor '", hf_name, "' is not in the file"));
  }
  const GgufTensorInfo& info = *e->info;
  const std::string where = e->hf_name == info.name ? str_cat(path(), ": tensor '", e->hf_name, "'")
                                                    : str_cat(path(), ": tensor '", e->hf_name,
                                                              "' (GGUF '", info.name, "')");
  if (absl::Status st = check_read_f32_request(where, info.shape, expected_shape, out.size());
      !st.ok()) {
    return st;
  }
  const std::span<const uint8_t> bytes = gguf_->tensor_bytes(info);
  // A non-finite element (stored, or from a block's arithmetic) fails the load, found as each
  // block is converted; `first` counts stored elements before the converted span.
  auto check = [&](const absl::StatusOr<int64_t>& bad, int64_t first) -> absl::Status {
    if (!bad.ok()) return absl::Status(bad.status().code(), str_cat(where, ": ", bad.status().message()));
    if (*bad < 0) return absl::OkStatus();
    absl::StatusOr<RawTensor> r = raw(hf_name);
    if (!r.ok()) return r.status();
    return non_finite_weight_error(where, *r, first + *bad, DType::kF32);
  };
  if (e->qk_heads == 0) return check(dequantize_f32_checked(info.dtype, bytes, out), 0);
  // Q/K: convert stored row by stored row into the HF row it holds, so no second full-size
  // buffer is needed. Quant blocks never straddle rows of a matrix (GgufFile checks that ne[0],
  // the row length, is a multiple of the block size).
  const int64_t rows = info.shape[0];
  const size_t row_elems = out.size() / static_cast<size_t>(rows);
  const size_t row_bytes = bytes.size() / static_cast<size_t>(rows);
  const int64_t head_dim = rows / e->qk_heads;
  for (int64_t s = 0; s < rows; ++s) {
    const int64_t dst = qk_unpermuted_row(s, head_dim);
    absl::Status st =
        check(dequantize_f32_checked(info.dtype, bytes.subspan(s * row_bytes, row_bytes),
                                     out.subspan(dst * row_elems, row_elems)),
              s * static_cast<int64_t>(row_elems));
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace tessera
