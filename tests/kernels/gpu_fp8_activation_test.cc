// FP8 activations quantized by the op that produces them (Backend::fp8_activations): rms_norm,
// add_rms_norm and gated_activation with an FP8 out write, bit for bit, the codes and row scales
// that the same op's 16-bit output quantized per row (Backend::quantize_fp8, the linear's own
// quantization) would hold, and the residual add is unchanged; linear on such an x gives, bit for
// bit, what it gives on the 16-bit x it quantizes itself -- row views off the scaled GEMM's
// alignment included. Every path: rows walked in 16-byte vectors and element by element, SiLU and
// GELU, a norm weight offset. Misshapen FP8 outputs are errors naming the op. Skips without a GPU
// or on one without FP8 (Backend::supports).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/gpu_backend.h"
#include "tests/kernels/gpu_fp8_fixture.h"

namespace tessera {
namespace {

class GpuFp8ActivationTest : public GpuFp8Fixture<GpuFp8ActivationTest> {
 protected:
  GpuFp8ActivationTest() : GpuFp8Fixture(18) {}

  std::vector<uint8_t> bytes(const void* p, size_t n) {
    std::vector<uint8_t> out(n);
    backend_->copy_to_host(out.data(), p, n);
    EXPECT_TRUE(backend_->synchronize().ok());
    return out;
  }
  std::vector<uint8_t> codes_of(const Tensor& t) { return bytes(t.data, t.nbytes()); }
  std::vector<uint8_t> scales_of(const Tensor& t) {
    return bytes(t.scale, static_cast<size_t>(t.dim(0)) * sizeof(float));
  }
  std::vector<uint8_t> contents(const Tensor& t) { return bytes(t.data, t.nbytes()); }
  // A copy of t in fresh memory (the residual each path starts from).
  Tensor copy(const Tensor& t) {
    Tensor c = empty(t.dtype, {t.dim(0), t.dim(1)});
    backend_->copy_to(*backend_, c.data, t.data, t.nbytes());
    return c;
  }
  // got and want poisoned alike (fp8_rows): equal only where both were written, which the finite
  // inputs' codes and scales show (the poison is NaN in both).
  void expect_same_fp8(const Tensor& got, const Tensor& want, const std::string& what) {
    const std::vector<uint8_t> scales = scales_of(got), codes = codes_of(got);
    for (size_t i = 0; i < scales.size(); i += sizeof(float)) {
      float s;
      std::memcpy(&s, scales.data() + i, sizeof(s));
      ASSERT_TRUE(std::isfinite(s) && s > 0.0f) << what << ": row " << i / sizeof(float)
                                                << "'s scale unwritten or bad: " << s;
    }
    ASSERT_EQ(std::count(codes.begin(), codes.end(), uint8_t{0x7f}), 0) << what << ": NaN codes";
    EXPECT_EQ(scales, scales_of(want)) << what << ": row scales";
    EXPECT_EQ(codes, codes_of(want)) << what << ": codes";
  }
  // Bytes of a bf16 tensor that hold no NaN (every element written from finite inputs).
  std::vector<uint8_t> written_bf16(const Tensor& t) {
    std::vector<uint8_t> b = contents(t);
    size_t nan = 0;
    for (size_t i = 0; i + 1 < b.size(); i += 2) {
      const uint16_t bits = static_cast<uint16_t>(b[i] | (b[i + 1] << 8));
      nan += (bits & 0x7f80) == 0x7f80 && (bits & 0x7f) != 0;
    }
    EXPECT_EQ(nan, 0u) << "elements left unwritten (NaN)";
    return b;
  }
};

TEST_F(GpuFp8ActivationTest, NormsWriteTheCodesOfTheirOutputQuantizedPerRow) {
  // 4096: 16-byte vectors; 1004: element by element (rows not a whole number of vectors).
  for (int64_t hidden : {4096, 1004}) {
    for (int64_t rows : {1, 37, 300}) {
      for (float offset : {0.0f, 1.0f}) {
        const std::string what = "hidden " + std::to_string(hidden) + ", " +
                                 std::to_string(rows) + " rows, weight offset " +
                                 std::to_string(offset);
        const NormSpec norm{1e-5f, offset};
        const Tensor x = random_bf16({rows, hidden}, 3.0f), w = random_bf16({1, hidden}, 1.0f);
        const Tensor weight(w.data, DType::kBF16, {hidden});
        // rms_norm
        const Tensor normed = empty(DType::kBF16, {rows, hidden});
        backend_->rms_norm(x, weight, norm, normed);
        const Tensor want = quantized(normed), got = fp8_rows(rows, hidden);
        backend_->rms_norm(x, weight, norm, got);
        ASSERT_TRUE(backend_->synchronize().ok()) << what;
        expect_same_fp8(got, want, "rms_norm, " + what);
        // add_rms_norm: the residual sums as before, and the norm of it is quantized.
        const Tensor residual = random_bf16({rows, hidden}, 3.0f);
        const Tensor r16 = copy(residual), r8 = copy(residual);
        backend_->add_rms_norm(r16, x, weight, norm, normed);
        const Tensor want_sum = quantized(normed), got_sum = fp8_rows(rows, hidden);
        backend_->add_rms_norm(r8, x, weight, norm, got_sum);
        ASSERT_TRUE(backend_->synchronize().ok()) << what;
        expect_same_fp8(got_sum, want_sum, "add_rms_norm, " + what);
        EXPECT_EQ(contents(r8), contents(r16)) << "add_rms_norm's residual, " << what;
      }
    }
  }
}

TEST_F(GpuFp8ActivationTest, GatedActivationsWriteTheCodesOfTheirOutputQuantizedPerRow) {
  // 14336 (the 8B model's): 16-byte vectors; 1001: element by element.
  for (int64_t inter : {14336, 1001}) {
    for (int64_t rows : {1, 37, 300}) {
      for (Activation act : {Activation::kSilu, Activation::kGeluTanh}) {
        const std::string what = "intermediate " + std::to_string(inter) + ", " +
                                 std::to_string(rows) + " rows, " +
                                 (act == Activation::kSilu ? "SiLU" : "GELU");
        const Tensor gate_up = random_bf16({rows, 2 * inter}, 4.0f);
        const Tensor out = empty(DType::kBF16, {rows, inter});
        backend_->gated_activation(gate_up, act, out);
        const Tensor want = quantized(out), got = fp8_rows(rows, inter);
        backend_->gated_activation(gate_up, act, got);
        ASSERT_TRUE(backend_->synchronize().ok()) << what;
        expect_same_fp8(got, want, what);
      }
    }
  }
}

TEST_F(GpuFp8ActivationTest, LinearReadsTheCodesItsProducerWrote) {
  const int64_t n = 1024, k = 4096, m = 300;
  const Tensor w16 = random_bf16({n, k}, 0.03f);
  Tensor w = fp8_rows(n, k);
  backend_->quantize_fp8(w16, w, Tensor(w.scale, DType::kF32, {n}));
  // cuBLASLt's row-wise scaled GEMM at 300 rows reads FP8 x; nothing does for a 16-bit weight.
  ASSERT_TRUE(backend_->fp8_activations(w, m));
  EXPECT_FALSE(backend_->fp8_activations(w16, m));
  const Tensor x = random_bf16({m, k}, 2.0f), x8 = quantized(x);
  const Tensor want = poisoned_bf16({m, n}), got = poisoned_bf16({m, n});
  backend_->linear(x, w, want);
  backend_->linear(x8, w, got);
  ASSERT_TRUE(backend_->synchronize().ok());
  EXPECT_EQ(written_bf16(got), written_bf16(want));
  // Rows 1.. of each: the codes' view starts a row in (aligned), its scales 4 bytes in (not).
  const Tensor want_view = poisoned_bf16({m - 1, n}), got_view = poisoned_bf16({m - 1, n});
  backend_->linear(x.rows(1, m - 1), w, want_view);
  backend_->linear(x8.rows(1, m - 1), w, got_view);
  ASSERT_TRUE(backend_->synchronize().ok());
  EXPECT_EQ(written_bf16(got_view), written_bf16(want_view));
}

TEST_F(GpuFp8ActivationTest, MisshapenFp8OutputsAreErrorsNamingTheOp) {
  const Tensor x = random_bf16({4, 256}, 1.0f), w = random_bf16({1, 256}, 1.0f);
  const Tensor weight(w.data, DType::kBF16, {256});
  Tensor no_scales = fp8_rows(4, 256);
  no_scales.scale = nullptr;
  backend_->rms_norm(x, weight, NormSpec{1e-5f, 0.0f}, no_scales);
  absl::Status s = backend_->synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(std::string(s.message()).find("rms_norm: an FP8 out"), std::string::npos) << s;
  backend_->gated_activation(x, Activation::kSilu, fp8_rows(4, 256));  // want 4 x 128
  s = backend_->synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(std::string(s.message()).find("gated_activation: an FP8 out of 4 x 256"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace tessera
