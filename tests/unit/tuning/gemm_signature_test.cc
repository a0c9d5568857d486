// GemmSignature: PyTorch TunableOp's op names and params, the linear-layer mapping, parsing back.
#include "runtime/backend/gemm_signature.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

struct ParseErrorCase {
  const char* op;
  const char* params;
  const char* expect;  // a part of the message
};

// Each case fails to parse with InvalidArgument naming what `expect` says.
void expect_parse_errors(const std::vector<ParseErrorCase>& cases) {
  for (const ParseErrorCase& c : cases) {
    absl::StatusOr<GemmSignature> s = GemmSignature::parse(c.op, c.params);
    ASSERT_FALSE(s.ok()) << c.op << " " << c.params;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.status().message()), HasSubstr(c.expect)) << c.op << " " << c.params;
  }
}

TEST(GemmSignature, LinearIsTransposedAWithTokensAsN) {
  // out[1, 4096] = x[1, 4096] @ w[4096, 4096]^T: PyTorch F.linear's BLAS call.
  const GemmSignature s =
      GemmSignature::for_linear(1, 4096, 4096, GemmDType::kBF16, GemmDType::kBF16);
  EXPECT_TRUE(s.trans_a);
  EXPECT_FALSE(s.trans_b);
  EXPECT_EQ(s.op_name(), "GemmTunableOp_BFloat16_TN");
  EXPECT_EQ(s.params(), "tn_4096_1_4096_ld_4096_4096_4096");
  EXPECT_EQ(s.key(), "GemmTunableOp_BFloat16_TN,tn_4096_1_4096_ld_4096_4096_4096");
  EXPECT_TRUE(s.validate().ok()) << s.validate();
}

TEST(GemmSignature, LinearMapsOutFeaturesToMAndInFeaturesToK) {
  // The documented PyTorch example: A[100, 20] @ W[200, 20]^T -> tn_200_100_20.
  const GemmSignature s = GemmSignature::for_linear(100, 200, 20, GemmDType::kF32, GemmDType::kF32);
  EXPECT_EQ(s.op_name(), "GemmTunableOp_float_TN");
  EXPECT_EQ(s.params(), "tn_200_100_20_ld_20_20_200");
  EXPECT_EQ(s.m, 200);
  EXPECT_EQ(s.n, 100);
  EXPECT_EQ(s.k, 20);
}

TEST(GemmSignature, OpNamesPerDtype) {
  EXPECT_EQ(GemmSignature::for_linear(8, 16, 32, GemmDType::kF16, GemmDType::kF16).op_name(),
            "GemmTunableOp_Half_TN");
  // lm_head: bf16 inputs, fp32 logits -> its own op name.
  EXPECT_EQ(GemmSignature::for_linear(8, 16, 32, GemmDType::kBF16, GemmDType::kF32).op_name(),
            "GemmTunableOp_BFloat16_TN_F32out");
  EXPECT_EQ(GemmSignature::for_linear(8, 16, 32, GemmDType::kF16, GemmDType::kF32).op_name(),
            "GemmTunableOp_Half_TN_F32out");
  GemmSignature nt;
  nt.trans_b = true;
  EXPECT_EQ(nt.op_name(), "GemmTunableOp_BFloat16_NT");
}

TEST(GemmSignature, F32OutputDiffersFromSameShapeBf16Output) {
  const GemmSignature a = GemmSignature::for_linear(4, 128, 64, GemmDType::kBF16, GemmDType::kBF16);
  const GemmSignature b = GemmSignature::for_linear(4, 128, 64, GemmDType::kBF16, GemmDType::kF32);
  EXPECT_NE(a, b);
  EXPECT_NE(a.key(), b.key());
}

TEST(GemmSignature, RoundTripsEveryCombination) {
  const std::pair<GemmDType, GemmDType> kPairs[] = {
      {GemmDType::kBF16, GemmDType::kBF16},      {GemmDType::kBF16, GemmDType::kF32},
      {GemmDType::kF16, GemmDType::kF16},        {GemmDType::kF16, GemmDType::kF32},
      {GemmDType::kF32, GemmDType::kF32},        {GemmDType::kF8E4M3FN, GemmDType::kBF16},
      {GemmDType::kF8E4M3FN, GemmDType::kF16},   {GemmDType::kF8E4M3FNUZ, GemmDType::kBF16},
      {GemmDType::kF8E4M3FNUZ, GemmDType::kF16}};
  for (const auto& [dt, out] : kPairs) {
    for (int t = 0; t < 4; ++t) {
      GemmSignature s;
      s.dtype = dt;
      s.out_dtype = out;
      s.trans_a = (t & 1) != 0;
      s.trans_b = (t & 2) != 0;
      s.m = 7;
      s.n = 3;
      s.k = 5;
      s.lda = 11;
      s.ldb = 13;
      s.ldc = 17;
      ASSERT_TRUE(s.validate().ok()) << s.validate();
      absl::StatusOr<GemmSignature> back = GemmSignature::parse(s.op_name(), s.params());
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(*back, s) << s.key();
    }
  }
}

TEST(GemmSignature, Fp8IsPyTorchsScaledGemmOp) {
  // PyTorch's torch._scaled_mm(x, w.t()) on e4m3fn inputs with per-tensor scales, bf16 out.
  const GemmSignature s =
      GemmSignature::for_linear(16, 6144, 4096, GemmDType::kF8E4M3FN, GemmDType::kBF16);
  EXPECT_EQ(s.op_name(), "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN");
  EXPECT_EQ(s.params(), "tn_6144_16_4096_ld_4096_4096_6144_rw_0_bias_None");
  EXPECT_TRUE(s.validate().ok()) << s.validate();
  // MI300's encoding is a different op (the same bytes are different numbers).
  const GemmSignature fnuz =
      GemmSignature::for_linear(16, 6144, 4096, GemmDType::kF8E4M3FNUZ, GemmDType::kF16);
  EXPECT_EQ(fnuz.op_name(), "ScaledGemmTunableOp_Float8_e4m3fnuz_Float8_e4m3fnuz_Half_TN");
  EXPECT_NE(fnuz.key(), s.key());
  EXPECT_TRUE(is_fp8(GemmDType::kF8E4M3FNUZ));
  EXPECT_FALSE(is_fp8(GemmDType::kBF16));
}

TEST(GemmSignature, Fp8ParseErrorsNameWhatIsWrong) {
  constexpr const char* kOk = "tn_8_8_64_ld_64_64_8_rw_0_bias_None";
  const std::vector<ParseErrorCase> cases = {
      {"GemmTunableOp_Float8_e4m3fn_TN", "tn_8_8_64", "FP8 GEMMs are ScaledGemmTunableOp_"},
      {"ScaledGemmTunableOp_Float8_e4m3fn_BFloat16_TN", kOk, "expected three type names"},
      {"ScaledGemmTunableOp_Float8_e4m3fn_Float8_e5m2_BFloat16_TN", kOk,
       "expected three type names"},
      {"ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fnuz_BFloat16_TN", kOk,
       "inputs Float8_e4m3fn and Float8_e4m3fnuz"},
      {"ScaledGemmTunableOp_BFloat16_BFloat16_BFloat16_TN", kOk, "inputs BFloat16 and BFloat16"},
      {"ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TX", kOk, "bad transposes 'TX'"},
      {"ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_float_TN", kOk,
       "cannot write float (output is BFloat16 or Half)"},
      {"ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN",
       "tn_8_8_64_ld_64_64_8_rw_2_bias_None", "'rw_2_bias_None' (tessera runs per-tensor"},
      {"ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN",
       "tn_8_8_64_ld_64_64_8_rw_0_bias_BFloat16", "'rw_0_bias_BFloat16'"},
      {"ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN", "tn_8_8_64_ld_64_64_8",
       "no _rw_<0|1>_bias_<type> part"},
      {"ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN", "tn_8_8_64_rw_0_bias_None",
       "wrong number of fields"},
      {"ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN",
       "nt_8_8_64_ld_64_64_8_rw_0_bias_None", "differ from the op name's 'TN'"},
  };
  expect_parse_errors(cases);
}

TEST(GemmSignature, RowwiseFp8IsRw1AndADifferentKey) {
  const GemmSignature tensor =
      GemmSignature::for_linear(16, 6144, 4096, GemmDType::kF8E4M3FN, GemmDType::kBF16);
  const GemmSignature rowwise = GemmSignature::for_linear(16, 6144, 4096, GemmDType::kF8E4M3FN,
                                                          GemmDType::kBF16, /*rowwise=*/true);
  EXPECT_EQ(rowwise.op_name(), tensor.op_name());
  EXPECT_EQ(rowwise.params(), "tn_6144_16_4096_ld_4096_4096_6144_rw_1_bias_None");
  EXPECT_NE(rowwise.key(), tensor.key());
  absl::StatusOr<GemmSignature> back = GemmSignature::parse(rowwise.op_name(), rowwise.params());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, rowwise);
  EXPECT_TRUE(back->rowwise);
  // Only FP8 GEMMs are scaled.
  const GemmSignature bf16 =
      GemmSignature::for_linear(16, 64, 64, GemmDType::kBF16, GemmDType::kBF16, true);
  EXPECT_THAT(std::string(bf16.validate().message()), HasSubstr("row-wise scales on a BFloat16"));
}

TEST(GemmSignature, Fp8ValidateRejectsOutputsOtherThanBf16AndF16) {
  GemmSignature s = GemmSignature::for_linear(1, 8, 8, GemmDType::kF8E4M3FN, GemmDType::kF32);
  EXPECT_THAT(std::string(s.validate().message()),
              HasSubstr("Float8_e4m3fn inputs cannot write float"));
  s = GemmSignature::for_linear(1, 8, 8, GemmDType::kF8E4M3FN, GemmDType::kF8E4M3FN);
  EXPECT_FALSE(s.validate().ok());
  s = GemmSignature::for_linear(1, 8, 8, GemmDType::kBF16, GemmDType::kF8E4M3FN);
  EXPECT_FALSE(s.validate().ok());
}

TEST(GemmSignature, ParsesPyTorchParamsWithoutLeadingDimensions) {
  absl::StatusOr<GemmSignature> s = GemmSignature::parse("GemmTunableOp_float_TN", "tn_200_100_20");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, GemmSignature::for_linear(100, 200, 20, GemmDType::kF32, GemmDType::kF32));
  absl::StatusOr<GemmSignature> nn =
      GemmSignature::parse("GemmTunableOp_float_NN", "nn_1024_512_2048");
  ASSERT_TRUE(nn.ok()) << nn.status();
  EXPECT_EQ(nn->lda, 1024);  // m
  EXPECT_EQ(nn->ldb, 2048);  // k
  EXPECT_EQ(nn->ldc, 1024);  // m
}

TEST(GemmSignature, ParseErrorsNameWhatIsWrong) {
  const std::vector<ParseErrorCase> cases = {
      {"GemmStridedBatchedTunableOp_float_TN", "tn_1_1_1", "does not start with GemmTunableOp_"},
      {"GemmTunableOp_double_TN", "tn_1_1_1", "unknown type 'double'"},
      {"GemmTunableOp_BFloat16_TX", "tn_1_1_1", "bad transposes 'TX'"},
      {"GemmTunableOp_BFloat16_tn", "tn_1_1_1", "bad transposes 'tn'"},
      {"GemmTunableOp_float_TN_F32out", "tn_1_1_1", "_F32out on a float GEMM"},
      {"GemmTunableOp_BFloat16_TN", "nt_8_8_8", "differ from the op name's 'TN'"},
      {"GemmTunableOp_BFloat16_TN", "TN_8_8_8", "bad transposes 'TN'"},
      {"GemmTunableOp_BFloat16_TN", "tn_8_8", "wrong number of fields"},
      {"GemmTunableOp_BFloat16_TN", "tn_8_x_8", "N 'x' is not an integer"},
      {"GemmTunableOp_BFloat16_TN", "tn_8_8_8_ld_8_8_z", "LDC 'z' is not an integer"},
      {"GemmTunableOp_BFloat16_TN", "tn_8_8_8_lx_8_8_8", "expected 'ld', found 'lx'"},
      {"GemmTunableOp_BFloat16_TN", "tn_0_8_8", "sizes must be positive"},
      {"GemmTunableOp_BFloat16_TN", "tn_8_8_64_ld_32_64_8", "lda=32 is less than 64 (k)"},
      {"GemmTunableOp_BFloat16_TN", "tn_8_8_64_ld_64_64_4", "ldc=4 is less than 8 (m)"},
      {"GemmTunableOp_BFloat16_NN", "nn_8_8_64_ld_8_32_8", "ldb=32 is less than 64 (k)"},
  };
  expect_parse_errors(cases);
}

TEST(GemmSignature, ParseErrorNamesTheText) {
  absl::StatusOr<GemmSignature> s = GemmSignature::parse("GemmTunableOp_BFloat16_TN", "tn_8_8");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("'tn_8_8'"));
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("GemmTunableOp_BFloat16_TN"));
}

TEST(GemmSignature, ValidateRejectsImpossibleDtypePairs) {
  GemmSignature s = GemmSignature::for_linear(1, 8, 8, GemmDType::kF32, GemmDType::kBF16);
  EXPECT_THAT(std::string(s.validate().message()), HasSubstr("float inputs cannot write BFloat16"));
  s = GemmSignature::for_linear(1, 8, 8, GemmDType::kBF16, GemmDType::kF16);
  EXPECT_FALSE(s.validate().ok());
}

TEST(GemmSignature, OrdersByShapeThenTokens) {
  const GemmSignature a =
      GemmSignature::for_linear(1, 4096, 4096, GemmDType::kBF16, GemmDType::kBF16);
  const GemmSignature b =
      GemmSignature::for_linear(2, 4096, 4096, GemmDType::kBF16, GemmDType::kBF16);
  const GemmSignature c =
      GemmSignature::for_linear(1, 6144, 4096, GemmDType::kBF16, GemmDType::kBF16);
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);  // m (out features) before n (tokens)
}

}  // namespace
}  // namespace tessera
