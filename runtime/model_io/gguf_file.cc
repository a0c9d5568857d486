#include "runtime/model_io/gguf_file.h"

#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "runtime/model_io/byte_ranges.h"
#include "runtime/model_io/mapped_file.h"
#include "base/str_cat.h"

namespace tessera {

// GGUF is little-endian and the parser reads fields with memcpy.
static_assert(std::endian::native == std::endian::little, "tessera assumes a little-endian host");

namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kDefaultAlignment = 32;
constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;
constexpr int kMaxArrayDepth = 8;  // nested arrays: deeper is a hostile file, not a model
// Each nested array becomes a GgufValue (~150 bytes) from as little as 12 file bytes; no model
// stores more than a handful, so cap them rather than let a file inflate memory twelvefold.
constexpr uint64_t kMaxNestedArrays = uint64_t{1} << 16;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS
constexpr uint64_t kMaxKeyLength = 65535;
// Minimum encoded sizes, used to cap reservations by the bytes actually left.
constexpr uint64_t kMinStringBytes = 8;                      // u64 length
constexpr uint64_t kMinArrayBytes = 4 + 8;                   // element type + count
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;  // name, n_dims, one dim, type, offset

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
  }
  return 0;
}

bool is_unsigned_int(GgufType t) {
  return t == GgufType::kU8 || t == GgufType::kU16 || t == GgufType::kU32 || t == GgufType::kU64;
}
bool is_signed_int(GgufType t) {
  return t == GgufType::kI8 || t == GgufType::kI16 || t == GgufType::kI32 || t == GgufType::kI64;
}
bool is_float(GgufType t) {
  return t == GgufType::kF32 || t == GgufType::kF64;
}

// Decodes one fixed-size little-endian value of type `t` at `p` into the scalar fields of `v`.
void load_scalar(const uint8_t* p, GgufType t, GgufValue* v) {
  switch (t) {
    case GgufType::kU8:
      v->u = p[0];
      break;
    case GgufType::kBool:
      v->u = p[0];
      break;
    case GgufType::kI8:
      v->i = static_cast<int8_t>(p[0]);
      break;
    case GgufType::kU16: {
      uint16_t x;
      std::memcpy(&x, p, 2);
      v->u = x;
      break;
    }
    case GgufType::kI16: {
      int16_t x;
      std::memcpy(&x, p, 2);
      v->i = x;
      break;
    }
    case GgufType::kU32: {
      uint32_t x;
      std::memcpy(&x, p, 4);
      v->u = x;
      break;
    }
    case GgufType::kI32: {
      int32_t x;
      std::memcpy(&x, p, 4);
      v->i = x;
      break;
    }
    case GgufType::kF32: {
      float x;
      std::memcpy(&x, p, 4);
      v->f = x;
      break;
    }
    case GgufType::kU64: {
      uint64_t x;
      std::memcpy(&x, p, 8);
      v->u = x;
      break;
    }
    case GgufType::kI64: {
      int64_t x;
      std::memcpy(&x, p, 8);
      v->i = x;
      break;
    }
    case GgufType::kF64: {
      double x;
      std::memcpy(&x, p, 8);
      v->f = x;
      break;
    }
    case GgufType::kString:
    case GgufType::kArray:
      break;
  }
}

// Names of ggml types that exist but that tessera does not know, so that rejecting them says
// what they are.
std::string_view foreign_ggml_type_name(uint32_t id) {
  switch (id) {
    case 4:
      return "Q4_2 (removed from ggml)";
    case 5:
      return "Q4_3 (removed from ggml)";
    case 16:
      return "IQ2_XXS";
    case 17:
      return "IQ2_XS";
    case 18:
      return "IQ3_XXS";
    case 19:
      return "IQ1_S";
    case 20:
      return "IQ4_NL";
    case 21:
      return "IQ3_S";
    case 22:
      return "IQ2_S";
    case 23:
      return "IQ4_XS";
    case 29:
      return "IQ1_M";
    case 34:
      return "TQ1_0";
    case 35:
      return "TQ2_0";
    case 39:
      return "MXFP4";
    default:
      return "";
  }
}

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::kU8:
      return "u8";
    case GgufType::kI8:
      return "i8";
    case GgufType::kU16:
      return "u16";
    case GgufType::kI16:
      return "i16";
    case GgufType::kU32:
      return "u32";
    case GgufType::kI32:
      return "i32";
    case GgufType::kF32:
      return "f32";
    case GgufType::kBool:
      return "bool";
    case GgufType::kString:
      return "string";
    case GgufType::kArray:
      return "array";
    case GgufType::kU64:
      return "u64";
    case GgufType::kI64:
      return "i64";
    case GgufType::kF64:
      return "f64";
  }
  return "unknown";
}

// Reads the header, metadata and tensor infos of an opened mapping into a GgufFile. Every read
// goes through need(), which compares against the bytes left, so nothing past the end is touched.
class GgufParser {
 public:
  explicit GgufParser(GgufFile& f) : f_(f), data_(f.file_->data()), size_(f.file_->size()) {}

  absl::Status parse() {
    if (absl::Status st = parse_header(); !st.ok()) return st;
    for (uint64_t i = 0; i < kv_count_; ++i) {
      if (absl::Status st = parse_key_value(i); !st.ok()) return st;
    }
    if (absl::Status st = parse_alignment(); !st.ok()) return st;
    f_.tensors_.reserve(capped(tensor_count_, kMinTensorInfoBytes));
    for (uint64_t i = 0; i < tensor_count_; ++i) {
      if (absl::Status st = parse_tensor_info(i); !st.ok()) return st;
    }
    // The data section starts at the next multiple of the alignment after the tensor infos.
    f_.data_offset_ = (pos_ + f_.alignment_ - 1) / f_.alignment_ * f_.alignment_;
    if (!f_.tensors_.empty() && f_.data_offset_ > size_) {
      return fail("header", "",
                  str_cat("data section would start at offset ", f_.data_offset_,
                          ", past the end of the file (", size_, " bytes)"));
    }
    for (const GgufTensorInfo& t : f_.tensors_) {
      if (absl::Status st = check_tensor_bounds(t); !st.ok()) return st;
    }
    return check_no_shared_bytes();
  }

 private:
  // "PATH: <kind> '<name>': <detail>" (or "PATH: <kind>: <detail>" when there is no name yet).
  absl::Status fail(std::string_view kind, std::string_view name, std::string_view detail) const {
    if (name.empty()) {
      return absl::InvalidArgumentError(str_cat(f_.path_, ": ", kind, ": ", detail));
    }
    return absl::InvalidArgumentError(str_cat(f_.path_, ": ", kind, " '", name, "': ", detail));
  }

  uint64_t remaining() const { return size_ - pos_; }

  // How many elements of at least `min_bytes` each could still fit: a bound for reserve() that
  // a lying count cannot inflate.
  uint64_t capped(uint64_t count, uint64_t min_bytes) const {
    return std::min<uint64_t>(count, remaining() / min_bytes);
  }

  absl::Status need(uint64_t n, std::string_view kind, std::string_view name,
                    std::string_view what) const {
    if (n <= remaining()) return absl::OkStatus();
    return fail(kind, name,
                str_cat("truncated: ", what, " needs ", n, " bytes at offset ", pos_, " but only ",
                        remaining(), " remain"));
  }

  absl::Status read_u32(uint32_t* v, std::string_view kind, std::string_view name,
                        std::string_view what) {
    if (absl::Status st = need(4, kind, name, what); !st.ok()) return st;
    std::memcpy(v, data_ + pos_, 4);
    pos_ += 4;
    return absl::OkStatus();
  }

  absl::Status read_u64(uint64_t* v, std::string_view kind, std::string_view name,
                        std::string_view what) {
    if (absl::Status st = need(8, kind, name, what); !st.ok()) return st;
    std::memcpy(v, data_ + pos_, 8);
    pos_ += 8;
    return absl::OkStatus();
  }

  absl::Status read_string(std::string_view* s, std::string_view kind, std::string_view name,
                           std::string_view what) {
    uint64_t len = 0;
    if (absl::Status st = read_u64(&len, kind, name, what); !st.ok()) return st;
    if (len > remaining()) {
      return fail(kind, name,
                  str_cat(what, " length ", len, " at offset ", pos_ - 8, " exceeds the ",
                          remaining(), " bytes left in the file"));
    }
    *s = std::string_view(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return absl::OkStatus();
  }

  absl::Status read_type(GgufType* t, std::string_view key, std::string_view what) {
    uint32_t id = 0;
    if (absl::Status st = read_u32(&id, "metadata key", key, what); !st.ok()) return st;
    if (id > static_cast<uint32_t>(GgufType::kF64)) {
      return fail("metadata key", key, str_cat("unknown ", what, " ", id));
    }
    *t = static_cast<GgufType>(id);
    return absl::OkStatus();
  }

  absl::Status parse_header() {
    uint32_t magic = 0;
    if (size_ < 4 || (std::memcpy(&magic, data_, 4), magic != kGgufMagic)) {
      return fail("header", "", "not a GGUF file (bad magic; expected \"GGUF\")");
    }
    pos_ = 4;
    uint32_t version = 0;
    if (absl::Status st = read_u32(&version, "header", "", "version"); !st.ok()) return st;
    if (version == 1) {
      return fail("header", "", "GGUF version 1 is not supported (only versions 2 and 3)");
    }
    if (version != 2 && version != 3) {
      const uint32_t swapped = __builtin_bswap32(version);
      if (swapped == 2 || swapped == 3) {
        return fail("header", "", "big-endian GGUF files are not supported");
      }
      return fail("header", "",
                  str_cat("GGUF version ", version, " is not supported (only 2 and 3)"));
    }
    f_.version_ = version;
    if (absl::Status st = read_u64(&tensor_count_, "header", "", "tensor count"); !st.ok()) {
      return st;
    }
    return read_u64(&kv_count_, "header", "", "metadata key/value count");
  }

  absl::Status parse_key_value(uint64_t index) {
    const std::string label = str_cat("metadata entry #", index);
    std::string_view key;
    if (absl::Status st = read_string(&key, label, "", "key"); !st.ok()) return st;
    if (key.empty() || key.size() > kMaxKeyLength) {
      return fail(label, "",
                  str_cat("key length ", key.size(), " is not in [1, ", kMaxKeyLength, "]"));
    }
    GgufKeyValue kv;
    kv.key = std::string(key);
    if (f_.key_index_.count(kv.key) != 0) return fail("metadata key", key, "appears twice");
    if (absl::Status st = read_type(&kv.value.type, key, "value type"); !st.ok()) return st;
    if (absl::Status st = read_value(kv.value.type, 0, key, &kv.value); !st.ok()) return st;
    f_.key_index_.emplace(kv.key, f_.metadata_.size());
    f_.metadata_.push_back(std::move(kv));
    return absl::OkStatus();
  }

  absl::Status check_bool(const uint8_t* p, uint64_t n, std::string_view key) const {
    for (uint64_t k = 0; k < n; ++k) {
      if (p[k] > 1) {
        return fail("metadata key", key, str_cat("bool value ", int{p[k]}, " is not 0 or 1"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status read_value(GgufType type, int depth, std::string_view key, GgufValue* out) {
    if (type == GgufType::kString) return read_string(&out->str, "metadata key", key, "string");
    if (type == GgufType::kArray) return read_array(depth, key, out);
    const size_t n = scalar_size(type);
    if (absl::Status st = need(n, "metadata key", key, gguf_type_name(type)); !st.ok()) return st;
    if (type == GgufType::kBool) {
      if (absl::Status st = check_bool(data_ + pos_, 1, key); !st.ok()) return st;
    }
    load_scalar(data_ + pos_, type, out);
    pos_ += n;
    return absl::OkStatus();
  }

  absl::Status read_array(int depth, std::string_view key, GgufValue* out) {
    if (depth >= kMaxArrayDepth) {
      return fail("metadata key", key,
                  str_cat("arrays nested deeper than ", kMaxArrayDepth, " levels"));
    }
    out->type = GgufType::kArray;
    if (absl::Status st = read_type(&out->elem_type, key, "array element type"); !st.ok()) {
      return st;
    }
    if (absl::Status st = read_u64(&out->count, "metadata key", key, "array count"); !st.ok()) {
      return st;
    }
    const uint64_t count = out->count;
    if (out->elem_type == GgufType::kString) {
      if (count > remaining() / kMinStringBytes) {
        return fail("metadata key", key,
                    str_cat("array of ", count, " strings cannot fit in the ", remaining(),
                            " bytes left in the file"));
      }
      out->strings.reserve(count);
      for (uint64_t k = 0; k < count; ++k) {
        std::string_view s;
        if (absl::Status st = read_string(&s, "metadata key", key, "array string"); !st.ok()) {
          return st;
        }
        out->strings.push_back(s);
      }
      return absl::OkStatus();
    }
    if (out->elem_type == GgufType::kArray) {
      if (count > remaining() / kMinArrayBytes) {
        return fail("metadata key", key,
                    str_cat("array of ", count, " arrays cannot fit in the ", remaining(),
                            " bytes left in the file"));
      }
      nested_arrays_ += count;
      if (nested_arrays_ > kMaxNestedArrays) {
        return fail("metadata key", key,
                    str_cat("more than ", kMaxNestedArrays, " nested arrays in the file"));
      }
      out->arrays.resize(count);
      for (uint64_t k = 0; k < count; ++k) {
        if (absl::Status st = read_array(depth + 1, key, &out->arrays[k]); !st.ok()) return st;
      }
      return absl::OkStatus();
    }
    const size_t elem = scalar_size(out->elem_type);
    if (count > remaining() / elem) {
      return fail("metadata key", key,
                  str_cat("array of ", count, " ", gguf_type_name(out->elem_type),
                          " needs more than the ", remaining(), " bytes left in the file"));
    }
    out->elems = data_ + pos_;
    if (out->elem_type == GgufType::kBool) {
      if (absl::Status st = check_bool(out->elems, count, key); !st.ok()) return st;
    }
    pos_ += count * elem;
    return absl::OkStatus();
  }

  absl::Status parse_alignment() {
    const GgufValue* v = f_.find("general.alignment");
    if (v == nullptr) {
      f_.alignment_ = kDefaultAlignment;
      return absl::OkStatus();
    }
    uint64_t a = 0;
    if (is_unsigned_int(v->type)) {
      a = v->u;
    } else if (is_signed_int(v->type) && v->i > 0) {
      a = static_cast<uint64_t>(v->i);
    } else if (!is_signed_int(v->type)) {
      return fail("metadata key", "general.alignment",
                  str_cat("has type ", gguf_type_name(v->type), ", expected u32"));
    }
    if (a == 0 || !std::has_single_bit(a) || a > kMaxAlignment) {
      return fail("metadata key", "general.alignment",
                  str_cat("value ", is_signed_int(v->type) ? v->i : static_cast<int64_t>(a),
                          " is not a power of two in [1, ", kMaxAlignment, "]"));
    }
    f_.alignment_ = a;
    return absl::OkStatus();
  }

  absl::Status parse_tensor_info(uint64_t index) {
    const std::string label = str_cat("tensor info #", index);
    std::string_view name;
    if (absl::Status st = read_string(&name, label, "", "name"); !st.ok()) return st;
    if (name.empty()) return fail(label, "", "empty tensor name");
    GgufTensorInfo t;
    t.name = std::string(name);
    if (f_.tensor_index_.count(t.name) != 0) return fail("tensor", name, "appears twice");

    uint32_t n_dims = 0;
    if (absl::Status st = read_u32(&n_dims, "tensor", name, "n_dims"); !st.ok()) return st;
    if (n_dims == 0 || n_dims > kMaxDims) {
      return fail("tensor", name, str_cat("n_dims ", n_dims, " is not in [1, ", kMaxDims, "]"));
    }
    uint64_t ne[kMaxDims] = {};  // GGUF order: ne[0] is the innermost (contiguous) dimension
    for (uint32_t d = 0; d < n_dims; ++d) {
      if (absl::Status st = read_u64(&ne[d], "tensor", name, "dimension"); !st.ok()) return st;
    }
    uint32_t type_id = 0;
    if (absl::Status st = read_u32(&type_id, "tensor", name, "type"); !st.ok()) return st;
    if (absl::Status st = read_u64(&t.offset, "tensor", name, "data offset"); !st.ok()) return st;

    // tessera's own ids (FP8) are not ggml types: a GGUF file holding one is as wrong as any
    // unknown id.
    const DTypeTraits* traits = is_ggml_type(type_id) ? dtype_traits(type_id) : nullptr;
    if (traits == nullptr) {
      std::string_view foreign = foreign_ggml_type_name(type_id);
      return fail("tensor", name,
                  foreign.empty() ? str_cat("unknown ggml type id ", type_id)
                                  : str_cat("ggml type ", foreign, " (id ", type_id,
                                            ") is not supported by tessera"));
    }
    t.dtype = static_cast<DType>(type_id);

    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      if (ne[d] == 0 || ne[d] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return fail("tensor", name, str_cat("dimension ", d, " has invalid size ", ne[d]));
      }
      if (__builtin_mul_overflow(n_elements, ne[d], &n_elements) ||
          n_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return fail("tensor", name, "element count overflows 64 bits");
      }
    }
    if (ne[0] % traits->block_elems != 0) {
      return fail("tensor", name,
                  str_cat("row size ", ne[0], " is not a multiple of the ", traits->name,
                          " block size ", traits->block_elems));
    }
    if (__builtin_mul_overflow(n_elements / traits->block_elems, traits->block_bytes, &t.nbytes)) {
      return fail("tensor", name, "byte size overflows 64 bits");
    }
    if (t.offset % f_.alignment_ != 0) {
      return fail(
          "tensor", name,
          str_cat("data offset ", t.offset, " is not a multiple of the alignment ", f_.alignment_));
    }
    t.n_elements = static_cast<int64_t>(n_elements);
    t.shape.reserve(n_dims);
    for (uint32_t d = n_dims; d-- > 0;) t.shape.push_back(static_cast<int64_t>(ne[d]));
    f_.tensor_index_.emplace(t.name, f_.tensors_.size());
    f_.tensors_.push_back(std::move(t));
    return absl::OkStatus();
  }

  // Tensors must lie in the file.
  absl::Status check_tensor_bounds(const GgufTensorInfo& t) const {
    const uint64_t avail = size_ - f_.data_offset_;
    if (t.offset > avail || t.nbytes > avail - t.offset) {
      return fail("tensor", t.name,
                  str_cat("data [", t.offset, ", +", t.nbytes, ") at data section offset ",
                          f_.data_offset_, " runs past the end of the file (", size_, " bytes)"));
    }
    return absl::OkStatus();
  }

  // No two tensors share a byte (the format does not say they may not, but llama.cpp's writers
  // never do it, and a header that does is corrupt or hostile: two weights read one another's
  // bytes).
  absl::Status check_no_shared_bytes() const {
    std::vector<ByteRange> ranges;
    ranges.reserve(f_.tensors_.size());
    for (const GgufTensorInfo& t : f_.tensors_) ranges.push_back({t.offset, t.offset + t.nbytes});
    const std::optional<std::pair<size_t, size_t>> overlap = find_overlap(ranges);
    if (!overlap.has_value()) return absl::OkStatus();
    const GgufTensorInfo& a = f_.tensors_[overlap->first];
    const GgufTensorInfo& b = f_.tensors_[overlap->second];
    return fail("tensor", b.name,
                str_cat("data [", b.offset, ", ", b.offset + b.nbytes, ") overlaps tensor '",
                        a.name, "' at [", a.offset, ", ", a.offset + a.nbytes,
                        "): tensors must not share bytes"));
  }

  GgufFile& f_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  uint64_t tensor_count_ = 0;
  uint64_t kv_count_ = 0;
  uint64_t nested_arrays_ = 0;  // across the whole file, see kMaxNestedArrays
};

GgufFile::~GgufFile() = default;

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> mapped = MappedFile::open(path);
  if (!mapped.ok()) return mapped.status();
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  f->file_ = *std::move(mapped);
  GgufParser parser(*f);
  if (absl::Status st = parser.parse(); !st.ok()) return st;
  return f;
}

size_t GgufFile::file_size() const {
  return file_->size();
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].value;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

std::span<const uint8_t> GgufFile::tensor_bytes(const GgufTensorInfo& t) const {
  return {file_->data() + data_offset_ + t.offset, static_cast<size_t>(t.nbytes)};
}

absl::StatusOr<const GgufValue*> GgufFile::lookup(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) {
    return absl::NotFoundError(str_cat(path_, ": metadata key '", key, "' is missing"));
  }
  return v;
}

absl::Status GgufFile::type_error(std::string_view key, const GgufValue& v,
                                  std::string_view want) const {
  std::string actual(gguf_type_name(v.type));
  if (v.type == GgufType::kArray) {
    actual = str_cat("array of ", gguf_type_name(v.elem_type));
  }
  return absl::InvalidArgumentError(
      str_cat(path_, ": metadata key '", key, "' has type ", actual, ", expected ", want));
}

namespace {

// The value of an integer-typed scalar as a signed/unsigned pair, for range checks.
struct IntValue {
  bool negative;
  uint64_t magnitude_or_value;  // the value itself when not negative
  int64_t as_signed;
};

IntValue int_value(const GgufValue& v) {
  if (is_unsigned_int(v.type)) return {false, v.u, static_cast<int64_t>(v.u)};
  return {v.i < 0, static_cast<uint64_t>(v.i), v.i};
}

template <typename T>
bool int_fits(const IntValue& x) {
  if (x.negative) {
    return std::is_signed_v<T> &&
           x.as_signed >= static_cast<int64_t>(std::numeric_limits<T>::min());
  }
  return x.magnitude_or_value <= static_cast<uint64_t>(std::numeric_limits<T>::max());
}

// Range-checks an integer-typed value into T.
template <typename T>
absl::StatusOr<T> narrow_int(const std::string& path, std::string_view key, const GgufValue& v,
                             std::string_view want) {
  const IntValue x = int_value(v);
  if (!int_fits<T>(x)) {
    return absl::OutOfRangeError(
        str_cat(path, ": metadata key '", key, "' value ",
                x.negative ? str_cat(x.as_signed) : str_cat(x.magnitude_or_value),
                " does not fit in ", want));
  }
  return x.negative ? static_cast<T>(x.as_signed) : static_cast<T>(x.magnitude_or_value);
}

}  // namespace

absl::StatusOr<const GgufValue*> GgufFile::lookup_int(std::string_view key,
                                                      std::string_view want) const {
  absl::StatusOr<const GgufValue*> v = lookup(key);
  if (!v.ok()) return v.status();
  if (!is_unsigned_int((*v)->type) && !is_signed_int((*v)->type)) {
    return type_error(key, **v, str_cat("an integer (", want, ")"));
  }
  return v;
}

absl::StatusOr<uint32_t> GgufFile::get_u32(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = lookup_int(key, "u32");
  if (!v.ok()) return v.status();
  return narrow_int<uint32_t>(path_, key, **v, "u32");
}

absl::StatusOr<int32_t> GgufFile::get_i32(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = lookup_int(key, "i32");
  if (!v.ok()) return v.status();
  return narrow_int<int32_t>(path_, key, **v, "i32");
}

absl::StatusOr<uint64_t> GgufFile::get_u64(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = lookup_int(key, "u64");
  if (!v.ok()) return v.status();
  return narrow_int<uint64_t>(path_, key, **v, "u64");
}

absl::StatusOr<int64_t> GgufFile::get_i64(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = lookup_int(key, "i64");
  if (!v.ok()) return v.status();
  return narrow_int<int64_t>(path_, key, **v, "i64");
}

absl::StatusOr<std::string> GgufFile::get_string(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = lookup(key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufType::kString) return type_error(key, **v, "string");
  return std::string((*v)->str);
}

absl::StatusOr<bool> GgufFile::get_bool(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = lookup(key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufType::kBool) return type_error(key, **v, "bool");
  return (*v)->u != 0;
}

absl::StatusOr<double> GgufFile::get_f64(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = lookup(key);
  if (!v.ok()) return v.status();
  if (!is_float((*v)->type)) return type_error(key, **v, "f32 or f64");
  return (*v)->f;
}

absl::StatusOr<float> GgufFile::get_f32(std::string_view key) const {
  absl::StatusOr<double> d = get_f64(key);
  if (!d.ok()) return d.status();
  return static_cast<float>(*d);
}

absl::StatusOr<uint64_t> GgufFile::get_array_size(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = lookup(key);
  if (!v.ok()) return v.status();
  if ((*v)->type != GgufType::kArray) return type_error(key, **v, "array");
  return (*v)->count;
}

absl::StatusOr<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = lookup(key);
  if (!v.ok()) return v.status();
  const GgufValue& a = **v;
  if (a.type != GgufType::kArray || a.elem_type != GgufType::kString) {
    return type_error(key, a, "array of string");
  }
  std::vector<std::string> out;
  out.reserve(a.strings.size());
  for (std::string_view s : a.strings) out.emplace_back(s);
  return out;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = lookup(key);
  if (!v.ok()) return v.status();
  const GgufValue& a = **v;
  if (a.type != GgufType::kArray ||
      (!is_unsigned_int(a.elem_type) && !is_signed_int(a.elem_type))) {
    return type_error(key, a, "array of integers");
  }
  const size_t elem = scalar_size(a.elem_type);
  std::vector<int64_t> out;
  out.reserve(a.count);
  for (uint64_t k = 0; k < a.count; ++k) {
    GgufValue x;
    load_scalar(a.elems + k * elem, a.elem_type, &x);
    if (is_unsigned_int(a.elem_type)) {
      if (x.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return absl::OutOfRangeError(str_cat(path_, ": metadata key '", key, "' element ", k,
                                             " value ", x.u, " does not fit in i64"));
      }
      out.push_back(static_cast<int64_t>(x.u));
    } else {
      out.push_back(x.i);
    }
  }
  return out;
}

absl::StatusOr<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  absl::StatusOr<const GgufValue*> v = lookup(key);
  if (!v.ok()) return v.status();
  const GgufValue& a = **v;
  if (a.type != GgufType::kArray || !is_float(a.elem_type)) {
    return type_error(key, a, "array of f32 or f64");
  }
  const size_t elem = scalar_size(a.elem_type);
  std::vector<float> out;
  out.reserve(a.count);
  for (uint64_t k = 0; k < a.count; ++k) {
    GgufValue x;
    load_scalar(a.elems + k * elem, a.elem_type, &x);
    out.push_back(static_cast<float>(x.f));
  }
  return out;
}

}  // namespace tessera
