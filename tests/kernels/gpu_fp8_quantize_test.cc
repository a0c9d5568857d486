// The FP8 quantization kernels (kernels/fp8_quantize.h) against the host: every code and scale
// bit for bit equal to base/fp8.h's float_to_fp8(enc, x / scale) (fp8_quantize_reference), the
// scale from the host's amax, for bf16 and fp16 inputs and both e4m3 encodings: per-tensor (1 to
// 8192 rows of 4096, odd sizes, unaligned starts), a given scale over every 16-bit input pattern
// (zeros, subnormals, saturation, infinities, NaN), and per-row scales (an all-zero row
// included). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/fp8.h"
#include "base/half.h"
#include "kernels/fp8_quantize.h"
#include "kernels/gpu_backend.h"
#include "tests/kernels/device_alloc.h"

namespace tessera {
namespace {

struct Param {
  bool f16;
  Fp8Encoding enc;
};

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::string(info.param.f16 ? "f16" : "bf16") +
         (info.param.enc == Fp8Encoding::kE4M3FN ? "_e4m3fn" : "_e4m3fnuz");
}

class GpuFp8QuantizeTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (GpuBackend::device_count() == 0) GTEST_SKIP() << "no GPU visible";
    ASSERT_EQ(gpuSetDevice(0), gpuSuccess);
    ASSERT_EQ(gpuStreamCreateWithFlags(&stream_, gpuStreamNonBlocking), gpuSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) (void)gpuStreamDestroy(stream_);
  }

  Fp8Encoding enc() const { return GetParam().enc; }
  float value_of(uint16_t bits) const {
    return GetParam().f16 ? half_to_float(bits) : bf16_to_float(bits);
  }
  uint16_t bits_of(float f) const { return GetParam().f16 ? float_to_half(f) : float_to_bf16(f); }
  // `count` random 16-bit values in +-max.
  std::vector<uint16_t> random_bits(size_t count, float max) {
    std::uniform_real_distribution<float> u(-max, max);
    std::vector<uint16_t> v(count);
    for (uint16_t& b : v) b = bits_of(u(rng_));
    return v;
  }
  // x (16-bit, at element offset `offset` of a device buffer) to the device.
  DevicePtr upload(const std::vector<uint16_t>& x, size_t offset) {
    DevicePtr d = device_alloc((x.size() + offset) * 2);
    EXPECT_EQ(gpuMemcpy(static_cast<uint16_t*>(d.get()) + offset, x.data(), x.size() * 2,
                        gpuMemcpyHostToDevice),
              gpuSuccess);
    // A copy from pageable memory may return before its DMA is done, and the kernels run on a
    // non-blocking stream that does not wait for it.
    EXPECT_EQ(gpuDeviceSynchronize(), gpuSuccess);
    return d;
  }
  template <typename Launch>
  void launch(Launch&& f) {
    const gpuError_t e = GetParam().f16 ? f.template operator()<gpu_f16>()
                                        : f.template operator()<gpu_bf16>();
    ASSERT_EQ(e, gpuSuccess) << gpuGetErrorString(e);
    ASSERT_EQ(gpuStreamSynchronize(stream_), gpuSuccess);
  }
  std::vector<uint8_t> download_codes(const void* q, size_t offset, size_t count) {
    std::vector<uint8_t> out(count);
    EXPECT_EQ(gpuMemcpy(out.data(), static_cast<const uint8_t*>(q) + offset, count,
                        gpuMemcpyDeviceToHost),
              gpuSuccess);
    return out;
  }
  float download_float(const void* p) {
    float f = 0;
    EXPECT_EQ(gpuMemcpy(&f, p, 4, gpuMemcpyDeviceToHost), gpuSuccess);
    return f;
  }
  // The first code that differs from the host's, or -1.
  int64_t first_mismatch(const std::vector<uint16_t>& x, const std::vector<uint8_t>& q,
                         float scale, size_t begin = 0) const {
    for (size_t i = 0; i < q.size(); ++i) {
      if (q[i] != gpu::fp8_quantize_reference(value_of(x[begin + i]), scale, enc())) {
        return static_cast<int64_t>(i);
      }
    }
    return -1;
  }
  float host_amax(const std::vector<uint16_t>& x, size_t begin, size_t end) const {
    float m = 0;
    for (size_t i = begin; i < end; ++i) m = std::max(m, std::fabs(value_of(x[i])));
    return m;
  }

  gpuStream_t stream_ = nullptr;
  std::mt19937 rng_{97};
};

INSTANTIATE_TEST_SUITE_P(Types, GpuFp8QuantizeTest,
                         ::testing::Values(Param{false, Fp8Encoding::kE4M3FN},
                                           Param{true, Fp8Encoding::kE4M3FN},
                                           Param{false, Fp8Encoding::kE4M3FNUZ},
                                           Param{true, Fp8Encoding::kE4M3FNUZ}),
                         param_name);

TEST_P(GpuFp8QuantizeTest, PerTensorMatchesTheHostBitForBit) {
  struct Case {
    int64_t rows, cols;
    size_t offset;  // elements: 0 keeps 16-byte loads, 1 forces the element-by-element path
  };
  for (const Case& c : {Case{1, 4096, 0}, Case{16, 4096, 0}, Case{1, 4096, 1}, Case{3, 1001, 0},
                        Case{5, 77, 3}, Case{256, 14336, 0}, Case{8192, 4096, 0}}) {
    const size_t count = static_cast<size_t>(c.rows * c.cols);
    std::vector<uint16_t> x = random_bits(count, 3.0f);
    x[count / 3] = bits_of(-37.5f);  // the amax, negative, somewhere inside
    DevicePtr xd = upload(x, c.offset);
    DevicePtr q = device_alloc(count + c.offset), scale = device_alloc(4),
              scratch = device_alloc(gpu::kFp8PerTensorScratchBytes);
    launch([&]<typename T>() {
      return gpu::quantize_fp8_per_tensor(static_cast<const T*>(xd.get()) + c.offset,
                                          static_cast<int64_t>(count), enc(),
                                          static_cast<uint8_t*>(q.get()) + c.offset,
                                          static_cast<float*>(scale.get()), scratch.get(), stream_);
    });
    const float want_scale = gpu::fp8_scale_for_amax(host_amax(x, 0, count), enc());
    // Not only the header's own formula: 37.5 (exact in bf16 and fp16) over the encoding's
    // largest finite value, 448 (e4m3fn) or 240 (e4m3fnuz).
    EXPECT_EQ(want_scale, 37.5f / (enc() == Fp8Encoding::kE4M3FN ? 448.0f : 240.0f));
    const float got_scale = download_float(scale.get());
    EXPECT_EQ(std::memcmp(&got_scale, &want_scale, 4), 0)
        << c.rows << "x" << c.cols << ": scale " << got_scale << ", host " << want_scale;
    EXPECT_EQ(first_mismatch(x, download_codes(q.get(), c.offset, count), want_scale), -1)
        << c.rows << "x" << c.cols << " offset " << c.offset;
  }
}

TEST_P(GpuFp8QuantizeTest, AllZeroTensorGetsTheSmallestScaleAndZeroCodes) {
  const std::vector<uint16_t> x(4096, 0);
  DevicePtr xd = upload(x, 0);
  DevicePtr q = device_alloc(x.size()), scale = device_alloc(4),
            scratch = device_alloc(gpu::kFp8PerTensorScratchBytes);
  launch([&]<typename T>() {
    return gpu::quantize_fp8_per_tensor(static_cast<const T*>(xd.get()), 4096, enc(),
                                        static_cast<uint8_t*>(q.get()),
                                        static_cast<float*>(scale.get()), scratch.get(), stream_);
  });
  EXPECT_EQ(download_float(scale.get()), gpu::kFp8MinScale);
  for (uint8_t code : download_codes(q.get(), 0, x.size())) ASSERT_EQ(code, 0);
}

TEST_P(GpuFp8QuantizeTest, GivenScaleEncodesEvery16BitPatternAsTheHostDoes) {
  std::vector<uint16_t> x(65536);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<uint16_t>(i);
  DevicePtr xd = upload(x, 0);
  DevicePtr q = device_alloc(x.size()), scale = device_alloc(4);
  // 1/64 moves bf16's small values into FP8's subnormals; 3 puts ties between FP8 neighbours.
  for (float s : {1.0f, 1.0f / 64.0f, 3.0f, 0.0078125f * 3.0f}) {
    ASSERT_EQ(gpuMemcpy(scale.get(), &s, 4, gpuMemcpyHostToDevice), gpuSuccess);
    ASSERT_EQ(gpuDeviceSynchronize(), gpuSuccess);  // as in upload()
    launch([&]<typename T>() {
      return gpu::quantize_fp8_with_scale(static_cast<const T*>(xd.get()), 65536, enc(),
                                          static_cast<const float*>(scale.get()),
                                          static_cast<uint8_t*>(q.get()), stream_);
    });
    const int64_t bad = first_mismatch(x, download_codes(q.get(), 0, x.size()), s);
    EXPECT_EQ(bad, -1) << "scale " << s << ": input bits 0x" << std::hex << bad;
  }
}

TEST_P(GpuFp8QuantizeTest, PerRowScalesMatchTheHostBitForBit) {
  // 4100 columns: every other row starts off a 16-byte boundary.
  for (int64_t cols : {4096, 4100, 14336}) {
    const int64_t rows = 37;
    const size_t count = static_cast<size_t>(rows * cols);
    std::vector<uint16_t> w = random_bits(count, 0.05f);
    for (int64_t r = 0; r < rows; ++r) w[r * cols + (r * 13) % cols] = bits_of(0.1f * (r + 1));
    for (int64_t j = 0; j < cols; ++j) w[5 * cols + j] = 0;  // an all-zero row
    DevicePtr wd = upload(w, 0);
    DevicePtr q = device_alloc(count), scales = device_alloc(rows * 4);
    launch([&]<typename T>() {
      return gpu::quantize_fp8_per_row(static_cast<const T*>(wd.get()), rows, cols, enc(),
                                       static_cast<uint8_t*>(q.get()),
                                       static_cast<float*>(scales.get()), stream_);
    });
    std::vector<float> got(rows);
    ASSERT_EQ(gpuMemcpy(got.data(), scales.get(), rows * 4, gpuMemcpyDeviceToHost), gpuSuccess);
    const std::vector<uint8_t> codes = download_codes(q.get(), 0, count);
    for (int64_t r = 0; r < rows; ++r) {
      const float want = gpu::fp8_scale_for_amax(host_amax(w, r * cols, (r + 1) * cols), enc());
      ASSERT_EQ(std::memcmp(&got[r], &want, 4), 0) << "row " << r << ": " << got[r] << " vs " << want;
      const std::vector<uint8_t> row(codes.begin() + r * cols, codes.begin() + (r + 1) * cols);
      ASSERT_EQ(first_mismatch(w, row, want, r * cols), -1) << "cols " << cols << " row " << r;
    }
    EXPECT_EQ(got[5], gpu::kFp8MinScale);
  }
}

}  // namespace
}  // namespace tessera
