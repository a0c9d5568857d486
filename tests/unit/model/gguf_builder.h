// Test helpers: a GGUF writer that can produce valid files and hand-crafted hostile ones, a
// temporary directory, and small byte/float encoders.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model_io/gguf_file.h"

// `lhs = *expr`, failing the test (and returning) when the StatusOr is not OK.
#define TESSERA_ASSERT_OK_AND_ASSIGN(lhs, expr) \
  TESSERA_ASSERT_OK_AND_ASSIGN_IMPL(TESSERA_TEST_CONCAT(statusor_, __LINE__), lhs, expr)
#define TESSERA_TEST_CONCAT_INNER(a, b) a##b
#define TESSERA_TEST_CONCAT(a, b) TESSERA_TEST_CONCAT_INNER(a, b)
#define TESSERA_ASSERT_OK_AND_ASSIGN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                      \
  ASSERT_TRUE(tmp.ok()) << tmp.status();                  \
  lhs = *std::move(tmp)

namespace tessera::testing {

// A fresh directory under the gtest temp dir, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("tessera_model_io_" + std::to_string(::getpid()) + "_" +
            std::to_string(counter.fetch_add(1)));
    std::filesystem::create_directories(dir_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string path() const { return dir_.string(); }
  std::string path(std::string_view name) const { return (dir_ / name).string(); }

  // Writes `bytes` to <dir>/<name> and returns the file's path.
  std::string write(std::string_view name, std::string_view bytes) const {
    const std::string p = path(name);
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << "cannot write " << p;
    return p;
  }

 private:
  std::filesystem::path dir_;
};

// Little-endian encoders.
inline void put_u8(std::string& s, uint8_t v) {
  s.push_back(static_cast<char>(v));
}
template <typename T>
inline void put_le(std::string& s, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  s.append(b, sizeof(T));
}
inline void put_u32(std::string& s, uint32_t v) {
  put_le(s, v);
}
inline void put_u64(std::string& s, uint64_t v) {
  put_le(s, v);
}
inline void put_gguf_string(std::string& s, std::string_view v) {
  put_u64(s, v.size());
  s.append(v);
}

inline std::string f32_bytes(const std::vector<float>& v) {
  std::string s;
  for (float x : v) put_le(s, x);
  return s;
}

// Builds a GGUF file in memory. Tensors added with tensor() get their data laid out at aligned
// offsets; raw_tensor_info() and the count/version overrides exist to write hostile files.
class GgufBuilder {
 public:
  GgufBuilder& magic(uint32_t m) {
    magic_ = m;
    return *this;
  }
  GgufBuilder& version(uint32_t v) {
    version_ = v;
    return *this;
  }
  // Layout alignment for tensor data; add the general.alignment key separately.
  GgufBuilder& layout_alignment(uint64_t a) {
    alignment_ = a;
    return *this;
  }
  GgufBuilder& kv_count_override(uint64_t n) {
    kv_count_override_ = n;
    has_kv_override_ = true;
    return *this;
  }
  GgufBuilder& tensor_count_override(uint64_t n) {
    tensor_count_override_ = n;
    has_tensor_override_ = true;
    return *this;
  }

  // A key with a value of `type` whose encoded payload is `payload`.
  GgufBuilder& kv_raw(std::string_view key, GgufType type, std::string_view payload) {
    put_gguf_string(kv_, key);
    put_u32(kv_, static_cast<uint32_t>(type));
    kv_.append(payload);
    ++n_kv_;
    return *this;
  }
  template <typename T>
  GgufBuilder& kv_scalar(std::string_view key, GgufType type, T v) {
    std::string p;
    put_le(p, v);
    return kv_raw(key, type, p);
  }
  GgufBuilder& kv_u8(std::string_view k, uint8_t v) { return kv_scalar(k, GgufType::kU8, v); }
  GgufBuilder& kv_i8(std::string_view k, int8_t v) { return kv_scalar(k, GgufType::kI8, v); }
  GgufBuilder& kv_u16(std::string_view k, uint16_t v) { return kv_scalar(k, GgufType::kU16, v); }
  GgufBuilder& kv_i16(std::string_view k, int16_t v) { return kv_scalar(k, GgufType::kI16, v); }
  GgufBuilder& kv_u32(std::string_view k, uint32_t v) { return kv_scalar(k, GgufType::kU32, v); }
  GgufBuilder& kv_i32(std::string_view k, int32_t v) { return kv_scalar(k, GgufType::kI32, v); }
  GgufBuilder& kv_f32(std::string_view k, float v) { return kv_scalar(k, GgufType::kF32, v); }
  GgufBuilder& kv_u64(std::string_view k, uint64_t v) { return kv_scalar(k, GgufType::kU64, v); }
  GgufBuilder& kv_i64(std::string_view k, int64_t v) { return kv_scalar(k, GgufType::kI64, v); }
  GgufBuilder& kv_f64(std::string_view k, double v) { return kv_scalar(k, GgufType::kF64, v); }
  GgufBuilder& kv_bool(std::string_view k, bool v) {
    return kv_scalar(k, GgufType::kBool, static_cast<uint8_t>(v ? 1 : 0));
  }
  GgufBuilder& kv_string(std::string_view k, std::string_view v) {
    std::string p;
    put_gguf_string(p, v);
    return kv_raw(k, GgufType::kString, p);
  }
  // Array payload: element type, count, then `elems` (already encoded).
  static std::string array_payload(GgufType elem, uint64_t count, std::string_view elems) {
    std::string p;
    put_u32(p, static_cast<uint32_t>(elem));
    put_u64(p, count);
    p.append(elems);
    return p;
  }
  GgufBuilder& kv_string_array(std::string_view k, const std::vector<std::string>& v) {
    std::string elems;
    for (const std::string& s : v) put_gguf_string(elems, s);
    return kv_raw(k, GgufType::kArray, array_payload(GgufType::kString, v.size(), elems));
  }
  GgufBuilder& kv_i32_array(std::string_view k, const std::vector<int32_t>& v) {
    std::string elems;
    for (int32_t x : v) put_le(elems, x);
    return kv_raw(k, GgufType::kArray, array_payload(GgufType::kI32, v.size(), elems));
  }
  GgufBuilder& kv_f32_array(std::string_view k, const std::vector<float>& v) {
    return kv_raw(k, GgufType::kArray, array_payload(GgufType::kF32, v.size(), f32_bytes(v)));
  }

  // A tensor with data. `ne` is in GGUF order (ne[0] innermost); `data` must have the right size
  // for a valid file.
  GgufBuilder& tensor(std::string_view name, uint32_t ggml_type, std::vector<uint64_t> ne,
                      std::string_view data) {
    while (data_.size() % alignment_ != 0) data_.push_back('\0');
    raw_tensor_info(name, ggml_type, ne, data_.size());
    data_.append(data);
    return *this;
  }
  GgufBuilder& f32_tensor(std::string_view name, std::vector<uint64_t> ne,
                          const std::vector<float>& v) {
    return tensor(name, 0, std::move(ne), f32_bytes(v));
  }
  // Only the tensor info, with an explicit offset (from the data section start).
  GgufBuilder& raw_tensor_info(std::string_view name, uint32_t ggml_type,
                               const std::vector<uint64_t>& ne, uint64_t offset) {
    put_gguf_string(infos_, name);
    put_u32(infos_, static_cast<uint32_t>(ne.size()));
    for (uint64_t d : ne) put_u64(infos_, d);
    put_u32(infos_, ggml_type);
    put_u64(infos_, offset);
    ++n_tensors_;
    return *this;
  }
  // Extra bytes appended after the data section.
  GgufBuilder& trailing(std::string_view bytes) {
    trailing_.append(bytes);
    return *this;
  }

  std::string build() const {
    std::string s;
    put_u32(s, magic_);
    put_u32(s, version_);
    put_u64(s, has_tensor_override_ ? tensor_count_override_ : n_tensors_);
    put_u64(s, has_kv_override_ ? kv_count_override_ : n_kv_);
    s += kv_;
    s += infos_;
    if (n_tensors_ > 0 || !data_.empty()) {
      while (s.size() % alignment_ != 0) s.push_back('\0');
    }
    s += data_;
    s += trailing_;
    return s;
  }

 private:
  uint32_t magic_ = 0x46554747;  // "GGUF"
  uint32_t version_ = 3;
  uint64_t alignment_ = 32;
  uint64_t kv_count_override_ = 0, tensor_count_override_ = 0;
  bool has_kv_override_ = false, has_tensor_override_ = false;
  uint64_t n_kv_ = 0, n_tensors_ = 0;
  std::string kv_, infos_, data_, trailing_;
};

// Shape of a tiny llama for tests.
struct TinyLlama {
  uint32_t layers = 1;
  uint32_t hidden = 8;
  uint32_t ffn = 16;
  uint32_t heads = 2;
  uint32_t kv_heads = 1;
  uint32_t vocab = 4;
  uint32_t context = 64;
  bool tied = true;
};

// The llama.* metadata of `p` (no tensors).
inline GgufBuilder& add_llama_metadata(GgufBuilder& b, const TinyLlama& p) {
  b.kv_string("general.architecture", "llama")
      .kv_string("general.name", "tiny")
      .kv_u32("llama.block_count", p.layers)
      .kv_u32("llama.context_length", p.context)
      .kv_u32("llama.embedding_length", p.hidden)
      .kv_u32("llama.feed_forward_length", p.ffn)
      .kv_u32("llama.attention.head_count", p.heads)
      .kv_u32("llama.attention.head_count_kv", p.kv_heads)
      .kv_f32("llama.rope.freq_base", 10000.0f)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .kv_u32("llama.vocab_size", p.vocab);
  return b;
}

// A complete F32 tiny llama: every tensor filled with value = tensor_index * 1000 + element index.
inline GgufBuilder tiny_llama_gguf(const TinyLlama& p) {
  GgufBuilder b;
  add_llama_metadata(b, p);
  int tensor_index = 0;
  auto add = [&](const std::string& name, std::vector<uint64_t> ne) {
    uint64_t n = 1;
    for (uint64_t d : ne) n *= d;
    std::vector<float> v(n);
    for (uint64_t i = 0; i < n; ++i) v[i] = static_cast<float>(tensor_index * 1000 + i);
    ++tensor_index;
    b.f32_tensor(name, std::move(ne), v);
  };
  const uint64_t head_dim = p.hidden / p.heads;
  add("token_embd.weight", {p.hidden, p.vocab});
  for (uint32_t l = 0; l < p.layers; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    add(blk + "attn_norm.weight", {p.hidden});
    add(blk + "attn_q.weight", {p.hidden, p.heads * head_dim});
    add(blk + "attn_k.weight", {p.hidden, p.kv_heads * head_dim});
    add(blk + "attn_v.weight", {p.hidden, p.kv_heads * head_dim});
    add(blk + "attn_output.weight", {p.heads * head_dim, p.hidden});
    add(blk + "ffn_norm.weight", {p.hidden});
    add(blk + "ffn_gate.weight", {p.hidden, p.ffn});
    add(blk + "ffn_up.weight", {p.hidden, p.ffn});
    add(blk + "ffn_down.weight", {p.ffn, p.hidden});
  }
  add("output_norm.weight", {p.hidden});
  if (!p.tied) add("output.weight", {p.hidden, p.vocab});
  return b;
}

}  // namespace tessera::testing
