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
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/half.h"
#include "kernels/gpu_backend.h"
#include "tests/kernels/suite_gpu_backend.h"

namespace tessera {
namespace {

class GpuFp8LinearTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (GpuBackend::device_count() == 0) GTEST_SKIP() << "no GPU visible";
    backend_ = suite_gpu_backend<GpuFp8LinearTest>();
    ASSERT_NE(backend_, nullptr);
    if (absl::Status s = backend_->supports(Quantization::kFp8); !s.ok()) GTEST_SKIP() << s;
  }

  // A bf16 tensor of `n` values uniform in +-max, on the device.
  Tensor random_bf16(std::vector<DeviceBuffer>& keep, std::initializer_list<int64_t> dims,
                     float max) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    std::uniform_real_distribution<float> u(-max, max);
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = u(rng_);
    keep.push_back(*backend_->allocate(static_cast<size_t>(n) * 2));
    Tensor t(keep.back().data(), DType::kBF16, dims);
    backend_->upload_f32(values, t);
    return t;
  }
  Tensor empty(std::vector<DeviceBuffer>& keep, DType dtype, std::initializer_list<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    keep.push_back(*backend_->allocate(static_cast<size_t>(n) * element_size(dtype)));
    return Tensor(keep.back().data(), dtype, dims);
  }
  std::vector<float> download(const Tensor& t) {
    std::vector<uint16_t> bits(static_cast<size_t>(t.numel()));
    backend_->copy_to_host(bits.data(), t.data, t.nbytes());
    EXPECT_TRUE(backend_->synchronize().ok());
    std::vector<float> out;
    for (uint16_t b : bits) out.push_back(bf16_to_float(b));
    return out;
  }

  // codes and row scales of w, quantized by the backend.
  Tensor quantized(std::vector<DeviceBuffer>& keep, const Tensor& w) {
    Tensor codes = empty(keep, DType::kF8_E4M3, {w.dim(0), w.dim(1)});
    const Tensor scale = empty(keep, DType::kF32, {w.dim(0)});
    backend_->quantize_fp8(w, codes, scale);
    codes.scale = scale.as<float>();
    EXPECT_TRUE(backend_->synchronize().ok());
    return codes;
  }
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
  double fp8_error(std::vector<DeviceBuffer>& keep, const Tensor& w, const Tensor& codes,
                   int64_t m, int64_t groups = 1) {
    const int64_t n = w.dim(0), k = w.dim(1);
    const Tensor x = random_bf16(keep, {m, k}, 1.0f);
    const Tensor ref = empty(keep, DType::kBF16, {m, n}), got = empty(keep, DType::kBF16, {m, n});
    backend_->linear(x, w, ref);
    backend_->linear(x, codes, got);
    const absl::Status s = backend_->synchronize();
    EXPECT_TRUE(s.ok()) << s;
    return s.ok() ? relative_error(download(ref), download(got), n, groups) : 1.0;
  }

  GpuBackend* backend_ = nullptr;
  std::mt19937 rng_{8};
};

TEST_F(GpuFp8LinearTest, MatchesTheBf16LinearWithinFp8Rounding) {
  const int64_t n = 1024, k = 4096;
  std::vector<DeviceBuffer> keep;
  const Tensor w = random_bf16(keep, {n, k}, std::sqrt(3.0f / k));
  const Tensor codes = quantized(keep, w);
  for (int64_t m : {1, 3, 16, 17, 300}) {
    // e4m3 keeps 3 mantissa bits (relative rounding up to 1/16 per element, both operands):
    // over k = 4096 products the error averages to a few percent of the output's norm.
    EXPECT_LT(fp8_error(keep, w, codes, m), 0.06) << "m=" << m;
  }
}

// Rows (output features) 2^-8 .. 2^7 apart in magnitude: one scale per tensor would leave the
// small rows in FP8's subnormals or at zero; a scale per row keeps each as accurate as the rest.
// (n a multiple of 16: cuBLASLt's FP8 GEMMs want 16-byte aligned rows of the output.)
TEST_F(GpuFp8LinearTest, EveryRowKeepsItsPrecisionWhateverItsMagnitude) {
  const int64_t n = 256, k = 1024, kMagnitudes = 16;
  std::vector<DeviceBuffer> keep;
  std::vector<float> values(static_cast<size_t>(n * k));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t r = 0; r < n; ++r) {
    const float row_scale = std::ldexp(1.0f, static_cast<int>(r % kMagnitudes) - 8);
    for (int64_t c = 0; c < k; ++c) values[static_cast<size_t>(r * k + c)] = u(rng_) * row_scale;
  }
  keep.push_back(*backend_->allocate(values.size() * 2));
  const Tensor w(keep.back().data(), DType::kBF16, {n, k});
  backend_->upload_f32(values, w);
  const Tensor codes = quantized(keep, w);
  for (int64_t m : {1, 16, 64}) {
    // Per magnitude class (16 features each).
    EXPECT_LT(fp8_error(keep, w, codes, m, kMagnitudes), 0.08) << "m=" << m;
  }
}

TEST_F(GpuFp8LinearTest, RecordedAndReplayedLikeAnyDecodeOp) {
  const int64_t n = 512, k = 1024, m = 4;
  std::vector<DeviceBuffer> keep;
  const Tensor w = random_bf16(keep, {n, k}, 0.05f);
  const Tensor codes = quantized(keep, w);
  const Tensor x = random_bf16(keep, {m, k}, 1.0f);
  const Tensor direct = empty(keep, DType::kBF16, {m, n}), out = empty(keep, DType::kBF16, {m, n});
  backend_->linear(x, codes, direct);
  ASSERT_TRUE(backend_->synchronize().ok());
  const std::vector<float> want = download(direct);
  const uint64_t recorded = backend_->graphs_recorded(), replays = backend_->graph_replays();
  const std::vector<float> nan(static_cast<size_t>(m * n), std::numeric_limits<float>::quiet_NaN());
  for (int step = 0; step < 4; ++step) {  // direct, recorded, replayed twice
    backend_->upload_f32(nan, out);  // a step that writes nothing cannot pass
    ASSERT_TRUE(backend_->run_graph(77, [&] { backend_->linear(x, codes, out); }).ok());
    ASSERT_TRUE(backend_->synchronize().ok());
    EXPECT_EQ(download(out), want) << "step " << step;
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
  std::vector<DeviceBuffer> keep;
  const Tensor w = random_bf16(keep, {n, k}, 0.03f);
  const Tensor codes = quantized(keep, w);
  const Tensor x = random_bf16(keep, {m, k}, 1.0f);
  const Tensor untuned = empty(keep, DType::kBF16, {m, n}), got = empty(keep, DType::kBF16, {m, n});
  // NaN where nothing is written: vectors holding one never compare equal.
  const std::vector<float> nan(static_cast<size_t>(m * n), std::numeric_limits<float>::quiet_NaN());
  backend_->upload_f32(nan, untuned);
  backend_->upload_f32(nan, got);
  ASSERT_FALSE(backend_->fp8_activations(codes, m)) << "untuned decode sizes read 16-bit x";
  backend_->linear(x, codes, untuned);
  NoAnswers source;
  backend_->set_gemm_solutions(&source);
  EXPECT_FALSE(backend_->fp8_activations(codes, m));
  backend_->linear(x, codes, got);
  ASSERT_TRUE(backend_->synchronize().ok());
  EXPECT_EQ(download(got), download(untuned));
  source.answers[gpu::signature_of(gpu::GemmShape{m, n, k, gpu::fp8_gemm_dtype(), GemmDType::kBF16,
                                                  /*rowwise=*/true})] = "Default";
  ++source.version_number;
  EXPECT_TRUE(backend_->fp8_activations(codes, m)) << "Default reads FP8 x";
  backend_->set_gemm_solutions(nullptr);
}

TEST_F(GpuFp8LinearTest, AnFp8WeightWithoutItsScaleIsAnError) {
  std::vector<DeviceBuffer> keep;
  const Tensor codes = empty(keep, DType::kF8_E4M3, {64, 64});
  const Tensor x = random_bf16(keep, {1, 64}, 1.0f), out = empty(keep, DType::kBF16, {1, 64});
  backend_->linear(x, codes, out);
  const absl::Status s = backend_->synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(std::string(s.message()).find("without its scale"), std::string::npos) << s;
}

}  // namespace
}  // namespace tessera
