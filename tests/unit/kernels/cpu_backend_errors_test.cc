// The CPU backend's answer to an op handed a tensor it cannot compute on: the same policy as the
// GPU backend's (Backend::record_error) -- the op does nothing, the step's synchronize() names the
// backend, the op, the tensor and both dtypes, and the next step starts clean.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace tessera {
namespace {

TEST(CpuBackendErrors, AWrongDtypeFailsTheStepNamingTheOpAndTensor) {
  CpuBackend backend(1);
  std::vector<float> x(8, 1.0f), w(4, 1.0f), out(8, -7.0f);
  std::vector<uint16_t> half_out(8, 0);
  const Tensor xt(x.data(), DType::kF32, {2, 4});
  const Tensor wt(w.data(), DType::kF32, {4});
  const Tensor bad(half_out.data(), DType::kBF16, {2, 4});

  backend.rms_norm(xt, wt, NormSpec{1e-5f}, bad);
  backend.rms_norm(xt, wt, NormSpec{1e-5f}, Tensor(out.data(), DType::kF32, {2, 4}));
  const absl::Status s = backend.synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("rms_norm"), std::string_view::npos) << s;
  EXPECT_NE(s.message().find("out is BF16"), std::string_view::npos) << s;
  EXPECT_NE(s.message().find("expected F32"), std::string_view::npos) << s;
  for (uint16_t v : half_out) EXPECT_EQ(v, 0);  // the op did nothing
  EXPECT_NE(out[0], -7.0f);                     // the well-formed op ran
  EXPECT_TRUE(backend.synchronize().ok());      // the next step starts clean
}

TEST(CpuBackendErrors, SampleRefusesTokensThatAreNotInt32) {
  CpuBackend backend(1);
  std::vector<float> logits(4, 0.0f), tokens(1, 0.0f);
  const SamplingRow row{};
  backend.sample(Tensor(logits.data(), DType::kF32, {1, 4}), std::span<const SamplingRow>(&row, 1),
                 Tensor(tokens.data(), DType::kF32, {1}));
  const absl::Status s = backend.synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sample: tokens"), std::string_view::npos) << s;
}

}  // namespace
}  // namespace tessera
