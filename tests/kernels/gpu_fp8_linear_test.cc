// The FP8 weights of `quantization: fp8` through the GPU backend: Backend::quantize_fp8 (a scale
// per row) and Backend::linear with an FP8 weight (at decode sizes tessera's FP8-weight kernels
// on the 16-bit activations, else the activations quantized per token and a row-wise scaled
// cuBLASLt GEMM) against the backend's own bf16 linear on the same weights, at decode and prefill
// sizes, on rows of very different magnitudes, directly and replayed from a graph; an FP8 weight
// without its scale is an error, not garbage. Skips without a GPU or on one without FP8
// (Backend::supports).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/gpu_backend.h"
#include "tests/kernels/gpu_fp8_fixture.h"

namespace tessera {
namespace {

class GpuFp8LinearTest : public GpuFp8Fixture<GpuFp8LinearTest> {
 protected:
  GpuFp8LinearTest() : GpuFp8Fixture(8) {}

  // The relative norm error of b against a ([m, n] outputs), the largest over `groups` groups of
  // output features (feature f in group f % groups).
  static double relative_error(const std::vector<float>& a, const std::vector<float>& b, int64_t n,
                               int64_t groups = 1) {
    std::vector<double> num(static_cast<size_t>(groups)), den(static_cast<size_t>(groups));
    for (size_t i = 0; i < a.size(); ++i) {
      const size_t g = i % static_cast<size_t>(n) % static_cast<size_t>(groups);
      num[g] += (a[i] - b[i]) * double(a[i] - b[i]);
      den[g] += a[i] * double(a[i]);
    }
    double worst = 0;
    for (int64_t g = 0; g < groups; ++g) {
      worst = std::max(worst, den[g] > 0 ? std::sqrt(num[g] / den[g]) : 1.0);
    }
    return worst;
  }

  // The backend's bf16 linear on w against its FP8 linear on `codes` (w quantized) for a random
  // x of m tokens: relative_error of the FP8 output, over `groups` groups of output features.
  double fp8_error(const Tensor& w, const Tensor& codes, int64_t m, int64_t groups = 1) {
    const int64_t n = w.dim(0), k = w.dim(1);
    const Tensor x = random_bf16({m, k}, 1.0f);
    const Tensor ref = poisoned_bf16({m, n}), got = poisoned_bf16({m, n});
    backend_->linear(x, w, ref);
    backend_->linear(x, codes, got);
    const absl::Status s = backend_->synchronize();
    EXPECT_TRUE(s.ok()) << s;
    // An output left unwritten holds NaN, and so does its error: no bound is met.
    return s.ok() ? relative_error(download_bf16(ref), download_bf16(got), n, groups) : 1.0;
  }

  // A decode-sized case: w [n, k] of values in +-w_max, its codes, and x [m, k] in +-1.
  struct DecodeCase {
    Tensor w, codes, x;
  };
  DecodeCase decode_case(int64_t n, int64_t k, int64_t m, float w_max) {
    DecodeCase c;
    c.w = random_bf16({n, k}, w_max);
    c.codes = quantized(c.w);
    c.x = random_bf16({m, k}, 1.0f);
    return c;
  }
};

TEST_F(GpuFp8LinearTest, MatchesTheBf16LinearWithinFp8Rounding) {
  const int64_t n = 1024, k = 4096;
  const Tensor w = random_bf16({n, k}, std::sqrt(3.0f / k));
  const Tensor codes = quantized(w);
  for (int64_t m : {1, 3, 16, 17, 300}) {
    // e4m3 keeps 3 mantissa bits (relative rounding up to 1/16 per element, both operands):
    // over k = 4096 products the error averages to a few percent of the output's norm.
    EXPECT_LT(fp8_error(w, codes, m), 0.06) << "m=" << m;
  }
}

// Rows (output features) 2^-8 .. 2^7 apart in magnitude: one scale per tensor would leave the
// small rows in FP8's subnormals or at zero; a scale per row keeps each as accurate as the rest.
// (n a multiple of 16: cuBLASLt's FP8 GEMMs want 16-byte aligned rows of the output.)
TEST_F(GpuFp8LinearTest, EveryRowKeepsItsPrecisionWhateverItsMagnitude) {
  const int64_t n = 256, k = 1024, kMagnitudes = 16;
  std::vector<float> values(static_cast<size_t>(n * k));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t r = 0; r < n; ++r) {
    const float row_scale = std::ldexp(1.0f, static_cast<int>(r % kMagnitudes) - 8);
    for (int64_t c = 0; c < k; ++c) values[static_cast<size_t>(r * k + c)] = u(rng_) * row_scale;
  }
  const Tensor w = empty(DType::kBF16, {n, k});
  backend_->upload_f32(values, w);
  const Tensor codes = quantized(w);
  for (int64_t m : {1, 16, 64}) {
    // Per magnitude class (16 features each).
    EXPECT_LT(fp8_error(w, codes, m, kMagnitudes), 0.08) << "m=" << m;
  }
}

TEST_F(GpuFp8LinearTest, RecordedAndReplayedLikeAnyDecodeOp) {
  const int64_t n = 512, k = 1024, m = 4;
  const DecodeCase c = decode_case(n, k, m, 0.05f);
  const Tensor direct = poisoned_bf16({m, n}), out = poisoned_bf16({m, n});
  backend_->linear(c.x, c.codes, direct);
  const std::vector<float> want = download_bf16(direct);
  const uint64_t recorded = backend_->graphs_recorded(), replays = backend_->graph_replays();
  for (int step = 0; step < 4; ++step) {  // direct, recorded, replayed twice
    poison(out.data, out.nbytes(), 0xff);  // NaN: a step that writes nothing cannot pass
    ASSERT_TRUE(backend_->run_graph(77, [&] { backend_->linear(c.x, c.codes, out); }).ok());
    EXPECT_EQ(download_bf16(out), want) << "step " << step;
  }
  EXPECT_EQ(backend_->graphs_recorded() - recorded, 1u);
  EXPECT_EQ(backend_->graph_replays() - replays, 2u);
  backend_->release_graphs();
}

// A tuning context that has nothing for a signature (use mode, a shape outside its file) leaves the
// shape to its untuned solution -- tessera's FP8-weight kernel at decode sizes, which reads 16-bit
// x -- exactly as no context at all would; an answer of Default runs the library on FP8 x.
class NoAnswers final : public GemmSolutionSource {
 public:
  std::optional<std::string> solution_for(const GemmSignature& sig) override {
    if (auto it = answers.find(sig); it != answers.end()) return it->second;
    return std::nullopt;
  }
  uint64_t version() const override { return version_number; }
  std::map<GemmSignature, std::string> answers;
  uint64_t version_number = 1;
};

TEST_F(GpuFp8LinearTest, AShapeTheContextLacksRunsItsUntunedSolution) {
  const int64_t n = 1024, k = 4096, m = 4;
  const DecodeCase c = decode_case(n, k, m, 0.03f);
  // NaN where nothing is written: vectors holding one never compare equal.
  const Tensor untuned = poisoned_bf16({m, n}), got = poisoned_bf16({m, n});
  ASSERT_FALSE(backend_->fp8_activations(c.codes, m)) << "untuned decode sizes read 16-bit x";
  backend_->linear(c.x, c.codes, untuned);
  NoAnswers source;
  backend_->set_gemm_solutions(&source);
  EXPECT_FALSE(backend_->fp8_activations(c.codes, m));
  backend_->linear(c.x, c.codes, got);
  EXPECT_EQ(download_bf16(got), download_bf16(untuned));
  source.answers[gpu::signature_of(gpu::GemmShape{m, n, k, gpu::fp8_gemm_dtype(), GemmDType::kBF16,
                                                  /*rowwise=*/true})] = "Default";
  ++source.version_number;
  EXPECT_TRUE(backend_->fp8_activations(c.codes, m)) << "Default reads FP8 x";
  backend_->set_gemm_solutions(nullptr);
}

TEST_F(GpuFp8LinearTest, AnFp8WeightWithoutItsScaleIsAnError) {
  const Tensor codes = empty(DType::kF8_E4M3, {64, 64});
  const Tensor x = random_bf16({1, 64}, 1.0f), out = empty(DType::kBF16, {1, 64});
  backend_->linear(x, codes, out);
  const absl::Status s = backend_->synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(std::string(s.message()).find("without its scale"), std::string::npos) << s;
}

}  // namespace
}  // namespace tessera
