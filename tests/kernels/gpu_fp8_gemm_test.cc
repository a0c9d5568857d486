// Scaled FP8 GEMMs (kernels/gemm, e4m3fn on CUDA; e4m3fnuz on ROCm where the library has it):
// out[m, n] (bf16) = (x[m, k] * x_scale) @ (w[n, k] * w_scale)^T against an fp64 CPU reference
// computed from the very codes and scales the device quantized (so the only differences are the
// device's fp32 accumulation and the bf16 rounding of the output), at M = 1, 16, 64, 256 and the
// 8B model's qkv (6144 x 4096) and down (4096 x 14336) shapes, Default and the library's first
// other candidate; and an FP8 signature tuned through GpuTunableGemm, its result written to a
// results file and read back. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "base/fp8.h"
#include "base/half.h"
#include "kernels/fp8_quantize.h"
#include "kernels/gemm/gpu_gemm.h"
#include "kernels/gemm/gpu_tunable_gemm.h"
#include "kernels/gpu_backend.h"
#include "runtime/tuning/gemm_tuner.h"
#include "runtime/tuning/results_file.h"
#include "runtime/tuning/tuning_config.h"
#include "tests/kernels/device_alloc.h"

namespace tessera {
namespace {

// The tolerance the reference check allows: the bf16 output's rounding (2^-8 relative) and the
// accumulation order, on outputs of O(1) (x in +-1, w of variance 1/k).
constexpr double kRtol = 1e-2, kAtol = 1e-2;

class GpuFp8GemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (GpuBackend::device_count() == 0) GTEST_SKIP() << "no GPU visible";
    ASSERT_EQ(gpuSetDevice(0), gpuSuccess);
    ASSERT_EQ(gpuStreamCreateWithFlags(&stream_, gpuStreamNonBlocking), gpuSuccess);
    std::unique_ptr<gpu::Gemm> g;
    ASSERT_TRUE(gpu::Gemm::create(&g).ok());
    gemm_ = std::move(g);
  }
  void TearDown() override {
    gemm_.reset();
    if (stream_ != nullptr) (void)gpuStreamDestroy(stream_);
  }

  // bf16 values in +-max, [rows, cols], uploaded and quantized on the device per tensor or per
  // row (rows then 2^-3 .. 1 in magnitude, so that a per-tensor reading of row-wise
  // scales shows); the codes and the scales come back for the reference.
  struct Quantized {
    DevicePtr codes, scale;
    std::vector<uint8_t> host_codes;
    std::vector<float> host_scales;  // one, or one per row
    float scale_of_row(int64_t r) const { return host_scales[host_scales.size() == 1 ? 0 : r]; }
  };
  Quantized quantize(int64_t rows, int64_t cols, float max, Fp8Encoding enc, bool rowwise) {
    const size_t count = static_cast<size_t>(rows * cols);
    const size_t scales = rowwise ? static_cast<size_t>(rows) : 1;
    std::uniform_real_distribution<float> u(-max, max);
    std::vector<uint16_t> bits(count);
    for (size_t i = 0; i < count; ++i) {
      const int row = static_cast<int>(i / static_cast<size_t>(cols));
      bits[i] = float_to_bf16(u(rng_) * (rowwise ? std::ldexp(1.0f, row % 4 - 3) : 1.0f));
    }
    DevicePtr values = device_alloc(count * 2);
    DevicePtr scratch = device_alloc(gpu::kFp8PerTensorScratchBytes);
    Quantized q{device_alloc(count), device_alloc(scales * 4), std::vector<uint8_t>(count),
                std::vector<float>(scales)};
    EXPECT_EQ(gpuMemcpy(values.get(), bits.data(), count * 2, gpuMemcpyHostToDevice), gpuSuccess);
    // A copy from pageable memory may return before its DMA is done; stream_ does not wait for it.
    EXPECT_EQ(gpuDeviceSynchronize(), gpuSuccess);
    const auto* v = static_cast<const gpu_bf16*>(values.get());
    auto* codes = static_cast<uint8_t*>(q.codes.get());
    auto* scale = static_cast<float*>(q.scale.get());
    EXPECT_EQ(rowwise ? gpu::quantize_fp8_per_row(v, rows, cols, enc, codes, scale, stream_)
                      : gpu::quantize_fp8_per_tensor(v, static_cast<int64_t>(count), enc, codes,
                                                     scale, scratch.get(), stream_),
              gpuSuccess);
    EXPECT_EQ(gpuStreamSynchronize(stream_), gpuSuccess);
    EXPECT_EQ(gpuMemcpy(q.host_codes.data(), q.codes.get(), count, gpuMemcpyDeviceToHost),
              gpuSuccess);
    EXPECT_EQ(gpuMemcpy(q.host_scales.data(), q.scale.get(), scales * 4, gpuMemcpyDeviceToHost),
              gpuSuccess);
    return q;
  }

  gpuStream_t stream_ = nullptr;
  std::unique_ptr<gpu::Gemm> gemm_;
  std::mt19937 rng_{2024};
};

// Per-tensor and row-wise scales (a scale per token of x, per output feature of w); the library's
// solutions (tessera's FP8-weight kernels read x unquantized: gpu_smallm_fp8_test.cc).
TEST_F(GpuFp8GemmTest, MatchesCpuReference) {
  const GemmDType dtype = gpu::fp8_gemm_dtype();
  const Fp8Encoding enc = gpu::fp8_encoding_of(dtype);
  struct NK {
    int64_t n, k;
  };
  for (const bool rowwise : {false, true}) {
  for (const NK nk : {NK{6144, 4096}, NK{4096, 14336}}) {
    const Quantized w = quantize(nk.n, nk.k, std::sqrt(3.0f / static_cast<float>(nk.k)), enc,
                                 rowwise);
    std::vector<float> wf(w.host_codes.size());
    for (size_t i = 0; i < wf.size(); ++i) wf[i] = fp8_to_float(enc, w.host_codes[i]);
    for (int64_t m : {1, 16, 64, 256}) {
      const gpu::GemmShape shape{m, nk.n, nk.k, dtype, GemmDType::kBF16, rowwise};
      const Quantized x = quantize(m, nk.k, 1.0f, enc, rowwise);
      auto candidates = gemm_->candidates(shape);
      ASSERT_TRUE(candidates.ok()) << candidates.status();
      std::vector<std::string> names = {"Default"};
      if (candidates->size() > 1) names.push_back((*candidates)[1].name);
      DevicePtr out = device_alloc(static_cast<size_t>(m * nk.n) * 2);
      // Every row, every 16th output feature: the reference stays cheap at the 8B shapes.
      for (const std::string& name : names) {
        auto solution = gemm_->resolve(shape, name);
        ASSERT_TRUE(solution.ok()) << name << ": " << solution.status();
        ASSERT_EQ(gpuMemsetAsync(out.get(), 0xff, m * nk.n * 2, stream_), gpuSuccess);
        const gpu::GemmScales scales{static_cast<const float*>(x.scale.get()),
                                     static_cast<const float*>(w.scale.get())};
        ASSERT_TRUE(gemm_->run(*solution, shape, x.codes.get(), w.codes.get(), out.get(), stream_,
                               scales)
                        .ok());
        std::vector<uint16_t> got(static_cast<size_t>(m * nk.n));
        ASSERT_EQ(gpuStreamSynchronize(stream_), gpuSuccess);
        ASSERT_EQ(gpuMemcpy(got.data(), out.get(), got.size() * 2, gpuMemcpyDeviceToHost),
                  gpuSuccess);
        double worst = 0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < nk.n; j += 16) {
            double acc = 0;
            for (int64_t p = 0; p < nk.k; ++p) {
              acc += static_cast<double>(fp8_to_float(enc, x.host_codes[i * nk.k + p])) *
                     wf[j * nk.k + p];
            }
            const double ref = acc * x.scale_of_row(i) * w.scale_of_row(j);
            const double err = std::fabs(bf16_to_float(got[i * nk.n + j]) - ref);
            worst = std::max(worst, std::isnan(err) ? INFINITY : err);
            ASSERT_LE(err, kAtol + kRtol * std::fabs(ref))
                << name << (rowwise ? " row-wise" : "") << " m=" << m << " n=" << nk.n
                << " k=" << nk.k << " at [" << i << ", "
                << j << "]: " << bf16_to_float(got[i * nk.n + j]) << " vs " << ref;
          }
        }
        EXPECT_LT(worst, 0.05) << name;
      }
    }
  }
  }
}

TEST_F(GpuFp8GemmTest, RunWithoutScalesIsAnError) {
  const gpu::GemmShape shape{16, 256, 256, gpu::fp8_gemm_dtype(), GemmDType::kBF16};
  DevicePtr x = device_alloc(16 * 256), w = device_alloc(256 * 256);
  DevicePtr out = device_alloc(16 * 256 * 2);
  const absl::Status s =
      gemm_->run(gpu::Gemm::Solution{}, shape, x.get(), w.get(), out.get(), stream_);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

// Untuned, a decode-sized row-wise FP8 shape runs the 16-row FP8-weight kernel while its row tiles
// fit in one wave at two CTAs per multiprocessor, the three-per-multiprocessor one past that; other
// shapes run the library's Default.
TEST_F(GpuFp8GemmTest, UntunedDecodeShapesPickTheirKernelByWaves) {
  gpuDeviceProp prop{};
  ASSERT_EQ(gpuGetDeviceProperties(&prop, 0), gpuSuccess);
  const int64_t one_wave_rows = 16 * 2 * static_cast<int64_t>(prop.multiProcessorCount);
  const auto untuned = [&](int64_t m, int64_t n, bool rowwise) {
    return gemm_->untuned_solution(
        gpu::GemmShape{m, n, 4096, gpu::fp8_gemm_dtype(), GemmDType::kBF16, rowwise});
  };
#if defined(TESSERA_CUDA)
  EXPECT_EQ(untuned(1, one_wave_rows, true), "tessera_smallm_w8a16_mma16_splitk1");
  EXPECT_EQ(untuned(16, one_wave_rows + 16, true), "tessera_smallm_w8a16_mma16x3_splitk1");
#endif
  EXPECT_EQ(untuned(17, one_wave_rows, true), "Default");
  EXPECT_EQ(untuned(1, one_wave_rows, false), "Default");
  EXPECT_EQ(gemm_->untuned_solution(
                gpu::GemmShape{1, 4096, 4096, GemmDType::kBF16, GemmDType::kBF16}),
            "Default");
}

// Per tensor and row-wise; at m = 16 the candidates include tessera's FP8-weight kernels, which
// read x before quantization: every candidate passes the FP8 numerics check.
TEST_F(GpuFp8GemmTest, TuningWritesAndReadsBackAResultsLine) {
  for (const bool rowwise : {false, true}) {
  SCOPED_TRACE(rowwise ? "row-wise" : "per tensor");
  auto tunable = gpu::GpuTunableGemm::create(0);
  ASSERT_TRUE(tunable.ok()) << tunable.status();
  const GemmSignature sig = GemmSignature::for_linear(16, 6144, 4096, gpu::fp8_gemm_dtype(),
                                                      GemmDType::kBF16, rowwise);
  TuningConfig config;
  config.max_tuning_iterations = 10;
  absl::StatusOr<TuneOutcome> outcome = tune_gemm(**tunable, sig, config);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_GT(outcome->best_ms, 0);
  int rejected = 0;
  for (const CandidateReport& c : outcome->candidates) {
    if (c.verdict == CandidateVerdict::kRejected) ++rejected;
  }
  EXPECT_EQ(rejected, 0) << "candidates outside the FP8 tolerance";

  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tessera_fp8_results_" + std::to_string(::getpid()) + ".csv"))
                               .string();
  Validators validators;
  for (const auto& [k, v] : (*tunable)->validators()) validators[k] = v;
  TunedEntries entries;
  entries[sig] = TunedSolution{outcome->best, outcome->best_ms};
  ASSERT_TRUE(ResultsFile::save(path, validators, entries).ok());
  absl::StatusOr<LoadedResults> loaded = ResultsFile::load(path, validators);
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->warnings.empty()) << loaded->warnings.front();
  ASSERT_EQ(loaded->entries.count(sig), 1u);
  EXPECT_EQ(loaded->entries.at(sig).solution, outcome->best);
  // The line is PyTorch's ScaledGemmTunableOp's.
  absl::StatusOr<std::string> text = ResultsFile::format(validators, entries);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find(sig.op_name() + ",tn_6144_16_4096_ld_4096_4096_6144_rw_" +
                       (rowwise ? "1" : "0") + "_bias_None," + outcome->best),
            std::string::npos)
      << *text;
  // The solution named in the file runs the signature again.
  absl::StatusOr<gpu::GemmShape> shape = gpu::shape_of(sig);
  ASSERT_TRUE(shape.ok());
  EXPECT_TRUE(gemm_->resolve(*shape, outcome->best).ok());
  }
}

}  // namespace
}  // namespace tessera
