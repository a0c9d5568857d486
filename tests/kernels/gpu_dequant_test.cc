// Weights converted on the GPU (kernels/dequant_gpu.h, GpuBackend::load_weight's device path)
// against the host, into each 16-bit destination type (bf16, fp16: a backend of that compute
// dtype): for every type the device converts, random stored blocks must come out as
// runtime/model_io/dequant.h's fp32 rounded to the destination type, bit for bit (the kernels repeat
// the host's operations without fused multiply-adds, and both roundings are to nearest even), over
// row counts, chunkings that split rows, the q/k row permutation and row-range destinations;
// load_weight must give what the host path gives (read_f32, uploaded and rounded on the device)
// for every type, across several staging chunks, and for every tensor of the default model; and
// it must refuse a weight that is not finite once converted (NaN or inf stored, or a finite value
// past fp16's range), naming the tensor and the first such element in stored order, on the device
// path and the host path alike, and a model with a NaN planted in one weight must fail to load.
// Skips when no GPU is visible.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/dequant_gpu.h"
#include "kernels/element_dispatch.h"
#include "kernels/gpu_backend.h"
#include "tests/kernels/suite_gpu_backend.h"
#include "runtime/model_io/dequant.h"
#include "runtime/model_io/gguf_weights.h"
#include "base/half.h"
#include "runtime/model_io/weight_source.h"
#include "runtime/model_instance.h"
#include "runtime/model_io/gguf_file.h"
#include "tests/unit/runtime/planted_weights.h"
#include "base/str_cat.h"

namespace tessera {
namespace {

// Every dtype gpu::dequantizes_on_device takes.
constexpr DType kDeviceTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0,
                                  DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                                  DType::kQ2_K, DType::kQ3_K, DType::kQ4_K, DType::kQ5_K,
                                  DType::kQ6_K, DType::kQ8_K};
// Dtypes it leaves to the host path (Q8_1: not dequantizable at all).
constexpr DType kHostTypes[] = {DType::kF64, DType::kI8,  DType::kI16,
                                DType::kI32, DType::kI64, DType::kQ8_1};

constexpr uint16_t kPoison = 0xffff;  // a bf16 and fp16 NaN: what an unwritten element still holds

const DTypeTraits& traits_of(DType t) {
  return *dtype_traits(static_cast<uint32_t>(t));
}

uint16_t random_finite_half(std::mt19937& rng) {
  uint16_t h = static_cast<uint16_t>(rng());
  if (((h >> 10) & 0x1f) == 0x1f) h &= ~uint16_t{0x4000};  // inf/NaN -> a finite exponent
  return h;
}

// Random bits of a float format whose exponent field (`exp_bits` wide at `exp_shift`) is moved
// into [lo, lo + span): a finite value of bounded magnitude.
template <typename U>
U with_exponent_in(U v, int exp_shift, U exp_mask, unsigned lo, unsigned span) {
  const unsigned e = static_cast<unsigned>((v >> exp_shift) & exp_mask);
  return static_cast<U>((v & ~(exp_mask << exp_shift)) | (U(lo + e % span) << exp_shift));
}

// A random half below 8 in magnitude (exponent field <= 17): block scales that keep every
// dequantized value of every type inside fp16's range (the largest product, Q6_K's
// 8 * 127 * 32, is 32512).
uint16_t random_small_half(std::mt19937& rng) {
  return with_exponent_in<uint16_t>(static_cast<uint16_t>(rng()), 10, 0x1f, 0, 18);
}

void put_u16(uint8_t* p, uint16_t v) {
  std::memcpy(p, &v, 2);
}

// Byte offsets of each block's fp16 scale fields (dequant.cc's layouts).
std::vector<int> half_fields(DType type) {
  switch (type) {
    case DType::kQ4_0:
    case DType::kQ5_0:
    case DType::kQ8_0:
      return {0};
    case DType::kQ4_1:
    case DType::kQ5_1:
    case DType::kQ4_K:
    case DType::kQ5_K:
      return {0, 2};
    case DType::kQ2_K:
      return {80, 82};
    case DType::kQ3_K:
      return {108};
    case DType::kQ6_K:
      return {208};
    default:
      return {};
  }
}

// Random stored bytes of `n_blocks` blocks of `type`. Quants, packed scales and masks are random
// bits; float fields are random finite values (fp16 scales over the whole finite range,
// subnormals and signed zeros included), so that no NaN arises: a NaN's bits after rounding
// depend on the vendor's conversion, not on the dequantization. Plain F32 starts with
// rounding cases (ties to even both ways, overflow to inf, subnormals).
// `loadable`: every value also converts to a finite fp16 and bf16 (bounded exponents, scales
// below 8, no rounding cases), as load_weight's check requires.
std::vector<uint8_t> random_blocks(DType type, int64_t n_blocks, std::mt19937& rng,
                                   bool loadable = false) {
  const DTypeTraits& t = traits_of(type);
  std::vector<uint8_t> b(static_cast<size_t>(n_blocks) * t.block_bytes);
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
  for (int64_t k = 0; k < n_blocks; ++k) {
    uint8_t* blk = b.data() + k * t.block_bytes;
    switch (type) {
      case DType::kF32: {
        uint32_t v;
        std::memcpy(&v, blk, 4);
        if (((v >> 23) & 0xff) == 0xff) v &= ~uint32_t{0x40000000};
        if (loadable) v = with_exponent_in<uint32_t>(v, 23, 0xff, 100, 36);  // below 2^9
        std::memcpy(blk, &v, 4);
        break;
      }
      case DType::kF16:
        put_u16(blk, random_finite_half(rng));
        break;
      case DType::kBF16: {
        uint16_t v;
        std::memcpy(&v, blk, 2);
        if (((v >> 7) & 0xff) == 0xff) v &= ~uint16_t{0x4000};
        if (loadable) v = with_exponent_in<uint16_t>(v, 7, 0xff, 100, 36);
        put_u16(blk, v);
        break;
      }
      case DType::kQ8_K: {
        const float d = half_to_float(loadable ? random_small_half(rng) : random_finite_half(rng));
        std::memcpy(blk, &d, 4);
        break;
      }
      default:
        for (int off : half_fields(type)) {
          put_u16(blk + off, loadable ? random_small_half(rng) : random_finite_half(rng));
        }
    }
  }
  if (type == DType::kF32 && !loadable) {
    // bf16's: ties to even both ways, overflow to inf, subnormals. fp16's: ties to even both ways
    // (1 + 2^-11, 1 + 3 * 2^-11), the overflow boundary (65520 -> inf, just below -> 65504), ties
    // at its subnormal end (2^-25 -> 0, 3 * 2^-26 -> 2^-24), its smallest normal.
    const uint32_t cases[] = {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0xff7fffffu, 0x00000001u,
                              0x00008000u, 0x00018000u, 0x807fffffu, 0x80000000u, 0x7f800000u,
                              0x3f801000u, 0x3f803000u, 0x477ff000u, 0xc77fefffu, 0x33000000u,
                              0x33400000u, 0x38800000u};
    const size_t n = std::min(std::size(cases), static_cast<size_t>(n_blocks));
    std::memcpy(b.data(), cases, n * 4);
  }
  return b;
}

// Stores `v` as element `i` of a host-only plain type (F64 or a signed integer type).
void put_host_value(DType type, std::vector<uint8_t>& b, int64_t i, double v) {
  const size_t size = traits_of(type).block_bytes;
  uint8_t* p = b.data() + static_cast<size_t>(i) * size;
  switch (type) {
    case DType::kF64: std::memcpy(p, &v, 8); break;
    case DType::kI8: { const int8_t x = static_cast<int8_t>(v); std::memcpy(p, &x, 1); break; }
    case DType::kI16: { const int16_t x = static_cast<int16_t>(v); std::memcpy(p, &x, 2); break; }
    case DType::kI32: { const int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); break; }
    case DType::kI64: { const int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); break; }
    default: ADD_FAILURE() << "not a host-only plain type: " << dtype_name(type);
  }
}

// Random doubles in [-3, 3) or integers in fp16's range (every value loads in either dtype) for
// the host-only plain types.
std::vector<uint8_t> random_host_type_bytes(DType type, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> b(static_cast<size_t>(n) * traits_of(type).block_bytes);
  if (type == DType::kF64) {
    std::uniform_real_distribution<double> u(-3.0, 3.0);
    for (int64_t i = 0; i < n; ++i) put_host_value(type, b, i, u(rng));
  } else {
    const int limit = type == DType::kI8 ? 127 : 30000;
    std::uniform_int_distribution<int> u(-limit, limit);
    for (int64_t i = 0; i < n; ++i) put_host_value(type, b, i, u(rng));
  }
  return b;
}

// The host's fp32 of a stored [rows, row_elems] tensor: dequantize_f32 row by row, stored row s
// into row qk_unpermuted_row(s, head_dim) when head_dim > 0 (GgufWeights::read_f32's recipe).
absl::Status host_f32(DType type, const std::vector<uint8_t>& bytes, int64_t rows,
                      int64_t row_elems, int64_t head_dim, std::span<float> out) {
  const size_t row_bytes = bytes.size() / static_cast<size_t>(rows);
  for (int64_t s = 0; s < rows; ++s) {
    const int64_t r = head_dim > 0 ? qk_unpermuted_row(s, head_dim) : s;
    absl::Status st =
        dequantize_f32(type, std::span<const uint8_t>(bytes).subspan(s * row_bytes, row_bytes),
                       out.subspan(r * row_elems, row_elems));
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

// Index and values of the first difference, and how many there are.
struct Mismatch {
  int64_t count = 0;
  int64_t first = -1;
  uint16_t got = 0, want = 0;
};

Mismatch compare_bits(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want) {
  Mismatch m;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    if (got[i] == want[i]) continue;
    if (m.count++ == 0) {
      m.first = static_cast<int64_t>(i);
      m.got = got[i];
      m.want = want[i];
    }
  }
  if (got.size() != want.size()) ++m.count;
  return m;
}

std::string describe(const Mismatch& m, int64_t row_elems) {
  return str_cat(m.count, " elements differ; first at row ", m.first / row_elems, " column ",
                 m.first % row_elems, ": got 0x", absl::Hex(m.got), ", want 0x",
                 absl::Hex(m.want));
}

// A WeightSource over tensors held in memory in any dtype, with GGUF's read_f32 (dequantize_f32,
// q/k rows un-permuted when a tensor has a qk_head_dim), counting read_f32 calls so that a test
// can tell which path load_weight took.
class StoredWeights final : public WeightSource {
 public:
  void add(const std::string& name, DType type, std::vector<int64_t> shape,
           std::vector<uint8_t> bytes, int64_t qk_head_dim = 0) {
    tensors_[name] =
        Stored{TensorInfo{name, type, std::move(shape)}, std::move(bytes), qk_head_dim};
  }
  int read_f32_calls() const { return read_f32_calls_; }

  const ModelConfig& config() const override { return config_; }
  const std::string& path() const override { return path_; }
  std::vector<TensorInfo> tensors() const override {
    std::vector<TensorInfo> out;
    for (const auto& [name, t] : tensors_) out.push_back(t.info);
    return out;
  }
  bool has(std::string_view name) const override { return tensors_.count(std::string(name)) > 0; }
  absl::StatusOr<RawTensor> raw(std::string_view name) const override {
    auto it = tensors_.find(std::string(name));
    if (it == tensors_.end()) return absl::NotFoundError(str_cat("no tensor ", name));
    RawTensor r;
    r.info = it->second.info;
    r.data = it->second.bytes.data();
    r.nbytes = it->second.bytes.size();
    r.qk_permuted = it->second.qk_head_dim > 0;
    r.qk_head_dim = it->second.qk_head_dim;
    return r;
  }
  absl::Status read_f32(std::string_view name, std::span<const int64_t> shape,
                        std::span<float> out) const override {
    ++read_f32_calls_;
    auto it = tensors_.find(std::string(name));
    if (it == tensors_.end()) return absl::NotFoundError(str_cat("no tensor ", name));
    const Stored& t = it->second;
    int64_t n = 1;
    for (int64_t d : t.info.shape) n *= d;
    if (!std::equal(shape.begin(), shape.end(), t.info.shape.begin(), t.info.shape.end()) ||
        out.size() != static_cast<size_t>(n)) {
      return absl::InvalidArgumentError(str_cat("shape mismatch for ", name));
    }
    // A vector is one row; a matrix's rows are its first dimension.
    const int64_t rows = t.info.shape.size() < 2 ? 1 : t.info.shape[0];
    return host_f32(t.info.dtype, t.bytes, rows, n / rows, t.qk_head_dim, out);
  }

 private:
  struct Stored {
    TensorInfo info;
    std::vector<uint8_t> bytes;
    int64_t qk_head_dim = 0;
  };
  ModelConfig config_;
  std::string path_ = "<stored weights>";
  std::map<std::string, Stored> tensors_;
  mutable int read_f32_calls_ = 0;
};

// Forwards to another source, counting read_f32 calls.
class CountingWeights final : public WeightSource {
 public:
  explicit CountingWeights(const WeightSource& inner) : inner_(inner) {}
  int read_f32_calls() const { return read_f32_calls_; }

  const ModelConfig& config() const override { return inner_.config(); }
  const std::string& path() const override { return inner_.path(); }
  std::vector<TensorInfo> tensors() const override { return inner_.tensors(); }
  bool has(std::string_view name) const override { return inner_.has(name); }
  absl::StatusOr<RawTensor> raw(std::string_view name) const override { return inner_.raw(name); }
  absl::Status read_f32(std::string_view name, std::span<const int64_t> shape,
                        std::span<float> out) const override {
    ++read_f32_calls_;
    return inner_.read_f32(name, shape, out);
  }

 private:
  const WeightSource& inner_;
  mutable int read_f32_calls_ = 0;
};

// Parameter: the destination's dtype, the backend's compute dtype.
class GpuDequantTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (GpuBackend::device_count() == 0) GTEST_SKIP() << "no GPU visible";
    dtype_ = GetParam();
    GpuBackend* backend = suite_gpu_backend<GpuDequantTest>(dtype_);
    ASSERT_NE(backend, nullptr);
    gpu_ = backend;
  }

  // f rounded to the destination type (to nearest even), as bits.
  uint16_t to_bits(float f) const {
    return dtype_ == DType::kF16 ? float_to_half(f) : float_to_bf16(f);
  }

  // gpu::dequantize into `dst` (the destination type) with the target's other fields.
  gpuError_t dequantize(DType type, const uint8_t* src, int64_t first_block, int64_t n_blocks,
                        void* dst, int64_t row_elems, int64_t qk_head_dim) {
    return gpu::launch_as(dtype_, [&]<typename T>() {
      const gpu::DequantTarget<T> t{static_cast<T*>(dst), row_elems, qk_head_dim};
      return gpu::dequantize(type, src, first_block, n_blocks, t, gpu_->stream());
    });
  }

  // A device buffer of `bytes`, every byte 0xff (16-bit elements read kPoison).
  DeviceBuffer poisoned(size_t bytes) {
    auto buf = gpu_->allocate(bytes);
    EXPECT_TRUE(buf.ok()) << buf.status();
    if (!buf.ok()) return DeviceBuffer();
    EXPECT_EQ(gpuMemsetAsync(buf->data(), 0xff, bytes, gpu_->stream()), gpuSuccess);
    EXPECT_EQ(gpuStreamSynchronize(gpu_->stream()), gpuSuccess);
    return *std::move(buf);
  }

  DeviceBuffer upload_bytes(const std::vector<uint8_t>& bytes) {
    auto buf = gpu_->allocate(bytes.size());
    EXPECT_TRUE(buf.ok()) << buf.status();
    if (!buf.ok()) return DeviceBuffer();
    EXPECT_EQ(gpuMemcpyAsync(buf->data(), bytes.data(), bytes.size(), gpuMemcpyHostToDevice,
                             gpu_->stream()),
              gpuSuccess);
    EXPECT_EQ(gpuStreamSynchronize(gpu_->stream()), gpuSuccess);
    return *std::move(buf);
  }

  std::vector<uint16_t> download_bits(const void* data, int64_t n) {
    std::vector<uint16_t> out(static_cast<size_t>(n));
    gpu_->copy_to_host(out.data(), data, out.size() * 2);
    EXPECT_TRUE(gpu_->synchronize().ok());
    return out;
  }

  // What the host path of load_weight leaves in `dst` (16-bit): read_f32, uploaded and rounded on
  // the device.
  void load_on_host_path(const WeightSource& w, const std::string& name, const Tensor& dst) {
    std::vector<float> f(static_cast<size_t>(dst.numel()));
    const absl::Status s =
        w.read_f32(name, std::span<const int64_t>(dst.shape.data(), dst.rank), f);
    ASSERT_TRUE(s.ok()) << s;
    gpu_->upload_f32(f, dst);
    ASSERT_TRUE(gpu_->synchronize().ok());
  }

  GpuBackend* gpu_ = nullptr;
  DType dtype_ = DType::kBF16;
  std::mt19937 rng_{20240611};
};

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuDequantTest, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return info.param == DType::kF16 ? "f16" : "bf16";
                         });

TEST_P(GpuDequantTest, CoversTheBlockTypesAndLeavesTheRest) {
  for (DType t : kDeviceTypes) EXPECT_TRUE(gpu::dequantizes_on_device(t)) << dtype_name(t);
  for (DType t : kHostTypes) {
    EXPECT_FALSE(gpu::dequantizes_on_device(t)) << dtype_name(t);
    EXPECT_EQ(dequantize(t, nullptr, 0, 1, nullptr, 32, 0), gpuErrorInvalidValue) << dtype_name(t);
  }
  // A row length that is not a whole number of blocks is refused, not half-converted.
  EXPECT_EQ(dequantize(DType::kQ4_0, nullptr, 0, 1, nullptr, 48, 0), gpuErrorInvalidValue);
}

// The kernels themselves, type by type: [rows, blocks_per_row blocks] written into the middle of
// a poisoned buffer (a row range of a fused weight), in one launch or in chunks of 5 blocks
// (which split rows), with and without the q/k row permutation.
TEST_P(GpuDequantTest, EveryTypeMatchesHostDequantBitForBit) {
  constexpr int64_t kRowsBefore = 2, kRowsAfter = 3;
  int cases = 0;
  for (DType type : kDeviceTypes) {
    const DTypeTraits& t = traits_of(type);
    const int64_t be = static_cast<int64_t>(t.block_elems);
    for (int64_t rows : {1, 4, 12}) {
      for (int64_t blocks_per_row : {1, 3, 33}) {
        for (int64_t head_dim : {0, 4}) {
          if (head_dim > 0 && rows % head_dim != 0) continue;
          const int64_t row_elems = blocks_per_row * be;
          const int64_t n_blocks = rows * blocks_per_row;
          const std::vector<uint8_t> bytes = random_blocks(type, n_blocks, rng_);
          std::vector<float> f(static_cast<size_t>(rows * row_elems));
          ASSERT_TRUE(host_f32(type, bytes, rows, row_elems, head_dim, f).ok());
          std::vector<uint16_t> want(
              static_cast<size_t>((kRowsBefore + rows + kRowsAfter) * row_elems), kPoison);
          for (size_t i = 0; i < f.size(); ++i)
            want[kRowsBefore * row_elems + i] = to_bits(f[i]);
          const DeviceBuffer src = upload_bytes(bytes);
          for (int64_t chunk : {n_blocks, int64_t{5}}) {
            SCOPED_TRACE(str_cat(dtype_name(type), ": ", rows, " rows of ", blocks_per_row,
                                 " blocks, head_dim ", head_dim, ", chunks of ", chunk, " blocks"));
            const DeviceBuffer out = poisoned(want.size() * 2);
            uint16_t* dst = static_cast<uint16_t*>(out.data()) + kRowsBefore * row_elems;
            for (int64_t first = 0; first < n_blocks; first += chunk) {
              const int64_t count = std::min(chunk, n_blocks - first);
              ASSERT_EQ(dequantize(type,
                                   static_cast<const uint8_t*>(src.data()) +
                                       first * static_cast<int64_t>(t.block_bytes),
                                   first, count, dst, row_elems, head_dim),
                        gpuSuccess);
            }
            const Mismatch m = compare_bits(download_bits(out.data(), want.size()), want);
            EXPECT_EQ(m.count, 0) << describe(m, row_elems);
            ++cases;
          }
        }
      }
    }
  }
  std::printf("[ metric ] dequant kernel cases: %d\n", cases);
}

// load_weight through the backend: per type a matrix, a q/k-permuted matrix and a vector, loaded
// into row ranges of one poisoned fused tensor, equal bit for bit to the host path; device types
// must not have called read_f32, host types must have (and still load right). A tensor
// stored as F32 into an fp32 destination takes the host path too.
TEST_P(GpuDequantTest, LoadWeightMatchesHostPathForEveryType) {
  std::vector<DType> types(std::begin(kDeviceTypes), std::end(kDeviceTypes));
  types.insert(types.end(), std::begin(kHostTypes), std::end(kHostTypes) - 1);  // not Q8_1
  for (DType type : types) {
    SCOPED_TRACE(dtype_name(type));
    const bool on_device = gpu::dequantizes_on_device(type);
    const int64_t be = static_cast<int64_t>(traits_of(type).block_elems);
    const int64_t cols = 2 * be, plain_rows = 6, qk_rows = 8, qk_head_dim = 4;
    auto bytes = [&](int64_t n_blocks) {
      return on_device ? random_blocks(type, n_blocks, rng_, /*loadable=*/true)
                       : random_host_type_bytes(type, n_blocks, rng_);
    };
    StoredWeights w;
    w.add("plain", type, {plain_rows, cols}, bytes(plain_rows * 2));
    w.add("qk", type, {qk_rows, cols}, bytes(qk_rows * 2), qk_head_dim);
    w.add("vector", type, {3 * be}, bytes(3));

    // Fused rows: 1 poisoned, plain, qk, 1 poisoned.
    const int64_t fused_rows = 1 + plain_rows + qk_rows + 1;
    const size_t fused_bytes = static_cast<size_t>(fused_rows * cols) * 2;
    DeviceBuffer got_buf = poisoned(fused_bytes), want_buf = poisoned(fused_bytes);
    const Tensor got(got_buf.data(), dtype_, {fused_rows, cols});
    const Tensor want(want_buf.data(), dtype_, {fused_rows, cols});
    ASSERT_TRUE(gpu_->load_weight(w, "plain", got.rows(1, plain_rows)).ok());
    ASSERT_TRUE(gpu_->load_weight(w, "qk", got.rows(1 + plain_rows, qk_rows)).ok());
    EXPECT_EQ(w.read_f32_calls(), on_device ? 0 : 2);
    load_on_host_path(w, "plain", want.rows(1, plain_rows));
    load_on_host_path(w, "qk", want.rows(1 + plain_rows, qk_rows));
    Mismatch m =
        compare_bits(download_bits(got.data, got.numel()), download_bits(want.data, want.numel()));
    EXPECT_EQ(m.count, 0) << describe(m, cols);

    DeviceBuffer vgot_buf = poisoned(3 * be * 2), vwant_buf = poisoned(3 * be * 2);
    const Tensor vgot(vgot_buf.data(), dtype_, {3 * be});
    const Tensor vwant(vwant_buf.data(), dtype_, {3 * be});
    const int calls_before = w.read_f32_calls();
    ASSERT_TRUE(gpu_->load_weight(w, "vector", vgot).ok());
    EXPECT_EQ(w.read_f32_calls() - calls_before, on_device ? 0 : 1);
    load_on_host_path(w, "vector", vwant);
    m = compare_bits(download_bits(vgot.data, vgot.numel()),
                     download_bits(vwant.data, vwant.numel()));
    EXPECT_EQ(m.count, 0) << describe(m, 3 * be);
  }

  StoredWeights w;
  w.add("f32", DType::kF32, {4, 64}, random_blocks(DType::kF32, 4 * 64, rng_, /*loadable=*/true));
  auto buf = gpu_->allocate(4 * 64 * sizeof(float));
  ASSERT_TRUE(buf.ok());
  const Tensor dst(buf->data(), DType::kF32, {4, 64});
  ASSERT_TRUE(gpu_->load_weight(w, "f32", dst).ok());
  EXPECT_EQ(w.read_f32_calls(), 1);
  std::vector<float> got(4 * 64), want(4 * 64);
  gpu_->copy_to_host(got.data(), dst.data, dst.nbytes());
  ASSERT_TRUE(gpu_->synchronize().ok());
  const int64_t shape[] = {4, 64};
  ASSERT_TRUE(w.read_f32("f32", shape, want).ok());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), dst.nbytes()), 0);

  // Errors still come from the host path, in read_f32's words.
  auto narrow_buf = gpu_->allocate(4 * 32 * 2);
  ASSERT_TRUE(narrow_buf.ok());
  const Tensor narrow(narrow_buf->data(), dtype_, {4, 32});
  const absl::Status missing = gpu_->load_weight(w, "nope", narrow);
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  const absl::Status wrong_shape = gpu_->load_weight(w, "f32", narrow);
  EXPECT_EQ(wrong_shape.code(), absl::StatusCode::kInvalidArgument) << wrong_shape;
}

// Tensors larger than the backend's 32 MiB staging chunk: Q8_0 [16384, 4096] q/k-permuted
// (71 MiB stored: 3 chunks, boundaries inside rows) and F32 [2900, 3001] permuted in heads of 58
// (35 MiB: 2 chunks), both into row ranges; equal bit for bit to the host path.
TEST_P(GpuDequantTest, LoadWeightAcrossStagingChunks) {
  struct Case {
    DType type;
    int64_t rows, cols, head_dim;
  };
  for (const Case& c : {Case{DType::kQ8_0, 16384, 4096, 64}, Case{DType::kF32, 2900, 3001, 58}}) {
    SCOPED_TRACE(dtype_name(c.type));
    const int64_t be = static_cast<int64_t>(traits_of(c.type).block_elems);
    StoredWeights w;
    std::vector<uint8_t> stored = random_blocks(c.type, c.rows * c.cols / be, rng_,
                                                /*loadable=*/true);
    w.add("big", c.type, {c.rows, c.cols}, stored, c.head_dim);
    const size_t bytes = static_cast<size_t>((c.rows + 2) * c.cols) * 2;
    DeviceBuffer got_buf = poisoned(bytes), want_buf = poisoned(bytes);
    const Tensor got(got_buf.data(), dtype_, {c.rows + 2, c.cols});
    const Tensor want(want_buf.data(), dtype_, {c.rows + 2, c.cols});
    ASSERT_TRUE(gpu_->load_weight(w, "big", got.rows(1, c.rows)).ok());
    EXPECT_EQ(w.read_f32_calls(), 0);
    load_on_host_path(w, "big", want.rows(1, c.rows));
    const Mismatch m =
        compare_bits(download_bits(got.data, got.numel()), download_bits(want.data, want.numel()));
    EXPECT_EQ(m.count, 0) << describe(m, c.cols);

    // A NaN block in the last chunk and another later in it: the check reports the first, by
    // stored element, although the rows are permuted and the chunks converted separately.
    const int64_t n_blocks = c.rows * c.cols / be;
    const int64_t bad_block = n_blocks - 1000, later_block = n_blocks - 10;
    const size_t block_bytes = traits_of(c.type).block_bytes;
    for (int64_t b : {later_block, bad_block}) {
      const uint16_t nan16 = 0x7e00;
      const uint32_t nan32 = 0x7fc00000u;
      if (c.type == DType::kF32) {
        std::memcpy(stored.data() + b * block_bytes, &nan32, 4);
      } else {
        std::memcpy(stored.data() + b * block_bytes, &nan16, 2);  // Q8_0's scale
      }
    }
    w.add("big", c.type, {c.rows, c.cols}, stored, c.head_dim);
    const int64_t bad = bad_block * be;
    const absl::Status st = gpu_->load_weight(w, "big", got.rows(1, c.rows));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(std::string(st.message()),
                ::testing::HasSubstr(str_cat("tensor 'big': element ", bad, " (row ", bad / c.cols,
                                             ", column ", bad % c.cols, " as stored; HF row ",
                                             qk_unpermuted_row(bad / c.cols, c.head_dim))));
    EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("is NaN"));
  }
}

// A stored NaN or inf in any device type, or a finite value past fp16's range, fails load_weight
// naming the tensor and the first bad element in stored order with its value; the same tensor
// loads into bf16, which holds that value. The host path (F64, integers) checks its rounding
// to 16 bits the same way, stored order included for permuted q/k rows. After a refusal the
// next tensor loads: the check is per tensor.
TEST_P(GpuDequantTest, LoadWeightRefusesNonFiniteWeightsNamingTheElement) {
  using ::testing::HasSubstr;
  const int64_t rows = 8, cols = 512, n = rows * cols;
  DeviceBuffer buf = poisoned(static_cast<size_t>(n) * 2);
  const Tensor dst(buf.data(), dtype_, {rows, cols});
  auto load_error = [&](const StoredWeights& w) {
    const absl::Status st = gpu_->load_weight(w, "w", dst);
    return st.ok() ? std::string("loaded") : std::string(st.message());
  };
  struct Plant {
    DType type;
    int64_t element;        // the first element the planted field makes non-finite
    size_t byte;            // where the field is, in the stored bytes
    std::vector<uint8_t> field;
    const char* value;      // as the error gives it
  };
  const std::vector<Plant> plants = {
      {DType::kF32, 1000, 4000, {0x00, 0x00, 0xc0, 0x7f}, "is NaN"},
      {DType::kF16, 77, 154, {0x00, 0x7c}, "is +inf"},
      {DType::kBF16, 4095, 8190, {0x80, 0xff}, "is -inf"},
      {DType::kQ8_0, 3 * 32, 3 * 34, {0x00, 0x7e}, "is NaN"},     // block 3's scale
      {DType::kQ4_K, 256, 144, {0x00, 0x7c}, "of Q4_K"},          // block 1's d: inf * q
      {DType::kF32, 5, 20, {0x00, 0xb8, 0x88, 0x47}, "is 70000"},  // finite: fp16 only
  };
  for (const Plant& p : plants) {
    SCOPED_TRACE(str_cat(dtype_name(p.type), " element ", p.element));
    const int64_t be = static_cast<int64_t>(traits_of(p.type).block_elems);
    std::vector<uint8_t> bytes = random_blocks(p.type, n / be, rng_, /*loadable=*/true);
    StoredWeights w;
    w.add("w", p.type, {rows, cols}, bytes);
    EXPECT_EQ(load_error(w), "loaded");
    std::memcpy(bytes.data() + p.byte, p.field.data(), p.field.size());
    w.add("w", p.type, {rows, cols}, bytes);
    const std::string msg = load_error(w);
    const bool finite = std::string(p.value) == "is 70000";
    if (finite && dtype_ == DType::kBF16) {
      EXPECT_EQ(msg, "loaded");
      continue;
    }
    EXPECT_THAT(msg, HasSubstr(str_cat("<stored weights>: tensor 'w': element ", p.element,
                                       " (row ", p.element / cols, ", column ",
                                       p.element % cols, ")")));
    EXPECT_THAT(msg, HasSubstr(p.value));
    if (finite) {
      EXPECT_THAT(msg, HasSubstr("which overflows F16 to inf"));
    }
    EXPECT_EQ(w.read_f32_calls(), 0);  // found on the device path
  }

  // The host path: I32 q/k rows permuted in heads of 4; stored row 1, column 3 holds 70000
  // (finite: fp16 cannot hold it), HF row 2.
  std::vector<uint8_t> ints = random_host_type_bytes(DType::kI32, n, rng_);
  StoredWeights w;
  w.add("w", DType::kI32, {rows, cols}, ints, /*qk_head_dim=*/4);
  EXPECT_EQ(load_error(w), "loaded");
  put_host_value(DType::kI32, ints, 1 * cols + 3, 70000);
  w.add("w", DType::kI32, {rows, cols}, ints, /*qk_head_dim=*/4);
  const std::string msg = load_error(w);
  EXPECT_GT(w.read_f32_calls(), 0);
  if (dtype_ == DType::kBF16) {
    EXPECT_EQ(msg, "loaded");
  } else {
    EXPECT_THAT(msg, HasSubstr(str_cat("tensor 'w': element ", cols + 3, " (row 1, column 3 as "
                                       "stored; HF row 2) of I32 tensor [8, 512] is 70000, which "
                                       "overflows F16 to inf")));
  }
  w.add("w", DType::kI32, {rows, cols}, random_host_type_bytes(DType::kI32, n, rng_), 4);
  EXPECT_EQ(load_error(w), "loaded");
}

// The default model, every tensor: load_weight (the device path for all of them: Q4_1, Q8_0,
// F32; q/k projections permuted) against the host path, bit for bit; and layer 0's q, k, v into
// row ranges of one fused tensor, as LlamaModel loads them.
// The model is the build tree's, or TESSERA_DEFAULT_MODEL's where the binary travelled without it
// (a GPU host).
TEST_P(GpuDequantTest, DefaultModelLoadsAsOnTheHostPath) {
  const char* from_env = std::getenv("TESSERA_DEFAULT_MODEL");
  const std::string model = from_env != nullptr ? from_env : TESSERA_DEFAULT_MODEL;
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " is missing";
  absl::StatusOr<std::unique_ptr<WeightSource>> opened = open_weights(model);
  ASSERT_TRUE(opened.ok()) << opened.status();
  const CountingWeights w(**opened);
  std::map<std::string, int> types;
  int permuted = 0;
  for (const TensorInfo& info : w.tensors()) {
    SCOPED_TRACE(info.name);
    ASSERT_TRUE(gpu::dequantizes_on_device(info.dtype)) << dtype_name(info.dtype);
    ++types[std::string(dtype_name(info.dtype))];
    absl::StatusOr<RawTensor> raw = w.raw(info.name);
    ASSERT_TRUE(raw.ok());
    permuted += raw->qk_permuted ? 1 : 0;
    Tensor got;
    got.dtype = dtype_;
    for (int64_t d : info.shape) got.shape[got.rank++] = d;
    DeviceBuffer got_buf = poisoned(got.nbytes()), want_buf = poisoned(got.nbytes());
    Tensor want = got;
    got.data = got_buf.data();
    want.data = want_buf.data();
    const int calls_before = w.read_f32_calls();
    ASSERT_TRUE(gpu_->load_weight(w, info.name, got).ok());
    EXPECT_EQ(w.read_f32_calls(), calls_before);  // the device path took it
    load_on_host_path(w, info.name, want);
    const Mismatch m =
        compare_bits(download_bits(got.data, got.numel()), download_bits(want.data, want.numel()));
    EXPECT_EQ(m.count, 0) << describe(m, got.row_size());
  }
  EXPECT_GT(permuted, 0);
  for (const auto& [type, count] : types)
    std::printf("[ metric ] %s tensors: %d\n", type.c_str(), count);

  const ModelConfig& c = w.config();
  const int64_t q_rows = c.num_heads * c.head_dim, kv_rows = c.num_kv_heads * c.head_dim;
  const int64_t h = c.hidden_size, qkv_rows = q_rows + 2 * kv_rows;
  const size_t bytes = static_cast<size_t>(qkv_rows * h) * 2;
  DeviceBuffer got_buf = poisoned(bytes), want_buf = poisoned(bytes);
  const Tensor got(got_buf.data(), dtype_, {qkv_rows, h});
  const Tensor want(want_buf.data(), dtype_, {qkv_rows, h});
  int64_t row = 0;
  for (const char* part : {"q_proj", "k_proj", "v_proj"}) {
    const std::string name = str_cat("model.layers.0.self_attn.", part, ".weight");
    const int64_t rows = row == 0 ? q_rows : kv_rows;
    ASSERT_TRUE(gpu_->load_weight(w, name, got.rows(row, rows)).ok()) << name;
    load_on_host_path(w, name, want.rows(row, rows));
    row += rows;
  }
  const Mismatch m =
      compare_bits(download_bits(got.data, got.numel()), download_bits(want.data, want.numel()));
  EXPECT_EQ(m.count, 0) << describe(m, h);
}

// The default model with 1 KiB of 0xff bytes over whole blocks of one weight (their scales NaN)
// fails ModelInstance::load on the GPU backend, naming the tensor and the first element of the
// first overwritten block; loaded from the unplanted file it loads.
TEST_P(GpuDequantTest, DefaultModelWithGarbageInAWeightFailsToLoad) {
  const char* from_env = std::getenv("TESSERA_DEFAULT_MODEL");
  const std::string model = from_env != nullptr ? from_env : TESSERA_DEFAULT_MODEL;
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " is missing";
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::open(model);
  ASSERT_TRUE(f.ok()) << f.status();
  const GgufTensorInfo* t = (*f)->find_tensor("blk.3.ffn_up.weight");
  ASSERT_NE(t, nullptr);
  const DTypeTraits& traits = traits_of(t->dtype);
  const uint64_t first_block = 100;
  const std::string planted = (std::filesystem::path(::testing::TempDir()) /
                               str_cat("gpu_garbage_", dtype_name(dtype_), ".gguf"))
                                  .string();
  ASSERT_EQ(testing::plant_in_gguf(model, planted, "blk.3.ffn_up.weight",
                                   first_block * traits.block_bytes, std::string(1024, '\xff')),
            "");
  InstanceOptions options;
  options.backend.kind = BackendKind::kGpu;
  options.backend.gpu_dtype = dtype_;
  options.limits.max_batch_tokens = 64;
  options.limits.max_logit_rows = 4;
  options.engine.max_num_seqs = 4;
  options.kv_cache_bytes = 16 << 20;
  absl::StatusOr<std::unique_ptr<ModelInstance>> m = ModelInstance::load(planted, options);
  std::filesystem::remove(planted);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << m.status();
  const int64_t element = static_cast<int64_t>(first_block * traits.block_elems);
  EXPECT_THAT(std::string(m.status().message()),
              ::testing::HasSubstr(str_cat("tensor 'model.layers.3.mlp.up_proj.weight': element ",
                                           element, " (row ", element / t->shape[1], ", column ",
                                           element % t->shape[1], ") of ", traits.name)));
  EXPECT_THAT(std::string(m.status().message()), ::testing::HasSubstr("is NaN"));
  m = ModelInstance::load(model, options);
  EXPECT_TRUE(m.ok()) << m.status();
}

}  // namespace
}  // namespace tessera
