#include "runtime/model_io/safetensors_file.h"

#include <cstring>
#include <exception>
#include <limits>
#include <set>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "runtime/model_io/byte_ranges.h"
#include "runtime/model_io/mapped_file.h"
#include "base/str_cat.h"

namespace tessera {
namespace {

using nlohmann::json;

// The reference implementation's limit (safetensors MAX_HEADER_SIZE).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Every dtype name the safetensors format defines, so that an unsupported but valid one is
// reported as such rather than as garbage.
bool is_safetensors_dtype(std::string_view s) {
  static constexpr std::string_view kAll[] = {"BOOL", "U8",  "I8",  "F8_E5M2", "F8_E4M3",
                                              "I16",  "U16", "F16", "BF16",    "I32",
                                              "U32",  "F32", "F64", "I64",     "U64"};
  for (std::string_view d : kAll) {
    if (s == d) return true;
  }
  return false;
}

class HeaderReader {
 public:
  HeaderReader(const std::string& path, uint64_t data_size) : path_(path), data_size_(data_size) {}

  absl::Status fail(std::string_view name, std::string_view detail) const {
    return absl::InvalidArgumentError(str_cat(path_, ": tensor '", name, "': ", detail));
  }

  absl::StatusOr<SafetensorsTensor> read_entry(const std::string& name, const json& e) const {
    if (!e.is_object()) return fail(name, str_cat("entry must be an object, got ", e.type_name()));
    SafetensorsTensor t;
    t.name = name;

    auto dtype_it = e.find("dtype");
    if (dtype_it == e.end() || !dtype_it->is_string())
      return fail(name, "'dtype' must be a string");
    const std::string& dtype = dtype_it->get_ref<const std::string&>();
    if (dtype == "F32") {
      t.dtype = DType::kF32;
    } else if (dtype == "F16") {
      t.dtype = DType::kF16;
    } else if (dtype == "BF16") {
      t.dtype = DType::kBF16;
    } else if (dtype == "F8_E4M3") {
      t.dtype = DType::kF8_E4M3;
    } else if (dtype == "F8_E5M2") {
      t.dtype = DType::kF8_E5M2;
    } else if (is_safetensors_dtype(dtype)) {
      return fail(name, str_cat("dtype ", dtype,
                                " is not supported (F32, F16, BF16, F8_E4M3, F8_E5M2 are)"));
    } else {
      return fail(name, str_cat("unknown dtype '", dtype.substr(0, 32), "'"));
    }
    const uint64_t elem_bytes = dtype_traits(static_cast<uint32_t>(t.dtype))->block_bytes;

    auto shape_it = e.find("shape");
    if (shape_it == e.end() || !shape_it->is_array()) return fail(name, "'shape' must be an array");
    uint64_t n_elements = 1;
    for (const json& d : *shape_it) {
      if (!d.is_number_unsigned()) {
        return fail(name, "'shape' entries must be non-negative integers");
      }
      const uint64_t v = d.get<uint64_t>();
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(n_elements, v, &n_elements)) {
        return fail(name, "element count overflows 64 bits");
      }
      t.shape.push_back(static_cast<int64_t>(v));
    }

    auto off_it = e.find("data_offsets");
    if (off_it == e.end() || !off_it->is_array() || off_it->size() != 2 ||
        !(*off_it)[0].is_number_unsigned() || !(*off_it)[1].is_number_unsigned()) {
      return fail(name, "'data_offsets' must be [begin, end] with non-negative integers");
    }
    const uint64_t begin = (*off_it)[0].get<uint64_t>();
    const uint64_t end = (*off_it)[1].get<uint64_t>();
    if (begin > end || end > data_size_) {
      return fail(name, str_cat("data_offsets [", begin, ", ", end,
                                "] are not inside the data section of ", data_size_, " bytes"));
    }
    uint64_t want = 0;
    if (__builtin_mul_overflow(n_elements, elem_bytes, &want) || want != end - begin) {
      return fail(name, str_cat("data_offsets [", begin, ", ", end, "] hold ", end - begin,
                                " bytes but shape and dtype ", dtype, " need ", n_elements, " x ",
                                elem_bytes));
    }
    t.begin = begin;
    t.nbytes = end - begin;
    return t;
  }

 private:
  const std::string& path_;
  uint64_t data_size_;
};

}  // namespace

SafetensorsFile::~SafetensorsFile() = default;

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> mapped = MappedFile::open(path);
  if (!mapped.ok()) return mapped.status();
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->file_ = *std::move(mapped);
  const uint64_t size = f->file_->size();
  if (size < 8) {
    return absl::InvalidArgumentError(str_cat(path, ": not a safetensors file: ", size,
                                              " bytes is too short for the header length"));
  }
  uint64_t header_len = 0;
  std::memcpy(&header_len, f->file_->data(), 8);
  if (header_len > size - 8 || header_len > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(str_cat(path, ": header length ", header_len, " exceeds the ",
                                              size - 8, " bytes after it (or the ", kMaxHeaderBytes,
                                              "-byte limit)"));
  }
  f->data_start_ = 8 + header_len;
  const char* text = reinterpret_cast<const char*>(f->file_->data() + 8);

  json header;
  std::set<std::string, std::less<>> seen;  // top-level keys: JSON would silently keep the last
  std::string duplicate;
  // nlohmann reports errors by exception; none may leave this module.
  try {
    const json::parser_callback_t on_event = [&](int depth, json::parse_event_t event,
                                                 json& parsed) {
      if (depth == 1 && event == json::parse_event_t::key && duplicate.empty() &&
          parsed.is_string() && !seen.insert(parsed.get<std::string>()).second) {
        duplicate = parsed.get<std::string>();
      }
      return true;
    };
    header = json::parse(text, text + header_len, on_event);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(str_cat(path, ": header is not valid JSON: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InternalError(str_cat(path, ": reading header: ", e.what()));
  }
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(
        str_cat(path, ": tensor '", duplicate, "' appears twice in the header"));
  }
  if (!header.is_object()) {
    return absl::InvalidArgumentError(
        str_cat(path, ": header must be a JSON object, got ", header.type_name()));
  }
  HeaderReader reader(path, size - f->data_start_);
  try {
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      absl::StatusOr<SafetensorsTensor> t = reader.read_entry(it.key(), it.value());
      if (!t.ok()) return t.status();
      f->index_.emplace(t->name, f->tensors_.size());
      f->tensors_.push_back(*std::move(t));
    }
  } catch (const std::exception& e) {
    return absl::InternalError(str_cat(path, ": reading header: ", e.what()));
  }
  // No two tensors may share bytes (the reference implementation refuses that too).
  std::vector<ByteRange> ranges;
  ranges.reserve(f->tensors_.size());
  for (const SafetensorsTensor& t : f->tensors_) ranges.push_back({t.begin, t.begin + t.nbytes});
  if (const std::optional<std::pair<size_t, size_t>> overlap = find_overlap(ranges)) {
    const SafetensorsTensor& a = f->tensors_[overlap->first];
    const SafetensorsTensor& b = f->tensors_[overlap->second];
    return absl::InvalidArgumentError(
        str_cat(path, ": tensor '", b.name, "': data_offsets [", b.begin, ", ", b.begin + b.nbytes,
                "] overlap tensor '", a.name, "' at [", a.begin, ", ", a.begin + a.nbytes,
                "]: tensors must not share bytes"));
  }
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> SafetensorsFile::tensor_bytes(const SafetensorsTensor& t) const {
  return {file_->data() + data_start_ + t.begin, static_cast<size_t>(t.nbytes)};
}

}  // namespace tessera
