// tessera's small-M kernels with FP8 weights (W8A16, gpu::smallm_linear_fp8): every kernel the
// build runs them with, at 1, 2, 4 and 8 splits, m = 1, 3, 8, 9, 16, per-tensor and per-channel
// scales, bf16 and fp16 x, 16-bit and fp32 output, against an fp64 host reference built from
// base/fp8.h's decoding of the very codes (uniform over every non-NaN code: zeros, subnormals,
// negatives, the largest finite). n is off every row tile and k spans one and many split ranges;
// outputs and split-K partials are poisoned (NaN) before each run. Weights of subnormal codes only
// check that no step flushes them. Skips without a GPU -- except the host check of the bit
// placement every kernel widens codes with (fp8_widen.h): each of the 256 codes, both encodings,
// bf16 and fp16, exact.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/fp8.h"
#include "base/half.h"
#include "kernels/gemm/fp8_widen.h"
#include "kernels/gemm/smallm_gemm.h"
#include "kernels/gpu_backend.h"
#include "tests/kernels/device_alloc.h"
#include "tests/kernels/suite_gpu_backend.h"

namespace tessera {
namespace {

using gpu::SmallMKernel;

// A 16-bit float's value (fp16 when f16, else bf16), and a float rounded to one's bits.
float value_of16(bool f16, uint16_t bits) {
  return f16 ? half_to_float(bits) : bf16_to_float(bits);
}
uint16_t bits_of16(bool f16, float f) {
  return f16 ? float_to_half(f) : float_to_bf16(f);
}

// Each code, in each byte of a word among other codes, widens to a 16-bit value that times the
// power of two is the code's value (sign of zero included), and that value is exact in the 16-bit
// type, so the kernels' packed multiply by it is exact too. Needs no GPU.
TEST(Fp8Widen, EveryCodeWidensExactlyToBf16AndFp16) {
  for (Fp8Encoding enc : {Fp8Encoding::kE4M3FN, Fp8Encoding::kE4M3FNUZ}) {
    for (bool f16 : {false, true}) {
      const int exp_bits = f16 ? 5 : 8;
      const float unit = std::ldexp(1.0f, gpu::fp8_widen_exponent(exp_bits, enc));
      const uint32_t unit_bits = gpu::fp8_widen_unit_bits(exp_bits, enc);
      ASSERT_EQ(unit_bits >> 16, unit_bits & 0xffffu);
      ASSERT_EQ(value_of16(f16, static_cast<uint16_t>(unit_bits)), unit);
      const auto widened = [&](uint32_t word, int byte) {
        const gpu::Fp8WidePairs p =
            f16 ? gpu::fp8_widen_e4m3x4<5>(word) : gpu::fp8_widen_e4m3x4<8>(word);
        const uint32_t pair = byte % 2 == 0 ? p.even : p.odd;  // (0, 2) and (1, 3)
        return value_of16(f16, static_cast<uint16_t>(byte < 2 ? pair : pair >> 16));
      };
      for (uint32_t code = 0; code < 256; ++code) {
        const float want = fp8_to_float(enc, static_cast<uint8_t>(code));
        if (std::isnan(want)) continue;
        for (uint32_t filler : {0x00u, 0xffu, 0x7fu, 0x80u, 0xa5u}) {
          for (int byte = 0; byte < 4; ++byte) {
            const uint32_t word = (filler * 0x01010101u & ~(0xffu << 8 * byte)) | code << 8 * byte;
            const float got = widened(word, byte) * unit;
            EXPECT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
                << "code 0x" << std::hex << code << " byte " << byte << " filler 0x" << filler
                << (f16 ? " fp16 " : " bf16 ") << (enc == Fp8Encoding::kE4M3FN ? "e4m3fn" : "fnuz");
            EXPECT_EQ(value_of16(f16, bits_of16(f16, got)), got) << "not exact in 16 bits";
          }
        }
      }
    }
  }
  // NaN codes are not special: e4m3fn's widen to +-480 (fp8_widen.h). Byte 0 is the even pair's
  // low half.
  const uint32_t nan_pair = gpu::fp8_widen_e4m3x4<8>(0x7fu).even;
  EXPECT_EQ(std::ldexp(bf16_to_float(static_cast<uint16_t>(nan_pair)), 120), 480.0f);
}

// Relative L2 norm of got - want over want; infinity when any output is not finite.
double relative_norm(const std::vector<double>& want, const std::vector<float>& got) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    diff += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  return std::sqrt(diff / norm);
}

const char* kernel_name(SmallMKernel kernel) {
  switch (kernel) {
    case SmallMKernel::kMmaRows16:
      return "mma16";
    case SmallMKernel::kMmaRows32:
      return "mma32";
    case SmallMKernel::kMmaRows64:
      return "mma64";
    case SmallMKernel::kMmaRows16ThreePerSm:
      return "mma16x3";
    case SmallMKernel::kLineRows16:
      return "line16";
    case SmallMKernel::kFma:
      return "fma";
  }
  return "?";
}

// Parameter: x's type is fp16 (else bf16).
class GpuSmallMFp8Test : public ::testing::TestWithParam<bool> {
 protected:
  // The kernels run on the stream of the suite's backend (device 0), as the backend's would.
  void SetUp() override {
    if (GpuBackend::device_count() == 0) GTEST_SKIP() << "no GPU visible";
    GpuBackend* backend = suite_gpu_backend<GpuSmallMFp8Test>();
    ASSERT_NE(backend, nullptr);
    stream_ = backend->stream();
  }

  bool f16() const { return GetParam(); }
  static constexpr Fp8Encoding kEnc = gpu::kSmallMFp8Encoding;

  // One GEMM's operands on the host (x as exact floats, w as codes, both scale sets) and device.
  struct Operands {
    int64_t m = 0, n = 0, k = 0;
    std::vector<float> x;
    std::vector<uint8_t> codes;
    float tensor_scale = 0;
    std::vector<float> channel_scales;
    DevicePtr x_dev, w_dev, tensor_scale_dev, channel_scales_dev, out_dev, workspace_dev;
    std::vector<double> dots;  // [m, n]: x . decoded codes, unscaled
  };

  // `pick_code` draws codes; x in +-1; per-channel scales in [0.5, 2] x the tensor's.
  template <typename PickCode>
  Operands make(int64_t m, int64_t n, int64_t k, PickCode pick_code) {
    Operands o;
    o.m = m, o.n = n, o.k = k;
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f), spread(0.5f, 2.0f);
    std::vector<uint16_t> x_bits(m * k);
    o.x.resize(m * k);
    for (int64_t i = 0; i < m * k; ++i) {
      x_bits[i] = bits_of16(f16(), unit(rng_));
      o.x[i] = value_of16(f16(), x_bits[i]);
    }
    o.codes.resize(n * k);
    for (uint8_t& c : o.codes) c = pick_code();
    // Outputs of O(1) to O(100) for random codes (rms value ~150 x 2^-6, k up to 4096): within
    // fp16's range.
    o.tensor_scale = 1.0f / 64;
    for (int64_t r = 0; r < n; ++r) o.channel_scales.push_back(o.tensor_scale * spread(rng_));
    o.dots.assign(m * n, 0.0);
    std::vector<double> w_row(k);
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < k; ++c) w_row[c] = fp8_to_float(kEnc, o.codes[r * k + c]);
      for (int64_t t = 0; t < m; ++t) {
        double dot = 0;
        for (int64_t c = 0; c < k; ++c) dot += static_cast<double>(o.x[t * k + c]) * w_row[c];
        o.dots[t * n + r] = dot;
      }
    }
    o.x_dev = device_upload(x_bits.data(), x_bits.size() * 2);
    o.w_dev = device_upload(o.codes.data(), o.codes.size());
    o.tensor_scale_dev = device_upload(&o.tensor_scale, sizeof(float));
    o.channel_scales_dev = device_upload(o.channel_scales.data(), o.channel_scales.size() * sizeof(float));
    o.out_dev = device_alloc(m * n * sizeof(float));
    o.workspace_dev = device_alloc(gpu::smallm_workspace_floats(m, n, 8) * sizeof(float));
    return o;
  }
  // A uniform code that is not NaN.
  uint8_t any_code() {
    for (;;) {
      const auto c = static_cast<uint8_t>(std::uniform_int_distribution<int>(0, 255)(rng_));
      if (!std::isnan(fp8_to_float(kEnc, c))) return c;
    }
  }

  // out (poisoned first, partials too) of one call, as floats; its launch error in *err.
  std::vector<float> run(Operands& o, SmallMKernel kernel, int splits, bool per_channel,
                         bool out_f32, gpuError_t* err) {
    const size_t count = o.m * o.n;
    EXPECT_EQ(gpuMemsetAsync(o.out_dev.get(), 0xff, count * sizeof(float), stream_), gpuSuccess);
    EXPECT_EQ(
        gpuMemsetAsync(o.workspace_dev.get(), 0xff,
                       gpu::smallm_workspace_floats(o.m, o.n, splits) * sizeof(float), stream_),
        gpuSuccess);
    const auto* scale = static_cast<const float*>(per_channel ? o.channel_scales_dev.get()
                                                              : o.tensor_scale_dev.get());
    const auto* w = static_cast<const uint8_t*>(o.w_dev.get());
    auto* workspace = static_cast<float*>(o.workspace_dev.get());
    *err = f16()
               ? gpu::smallm_linear_fp8(kernel, splits, static_cast<const gpu_f16*>(o.x_dev.get()),
                                        w, scale, per_channel, o.out_dev.get(), out_f32, o.m, o.n,
                                        o.k, workspace, stream_)
               : gpu::smallm_linear_fp8(kernel, splits, static_cast<const gpu_bf16*>(o.x_dev.get()),
                                        w, scale, per_channel, o.out_dev.get(), out_f32, o.m, o.n,
                                        o.k, workspace, stream_);
    EXPECT_EQ(gpuStreamSynchronize(stream_), gpuSuccess);
    std::vector<float> out(count);
    if (out_f32) {
      EXPECT_EQ(gpuMemcpy(out.data(), o.out_dev.get(), count * 4, gpuMemcpyDeviceToHost),
                gpuSuccess);
    } else {
      std::vector<uint16_t> raw(count);
      EXPECT_EQ(gpuMemcpy(raw.data(), o.out_dev.get(), count * 2, gpuMemcpyDeviceToHost),
                gpuSuccess);
      for (size_t i = 0; i < count; ++i) out[i] = value_of16(f16(), raw[i]);
    }
    return out;
  }
  std::vector<double> reference(const Operands& o, bool per_channel) const {
    std::vector<double> want(o.dots);
    for (size_t i = 0; i < want.size(); ++i) {
      want[i] *= per_channel ? o.channel_scales[i % o.n] : o.tensor_scale;
    }
    return want;
  }
  // Every kernel x splits x scale kind x output type on `o`, within 1e-2 (16-bit output: its
  // rounding) or 1e-5 (fp32: the accumulation order) of the reference's norm.
  void check_all(Operands& o) {
    for (SmallMKernel kernel : kKernels) {
      if (!gpu::smallm_fp8_kernel_available(kernel)) continue;
      for (int splits : {1, 2, 4, 8}) {
        for (bool per_channel : {false, true}) {
          const std::vector<double> want = reference(o, per_channel);
          for (bool out_f32 : {false, true}) {
            gpuError_t err = gpuSuccess;
            const std::vector<float> got = run(o, kernel, splits, per_channel, out_f32, &err);
            ASSERT_EQ(err, gpuSuccess) << kernel_name(kernel);
            EXPECT_LT(relative_norm(want, got), out_f32 ? 1e-5 : 1e-2)
                << kernel_name(kernel) << " splits=" << splits << " m=" << o.m << " n=" << o.n
                << " k=" << o.k << (per_channel ? " per-channel" : " per-tensor")
                << (out_f32 ? " out f32" : " out 16-bit");
          }
        }
      }
    }
  }

  static constexpr SmallMKernel kKernels[] = {
      SmallMKernel::kMmaRows16, SmallMKernel::kMmaRows16ThreePerSm, SmallMKernel::kMmaRows32,
      SmallMKernel::kMmaRows64, SmallMKernel::kFma};
  gpuStream_t stream_ = nullptr;
  std::mt19937 rng_{2718};
};

INSTANTIATE_TEST_SUITE_P(Types, GpuSmallMFp8Test, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "f16" : "bf16");
                         });

TEST_P(GpuSmallMFp8Test, KernelsMatchHostReference) {
#if defined(TESSERA_CUDA)
  EXPECT_TRUE(gpu::smallm_fp8_kernel_available(SmallMKernel::kMmaRows16));
#endif
  EXPECT_TRUE(gpu::smallm_fp8_kernel_available(SmallMKernel::kFma));
  // n = 80 off the 32- and 64-row tiles, 1000 off every tile (16 rows: the mma kernels' and the
  // FMA kernel's CTA); k = 64 a part of one CTA step (later splits empty), 4096 eight 512-wide
  // split ranges.
  const std::vector<std::pair<int64_t, int64_t>> nk = {
      {80, 64}, {1000, 64}, {80, 4096}, {1000, 4096}};
  for (auto [n, k] : nk) {
    for (int64_t m : {1, 3, 8, 9, 16}) {
      Operands o = make(m, n, k, [&] { return any_code(); });
      check_all(o);
    }
  }
}

// Weights of zero and subnormal codes only (exponent field 0): a step that flushed subnormals
// (the widening, its multiply, the MMA's inputs) would leave outputs of zero.
TEST_P(GpuSmallMFp8Test, SubnormalWeightsAreNotFlushed) {
  std::uniform_int_distribution<int> mantissa(0, 7), sign(0, 1);
  Operands o = make(9, 80, 4096, [&] {
    const int mag = mantissa(rng_);
    // e4m3fnuz's 0x80 is NaN, not -0.
    return static_cast<uint8_t>(mag == 0 && kEnc == Fp8Encoding::kE4M3FNUZ ? 0
                                                                           : sign(rng_) << 7 | mag);
  });
  check_all(o);
}

// What the entry point refuses: the line kernel, k not a multiple of 16, splits without a
// workspace, no scales.
TEST_P(GpuSmallMFp8Test, RefusesWhatItCannotRun) {
  EXPECT_FALSE(gpu::smallm_fp8_kernel_available(SmallMKernel::kLineRows16));
  EXPECT_FALSE(gpu::smallm_fp8_shape_supported(4, 64, 72));
  EXPECT_TRUE(gpu::smallm_fp8_shape_supported(16, 64, 80));
  EXPECT_FALSE(gpu::smallm_fp8_shape_supported(17, 64, 64));
  Operands o = make(4, 64, 64, [&] { return any_code(); });
  const auto call = [&](SmallMKernel kernel, int splits, int64_t k, const float* scale,
                        float* workspace) {
    return gpu::smallm_linear_fp8(kernel, splits, static_cast<const gpu_bf16*>(o.x_dev.get()),
                                  static_cast<const uint8_t*>(o.w_dev.get()), scale, false,
                                  o.out_dev.get(), true, o.m, o.n, k, workspace, stream_);
  };
  const auto* scale = static_cast<const float*>(o.tensor_scale_dev.get());
  auto* workspace = static_cast<float*>(o.workspace_dev.get());
  EXPECT_EQ(call(SmallMKernel::kLineRows16, 1, 64, scale, workspace), gpuErrorInvalidValue);
  EXPECT_EQ(call(SmallMKernel::kFma, 1, 56, scale, workspace), gpuErrorInvalidValue);
  EXPECT_EQ(call(SmallMKernel::kFma, 2, 64, scale, nullptr), gpuErrorInvalidValue);
  EXPECT_EQ(call(SmallMKernel::kFma, 1, 64, nullptr, workspace), gpuErrorInvalidValue);
  EXPECT_EQ(call(SmallMKernel::kFma, 1, 64, scale, workspace), gpuSuccess);
  EXPECT_EQ(gpuStreamSynchronize(stream_), gpuSuccess);
}

}  // namespace
}  // namespace tessera
