// Weights converted on the GPU (kernels/dequant_gpu.h, GpuBackend::load_weight's device path)
// against the host, into each 16-bit destination type (bf16, fp16: a backend of that compute
// dtype): for every type the device converts, random stored blocks must come out as
// runtime/model_io/dequant.h's fp32 rounded to the destination type, bit for bit (the kernels repeat
// the host's operations without fused multiply-adds, and both roundings are to nearest even), over
// row counts, chunkings that split rows, the q/k row permutation and row-range destinations;
// load_weight must give what the host path gives (read_f32, uploaded and rounded on the device)
// for every type, across several staging chunks, and for every tensor of the default model.
// Skips when no GPU is visible.
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
std::vector<uint8_t> random_blocks(DType type, int64_t n_blocks, std::mt19937& rng) {
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
        put_u16(blk, v);
        break;
      }
      case DType::kQ8_K: {
        const float d = half_to_float(random_finite_half(rng));
        std::memcpy(blk, &d, 4);
        break;
      }
      default:
        for (int off : half_fields(type)) put_u16(blk + off, random_finite_half(rng));
    }
  }
  if (type == DType::kF32) {
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

// Random doubles or integers for the host-only plain types.
std::vector<uint8_t> random_host_type_bytes(DType type, int64_t n, std::mt19937& rng) {
  std::vector<uint8_t> b(static_cast<size_t>(n) * traits_of(type).block_bytes);
  if (type == DType::kF64) {
    std::uniform_real_distribution<double> u(-3.0, 3.0);
    for (int64_t i = 0; i < n; ++i) {
      const double v = u(rng);
      std::memcpy(b.data() + 8 * i, &v, 8);
    }
  } else {
    for (uint8_t& x : b) x = static_cast<uint8_t>(rng());
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
      return on_device ? random_blocks(type, n_blocks, rng_)
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
  w.add("f32", DType::kF32, {4, 64}, random_blocks(DType::kF32, 4 * 64, rng_));
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
    w.add("big", c.type, {c.rows, c.cols}, random_blocks(c.type, c.rows * c.cols / be, rng_),
          c.head_dim);
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
  }
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

}  // namespace
}  // namespace tessera
