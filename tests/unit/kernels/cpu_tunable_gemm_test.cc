// The CPU backend's GEMM candidates: each matches the default on random shapes within the fp32
// tolerance, the tuner accepts them all, and linear() runs the solution its source names.
#include "kernels/cpu/cpu_tunable_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>
#include <random>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_gemm_algos.h"
#include "kernels/cpu/cpu_ops.h"
#include "runtime/tuning/gemm_tuner.h"

namespace tessera {
namespace {

TEST(CpuTunableGemm, EveryCandidateMatchesTheDefaultOnRandomShapes) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> dim(1, 97);
  const TuningConfig config;
  CpuTunableGemm gemm(2);
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t tokens = trial < 3 ? 1 : dim(rng);
    const GemmSignature sig =
        GemmSignature::for_linear(tokens, dim(rng), dim(rng), GemmDType::kF32, GemmDType::kF32);
    SCOPED_TRACE(sig.key());
    absl::StatusOr<std::vector<std::string>> names = gemm.candidates(sig);
    ASSERT_TRUE(names.ok()) << names.status();
    ASSERT_EQ((*names)[0], kDefaultSolution);
    ASSERT_TRUE(gemm.prepare(sig, 2).ok());
    ASSERT_TRUE(gemm.run(kDefaultSolution, 0).ok());
    const std::vector<float> ref = *gemm.output(0);
    ASSERT_EQ(ref.size(), static_cast<size_t>(sig.m * sig.n));
    for (const std::string& name : *names) {
      ASSERT_TRUE(gemm.run(name, 1).ok()) << name;
      const std::vector<float> out = *gemm.output(1);
      for (size_t i = 0; i < out.size(); ++i) {
        const NumericsTolerance& tol = config.f32_tolerance;
        ASSERT_LE(std::fabs(out[i] - ref[i]), tol.atol + tol.rtol * std::fabs(ref[i]))
            << name << " element " << i;
      }
    }
    gemm.release();
    absl::StatusOr<TuneOutcome> outcome = tune_gemm(gemm, sig, config);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    for (const CandidateReport& r : outcome->candidates) {
      EXPECT_NE(r.verdict, CandidateVerdict::kRejected) << r.solution << ": " << r.reason;
      EXPECT_NE(r.verdict, CandidateVerdict::kFailed) << r.solution << ": " << r.reason;
    }
    EXPECT_GT(outcome->default_ms, 0);
  }
}

TEST(CpuTunableGemm, RefusesWhatItCannotRunNamingIt) {
  CpuTunableGemm gemm(2);
  const GemmSignature bf16 =
      GemmSignature::for_linear(2, 8, 16, GemmDType::kBF16, GemmDType::kBF16);
  absl::StatusOr<std::vector<std::string>> c = gemm.candidates(bf16);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find(bf16.key()), absl::string_view::npos);
  const GemmSignature f32 = GemmSignature::for_linear(2, 8, 16, GemmDType::kF32, GemmDType::kF32);
  ASSERT_TRUE(gemm.prepare(f32, 1).ok());
  absl::Status bad = gemm.run("cublaslt_algo_3", 0);
  EXPECT_NE(bad.message().find("cublaslt_algo_3"), absl::string_view::npos) << bad;
  EXPECT_FALSE(gemm.run(kDefaultSolution, 1).ok());  // only set 0 was prepared
}

TEST(CpuTunableGemm, ValidatorsNameTheBuildAndTheMachine) {
  CpuTunableGemm gemm(2);
  std::map<std::string, std::string> v;
  for (auto& [key, value] : gemm.validators()) v[key] = value;
  EXPECT_EQ(v.at("TESSERA_VERSION"), TESSERA_VERSION);
  EXPECT_FALSE(v.at("CPU_MODEL").empty());
  EXPECT_NE(v.at("OPENBLAS_CONFIG").find("OpenBLAS"), std::string::npos) << v.at("OPENBLAS_CONFIG");
  EXPECT_EQ(v.at("CPU_THREADS"), "2");  // the threads it was made with
}

// Answers a fixed solution and counts the questions.
class FixedSolutions final : public GemmSolutionSource {
 public:
  explicit FixedSolutions(std::string solution) : solution_(std::move(solution)) {}
  std::optional<std::string> solution_for(const GemmSignature& sig) override {
    ++asked;
    last = sig;
    return solution_;
  }
  uint64_t version() const override { return version_; }
  void bump() { ++version_; }
  int asked = 0;
  GemmSignature last;

 private:
  std::string solution_;
  uint64_t version_ = 0;
};

TEST(CpuBackendGemm, LinearAsksItsSourceOncePerShapeAndVersion) {
  CpuBackend backend(1);
  ASSERT_NE(backend.tunable_gemm(), nullptr);
  const int64_t m = 3, n = 5, k = 4;
  std::vector<float> x(m * k), w(n * k), expected(m * n), out(m * n);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * static_cast<float>(i % 5) - 0.5f;
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.125f * static_cast<float>(i % 7) - 0.25f;
  cpu::linear(x.data(), w.data(), m, n, k, expected.data());

  for (const char* solution : {"cpu_gemv_rows", "cpu_split_out", "not_a_cpu_solution"}) {
    SCOPED_TRACE(solution);
    FixedSolutions source(solution);
    backend.set_gemm_solutions(&source);
    const Tensor xt(x.data(), DType::kF32, {m, k});
    const Tensor wt(w.data(), DType::kF32, {n, k});
    const Tensor ot(out.data(), DType::kF32, {m, n});
    backend.linear(xt, wt, ot);
    backend.linear(xt, wt, ot);
    EXPECT_EQ(source.asked, 1);
    EXPECT_EQ(source.last, GemmSignature::for_linear(m, n, k, GemmDType::kF32, GemmDType::kF32));
    source.bump();
    backend.linear(xt, wt, ot);
    EXPECT_EQ(source.asked, 2);
    for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-6) << i;
    backend.set_gemm_solutions(nullptr);
  }
}

}  // namespace
}  // namespace tessera
