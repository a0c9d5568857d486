#include "runtime/model_io/safetensors_weights.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "runtime/model_io/dequant.h"
#include "runtime/model_io/hf_config.h"
#include "runtime/model_io/mapped_file.h"
#include "base/str_cat.h"
#include "runtime/model_io/tensor_checks.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kMaxIndexBytes = size_t{256} << 20;
constexpr std::string_view kIndexName = "model.safetensors.index.json";
constexpr std::string_view kSingleName = "model.safetensors";

std::string join(const std::string& dir, std::string_view name) {
  return (fs::path(dir) / fs::path(name)).string();
}

bool is_regular_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// A weight_map value must name a file inside the model directory.
bool is_plain_file_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsWeights>> SafetensorsWeights::open(
    const std::string& dir) {
  std::unique_ptr<SafetensorsWeights> w(new SafetensorsWeights());
  w->dir_ = dir;
  absl::StatusOr<ModelConfig> config = config_from_hf_file(join(dir, "config.json"));
  if (!config.ok()) return config.status();
  w->config_ = *std::move(config);

  const std::string index_path = join(dir, kIndexName);
  if (is_regular_file(index_path)) {
    if (absl::Status st = w->load_index(index_path); !st.ok()) return st;
    if (absl::Status st = w->resolve_scales(); !st.ok()) return st;
    return w;
  }
  if (is_regular_file(join(dir, kSingleName))) {
    if (absl::Status st = w->load_files({std::string(kSingleName)}); !st.ok()) return st;
    if (absl::Status st = w->resolve_scales(); !st.ok()) return st;
    return w;
  }
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.ends_with(".safetensors") && is_regular_file(it->path().string())) {
      names.push_back(name);
    }
  }
  if (ec) {
    return absl::InternalError(str_cat(dir, ": cannot list directory: ", ec.message()));
  }
  if (names.empty()) {
    return absl::NotFoundError(
        str_cat(dir, ": no ", kIndexName, ", ", kSingleName, " or other *.safetensors file"));
  }
  std::sort(names.begin(), names.end());  // deterministic order for messages
  if (absl::Status st = w->load_files(names); !st.ok()) return st;
  if (absl::Status st = w->resolve_scales(); !st.ok()) return st;
  return w;
}

absl::StatusOr<const SafetensorsFile*> SafetensorsWeights::open_shard(const std::string& name) {
  auto it = shards_.find(name);
  if (it != shards_.end()) return it->second.get();
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::open(join(dir_, name));
  if (!f.ok()) return f.status();
  const SafetensorsFile* ptr = f->get();
  shards_.emplace(name, *std::move(f));
  return ptr;
}

absl::Status SafetensorsWeights::load_files(const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    absl::StatusOr<const SafetensorsFile*> f = open_shard(name);
    if (!f.ok()) return f.status();
    for (const SafetensorsTensor& t : (*f)->tensors()) {
      auto [it, inserted] = entries_.emplace(t.name, Entry{*f, &t, {}});
      if (!inserted) {
        return absl::InvalidArgumentError(
            str_cat(dir_, ": tensor '", t.name, "' is in both ", it->second.file->path(), " and ",
                    (*f)->path(), " (without an index file the shards must not overlap)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status SafetensorsWeights::load_index(const std::string& index_path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::open(index_path);
  if (!file.ok()) return file.status();
  if ((*file)->size() > kMaxIndexBytes) {
    return absl::InvalidArgumentError(
        str_cat(index_path, ": ", (*file)->size(), " bytes is too large for an index"));
  }
  const char* text = reinterpret_cast<const char*>((*file)->data());
  json index;
  // nlohmann reports errors by exception; none may leave this module.
  try {
    index = json::parse(text, text + (*file)->size());
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(str_cat(index_path, ": invalid JSON: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(str_cat(index_path, ": ", e.what()));
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    return absl::InvalidArgumentError(
        str_cat(index_path, ": key 'weight_map' is missing or not an object"));
  }
  for (const auto& [tensor, shard_json] : index["weight_map"].items()) {
    if (!shard_json.is_string() || !is_plain_file_name(shard_json.get_ref<const std::string&>())) {
      return absl::InvalidArgumentError(
          str_cat(index_path, ": weight_map entry for tensor '", tensor,
                  "' must be the file name of a shard in the model directory"));
    }
    const std::string& shard = shard_json.get_ref<const std::string&>();
    absl::StatusOr<const SafetensorsFile*> f = open_shard(shard);
    if (!f.ok()) {
      return absl::Status(f.status().code(),
                          str_cat(index_path, ": shard '", shard, "' of tensor '", tensor,
                                  "': ", f.status().message()));
    }
    const SafetensorsTensor* t = (*f)->find(tensor);
    if (t == nullptr) {
      return absl::NotFoundError(str_cat(index_path, ": tensor '", tensor, "' is mapped to shard '",
                                         shard, "', which does not contain it"));
    }
    entries_.emplace(tensor, Entry{*f, t, {}});
  }
  return absl::OkStatus();
}

std::vector<TensorInfo> SafetensorsWeights::tensors() const {
  std::vector<TensorInfo> out;
  out.reserve(entries_.size());
  for (const auto& [name, e] : entries_) out.push_back({name, e.tensor->dtype, e.tensor->shape});
  return out;
}

bool SafetensorsWeights::has(std::string_view hf_name) const {
  return entries_.find(hf_name) != entries_.end();
}

absl::StatusOr<RawTensor> SafetensorsWeights::raw(std::string_view hf_name) const {
  auto it = entries_.find(hf_name);
  if (it == entries_.end()) {
    return absl::NotFoundError(str_cat(dir_, ": tensor '", hf_name, "' is not in the model"));
  }
  const Entry& e = it->second;
  RawTensor r;
  r.info = {e.tensor->name, e.tensor->dtype, e.tensor->shape};
  const std::span<const uint8_t> bytes = e.file->tensor_bytes(*e.tensor);
  r.data = bytes.data();
  r.nbytes = bytes.size();
  r.scales = e.scales;
  return r;
}

absl::Status SafetensorsWeights::read_f32(std::string_view hf_name,
                                          std::span<const int64_t> expected_shape,
                                          std::span<float> out) const {
  auto it = entries_.find(hf_name);
  if (it == entries_.end()) {
    return absl::NotFoundError(str_cat(dir_, ": tensor '", hf_name, "' is not in the model"));
  }
  const Entry& e = it->second;
  const std::string where = str_cat(e.file->path(), ": tensor '", e.tensor->name, "'");
  if (absl::Status st = check_read_f32_request(where, e.tensor->shape, expected_shape, out.size());
      !st.ok()) {
    return st;
  }
  // A non-finite element fails the load, found as the conversion writes it (scaled, for FP8).
  const int64_t row_elems = e.tensor->shape.size() == 2 && e.tensor->shape[1] > 0
                               ? e.tensor->shape[1]
                               : std::max<int64_t>(1, static_cast<int64_t>(out.size()));
  absl::StatusOr<int64_t> bad = dequantize_scaled_f32_checked(
      e.tensor->dtype, e.file->tensor_bytes(*e.tensor), e.scales, row_elems, 0, out);
  if (!bad.ok()) {
    return absl::Status(bad.status().code(), str_cat(where, ": ", bad.status().message()));
  }
  if (*bad < 0) return absl::OkStatus();
  absl::StatusOr<RawTensor> r = raw(hf_name);
  if (!r.ok()) return r.status();
  return non_finite_weight_error(where, *r, *bad, DType::kF32);
}

namespace {

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Without a + b - 1, which overflows for a stored dimension near INT64_MAX.
int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace

absl::StatusOr<const SafetensorsTensor*> SafetensorsWeights::scale_tensor(
    const std::string& what, const std::string& scale_name) const {
  auto it = entries_.find(scale_name);
  if (it == entries_.end()) {
    return absl::InvalidArgumentError(
        str_cat(what, ": its scale tensor '", scale_name, "' is not in the model"));
  }
  const SafetensorsTensor& t = *it->second.tensor;
  if (t.dtype != DType::kF32 && t.dtype != DType::kBF16 && t.dtype != DType::kF16) {
    return absl::InvalidArgumentError(str_cat(what, ": its scale tensor '", scale_name, "' is ",
                                              dtype_name(t.dtype), " (F32, BF16 or F16 expected)"));
  }
  return &t;
}

absl::StatusOr<std::vector<float>> SafetensorsWeights::scale_values(
    const std::string& what, const std::string& scale_name) const {
  auto it = entries_.find(scale_name);
  const SafetensorsTensor& t = *it->second.tensor;
  std::vector<float> v(static_cast<size_t>(numel(t.shape)));
  if (absl::Status st = dequantize_f32(t.dtype, it->second.file->tensor_bytes(t), v); !st.ok()) {
    return absl::Status(st.code(), str_cat(what, ": scale tensor '", scale_name, "': ", st.message()));
  }
  for (size_t k = 0; k < v.size(); ++k) {
    if (!std::isfinite(v[k]) || v[k] <= 0.0f) {
      return absl::InvalidArgumentError(str_cat(what, ": its scale tensor '", scale_name, "' ",
                                                shape_string(t.shape), " holds ", v[k],
                                                " at element ", k,
                                                " (scales must be finite and positive)"));
    }
  }
  return v;
}

absl::StatusOr<WeightScales> SafetensorsWeights::scales_of(const std::string& name,
                                                           const Entry& e) const {
  const WeightQuantization& q = config_.quantization;
  const std::vector<int64_t>& shape = e.tensor->shape;
  const std::string what = str_cat(e.file->path(), ": tensor '", name, "' (",
                                   dtype_name(e.tensor->dtype), " ", shape_string(shape), ")");
  if (!q.quantized()) {
    return absl::InvalidArgumentError(
        str_cat(what, ": FP8 weights need config.json's quantization_config (quant_method \"fp8\" "
                      "or \"compressed-tensors\"), which says where their scales are; it has none"));
  }
  constexpr std::string_view kWeight = ".weight";
  if (!std::string_view(name).ends_with(kWeight)) {
    return absl::InvalidArgumentError(
        str_cat(what, ": only a linear's '<prefix>.weight' may be stored as FP8 (with its scale '<prefix>.",
                q.scale_suffix, "')"));
  }
  const std::string prefix = name.substr(0, name.size() - kWeight.size());
  WeightScales s;
  s.name = str_cat(prefix, ".", q.scale_suffix);
  absl::StatusOr<const SafetensorsTensor*> scale = scale_tensor(what, s.name);
  if (!scale.ok()) return scale.status();
  const std::vector<int64_t>& scale_shape = (*scale)->shape;
  const bool matrix = shape.size() == 2;
  const int64_t rows = matrix ? shape[0] : 0;
  const int64_t cols = matrix ? shape[1] : 0;
  std::vector<std::string> expected;  // for the message
  if (q.block_rows > 0 && matrix) {
    const std::vector<int64_t> grid = {ceil_div(rows, q.block_rows), ceil_div(cols, q.block_cols)};
    if (scale_shape == grid) {
      s.kind = WeightScales::Kind::kBlock;
      s.block_rows = q.block_rows;
      s.block_cols = q.block_cols;
      s.grid_cols = grid[1];
    }
    expected.push_back(str_cat(shape_string(grid), " (one per ", q.block_rows, "x", q.block_cols,
                               " block)"));
  }
  if (s.kind == WeightScales::Kind::kNone && q.per_tensor) {
    if (scale_shape.size() <= 2 && numel(scale_shape) == 1) s.kind = WeightScales::Kind::kTensor;
    expected.push_back("[] or [1] (per tensor)");
  }
  if (s.kind == WeightScales::Kind::kNone && q.per_channel && matrix) {
    if (scale_shape == std::vector<int64_t>{rows, 1} || scale_shape == std::vector<int64_t>{rows}) {
      s.kind = WeightScales::Kind::kRow;
    }
    expected.push_back(str_cat(shape_string(std::vector<int64_t>{rows, 1}), " (per output row)"));
  }
  if (s.kind == WeightScales::Kind::kNone) {
    return absl::InvalidArgumentError(
        str_cat(what, ": its scale tensor '", s.name, "' has shape ", shape_string(scale_shape),
                "; quantization_config (", quantization_method_name(q.method), ") expects ",
                expected.empty() ? std::string("no scale for a tensor of this rank")
                                 : absl::StrJoin(expected, " or ")));
  }
  absl::StatusOr<std::vector<float>> values = scale_values(what, s.name);
  if (!values.ok()) return values.status();
  s.values = std::make_shared<const std::vector<float>>(*std::move(values));
  // The static activation scale: required when the checkpoint's activations are static, checked
  // whenever present (kept for FP8 compute).
  const std::string input_name = str_cat(prefix, ".input_scale");
  if (entries_.count(input_name) != 0 ||
      q.activations == WeightQuantization::Activations::kStatic) {
    if (entries_.count(input_name) == 0) {
      return absl::InvalidArgumentError(
          str_cat(what, ": its input scale '", input_name,
                  "' is not in the model (quantization_config says the activations are static)"));
    }
    absl::StatusOr<const SafetensorsTensor*> input_tensor = scale_tensor(what, input_name);
    if (!input_tensor.ok()) return input_tensor.status();
    if (numel((*input_tensor)->shape) != 1) {
      return absl::InvalidArgumentError(
          str_cat(what, ": its input scale '", input_name, "' has shape ",
                  shape_string((*input_tensor)->shape), "; one value ([] or [1]) expected"));
    }
    absl::StatusOr<std::vector<float>> input = scale_values(what, input_name);
    if (!input.ok()) return input.status();
    s.input_scale = (*input)[0];
  }
  return s;
}

absl::Status SafetensorsWeights::resolve_scales() {
  const WeightQuantization& q = config_.quantization;
  for (auto& [name, e] : entries_) {
    if (is_fp8(e.tensor->dtype)) {
      absl::StatusOr<WeightScales> s = scales_of(name, e);
      if (!s.ok()) return s.status();
      e.scales = *std::move(s);
      continue;
    }
    // A weight kept in higher precision has no scale: one that does is a checkpoint whose
    // weights are not what its scales describe (compressed-tensors' "frozen" state, say).
    constexpr std::string_view kWeight = ".weight";
    if (!q.quantized() || !std::string_view(name).ends_with(kWeight)) continue;
    const std::string scale_name =
        str_cat(name.substr(0, name.size() - kWeight.size()), ".", q.scale_suffix);
    if (entries_.count(scale_name) != 0) {
      return absl::InvalidArgumentError(
          str_cat(e.file->path(), ": tensor '", name, "' is stored as ", dtype_name(e.tensor->dtype),
                  " but has a scale tensor '", scale_name,
                  "': only weights stored as FP8 (F8_E4M3, F8_E5M2) are scaled"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera
