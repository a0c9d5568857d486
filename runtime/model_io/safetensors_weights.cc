#include "runtime/model_io/safetensors_weights.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <system_error>

#include "absl/status/status.h"
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
    return w;
  }
  if (is_regular_file(join(dir, kSingleName))) {
    if (absl::Status st = w->load_files({std::string(kSingleName)}); !st.ok()) return st;
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
      auto [it, inserted] = entries_.emplace(t.name, Entry{*f, &t});
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
    entries_.emplace(tensor, Entry{*f, t});
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
  // A non-finite element fails the load, found as the conversion writes it.
  absl::StatusOr<int64_t> bad =
      dequantize_f32_checked(e.tensor->dtype, e.file->tensor_bytes(*e.tensor), out);
  if (!bad.ok()) {
    return absl::Status(bad.status().code(), str_cat(where, ": ", bad.status().message()));
  }
  if (*bad < 0) return absl::OkStatus();
  absl::StatusOr<RawTensor> r = raw(hf_name);
  if (!r.ok()) return r.status();
  return non_finite_weight_error(where, *r, *bad, DType::kF32);
}

}  // namespace tessera
