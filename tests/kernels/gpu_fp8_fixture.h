// The fixture of the GPU backend's FP8 test suites (gpu_fp8_linear_test, gpu_fp8_activation_test):
// the suite's backend (suite_gpu_backend; the test skips without a GPU or on one without FP8), the
// device memory its tensors live in for the test, and the tensors those tests build -- random
// bf16 values, FP8 codes and row scales poisoned until written, codes quantized per row by the
// backend, bf16 outputs poisoned with NaN -- and read back.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <random>
#include <vector>

#include "base/half.h"
#include "kernels/gpu_backend.h"
#include "tests/kernels/suite_gpu_backend.h"

namespace tessera {

template <typename Suite>
class GpuFp8Fixture : public ::testing::Test {
 protected:
  explicit GpuFp8Fixture(uint32_t seed) : rng_(seed) {}

  void SetUp() override {
    if (GpuBackend::device_count() == 0) GTEST_SKIP() << "no GPU visible";
    backend_ = suite_gpu_backend<Suite>();
    ASSERT_NE(backend_, nullptr);
    if (absl::Status s = backend_->supports(Quantization::kFp8); !s.ok()) GTEST_SKIP() << s;
  }

  // Device memory for a dtype x dims tensor, kept until the test ends (16 bytes spare: a test may
  // take a view that starts off the allocation's alignment).
  Tensor empty(DType dtype, std::initializer_list<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    keep_.push_back(*backend_->allocate(static_cast<size_t>(n) * element_size(dtype) + 16));
    return Tensor(keep_.back().data(), dtype, dims);
  }
  // A bf16 tensor of values uniform in +-max.
  Tensor random_bf16(std::initializer_list<int64_t> dims, float max) {
    Tensor t = empty(DType::kBF16, dims);
    std::uniform_real_distribution<float> u(-max, max);
    std::vector<float> values(static_cast<size_t>(t.numel()));
    for (float& v : values) v = u(rng_);
    backend_->upload_f32(values, t);
    return t;
  }
  // `bytes` bytes at p set to `value`.
  void poison(void* p, size_t bytes, uint8_t value) {
    const std::vector<uint8_t> fill(bytes, value);
    backend_->upload_bytes(fill, Tensor(p, DType::kF8_E4M3, {static_cast<int64_t>(bytes)}));
  }
  // FP8 codes of rows x width with a scale per row, both poisoned (0x7f codes are NaN; so are the
  // scales' 0xff bytes): anything left unwritten shows.
  Tensor fp8_rows(int64_t rows, int64_t width) {
    Tensor t = empty(DType::kF8_E4M3, {rows, width});
    t.scale = static_cast<float*>(empty(DType::kF32, {rows}).data);
    poison(t.data, t.nbytes(), 0x7f);
    poison(t.scale, static_cast<size_t>(rows) * sizeof(float), 0xff);
    return t;
  }
  // A 16-bit [rows, cols] tensor's codes and row scales, quantized by the backend as the linear
  // quantizes its x and as quantization: fp8 quantizes weights.
  Tensor quantized(const Tensor& t) {
    Tensor codes = fp8_rows(t.dim(0), t.dim(1));
    backend_->quantize_fp8(t, codes, Tensor(codes.scale, DType::kF32, {t.dim(0)}));
    return codes;
  }
  // A bf16 output poisoned with NaN (0xffff), so that an output nobody wrote cannot pass.
  Tensor poisoned_bf16(std::initializer_list<int64_t> dims) {
    Tensor t = empty(DType::kBF16, dims);
    poison(t.data, t.nbytes(), 0xff);
    return t;
  }
  // A bf16 tensor's values, once the stream's work is done.
  std::vector<float> download_bf16(const Tensor& t) {
    std::vector<uint16_t> bits(static_cast<size_t>(t.numel()));
    backend_->copy_to_host(bits.data(), t.data, t.nbytes());
    EXPECT_TRUE(backend_->synchronize().ok());
    std::vector<float> out;
    out.reserve(bits.size());
    for (uint16_t b : bits) out.push_back(bf16_to_float(b));
    return out;
  }

  GpuBackend* backend_ = nullptr;
  std::vector<DeviceBuffer> keep_;
  std::mt19937 rng_;
};

}  // namespace tessera
