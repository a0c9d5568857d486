// The warmup plan: which GEMMs a Llama-family model runs for the padded token counts.
#include "runtime/tuning/warmup_plan.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

GemmModelShape llama3_8b() {
  GemmModelShape m;
  m.hidden = 4096;
  m.intermediate = 14336;
  m.num_heads = 32;
  m.num_kv_heads = 8;
  m.head_dim = 128;
  m.vocab = 128256;
  m.num_layers = 32;
  return m;
}

TEST(WarmupPlan, TokenCountsForDefaults) {
  const TokenBuckets b;       // 1..256 doubling, pad 64
  const WarmupLimits limits;  // 2048 tokens, 256 logit rows
  const std::vector<int64_t> layers = layer_token_counts(b, limits);
  // 9 decode buckets (1..256) and the 32 multiples of 64 up to 2048; 64, 128 and 256 are both.
  std::vector<int64_t> want = {1, 2, 4, 8, 16, 32};
  for (int64_t t = 64; t <= 2048; t += 64) want.push_back(t);
  EXPECT_EQ(layers, want);
  EXPECT_EQ(layers.size(), 38u);
  EXPECT_THAT(logit_row_counts(b, limits), ElementsAre(1, 2, 4, 8, 16, 32, 64, 128, 256));
}

TEST(WarmupPlan, Llama3_8BCountAndShapes) {
  absl::StatusOr<std::vector<WarmupGemm>> plan =
      plan_warmup_gemms(llama3_8b(), TokenBuckets{}, WarmupLimits{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  // 38 token counts x 4 layer projections (all four shapes differ) + 9 lm_head row counts.
  ASSERT_EQ(plan->size(), 38u * 4 + 9);

  std::set<GemmSignature> distinct;
  for (const WarmupGemm& g : *plan) {
    EXPECT_TRUE(distinct.insert(g.signature).second) << "repeated " << g.signature.key();
    EXPECT_TRUE(g.signature.validate().ok()) << g.signature.key();
    EXPECT_EQ(g.signature.n, g.tokens);
  }
  // Smallest token count first, in forward order.
  ASSERT_GE(plan->size(), 5u);
  EXPECT_EQ((*plan)[0].used_by, "qkv_proj");
  EXPECT_EQ((*plan)[0].signature.key(),
            "GemmTunableOp_BFloat16_TN,tn_6144_1_4096_ld_4096_4096_6144");  // (32 + 2*8) * 128
  EXPECT_EQ((*plan)[0].per_step, 32);
  EXPECT_EQ((*plan)[1].used_by, "o_proj");
  EXPECT_EQ((*plan)[1].signature.params(), "tn_4096_1_4096_ld_4096_4096_4096");
  EXPECT_EQ((*plan)[2].used_by, "gate_up");
  EXPECT_EQ((*plan)[2].signature.params(), "tn_28672_1_4096_ld_4096_4096_28672");
  EXPECT_EQ((*plan)[3].used_by, "down");
  EXPECT_EQ((*plan)[3].signature.params(), "tn_4096_1_14336_ld_14336_14336_4096");
  EXPECT_EQ((*plan)[4].used_by, "lm_head");
  EXPECT_EQ((*plan)[4].signature.key(),
            "GemmTunableOp_BFloat16_TN_F32out,tn_128256_1_4096_ld_4096_4096_128256");
  EXPECT_EQ((*plan)[4].per_step, 1);
  EXPECT_EQ(plan->back().tokens, 2048);
  EXPECT_EQ(plan->back().used_by, "down");

  int lm_head = 0;
  for (const WarmupGemm& g : *plan) lm_head += g.used_by == "lm_head";
  EXPECT_EQ(lm_head, 9);
}

TEST(WarmupPlan, Float16ModelsPlanHalfGemms) {
  GemmModelShape m = llama3_8b();
  m.dtype = GemmDType::kF16;
  absl::StatusOr<std::vector<WarmupGemm>> plan = plan_warmup_gemms(m, TokenBuckets{}, WarmupLimits{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 38u * 4 + 9);
  EXPECT_EQ((*plan)[0].signature.key(),
            "GemmTunableOp_Half_TN,tn_6144_1_4096_ld_4096_4096_6144");
  EXPECT_EQ((*plan)[4].signature.key(),
            "GemmTunableOp_Half_TN_F32out,tn_128256_1_4096_ld_4096_4096_128256");
  for (const WarmupGemm& g : *plan) EXPECT_EQ(g.signature.dtype, GemmDType::kF16) << g.signature;
}

// quantization: fp8 -- the layers' GEMMs are row-wise scaled FP8 ones (a scale per token and per
// output feature) writing the compute dtype, lm_head stays in it.
TEST(WarmupPlan, Fp8LayersPlanScaledGemms) {
  GemmModelShape m = llama3_8b();
  m.layer_dtype = GemmDType::kF8E4M3FN;
  absl::StatusOr<std::vector<WarmupGemm>> plan = plan_warmup_gemms(m, TokenBuckets{}, WarmupLimits{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 38u * 4 + 9);
  EXPECT_EQ((*plan)[0].signature.op_name(), "ScaledGemmTunableOp_Float8_e4m3fn_Float8_e4m3fn_BFloat16_TN");
  EXPECT_EQ((*plan)[0].signature.out_dtype, GemmDType::kBF16);
  for (const WarmupGemm& g : *plan) {
    const bool head = g.used_by == "lm_head";
    EXPECT_EQ(g.signature.dtype, head ? GemmDType::kBF16 : GemmDType::kF8E4M3FN) << g.signature;
    EXPECT_EQ(g.signature.rowwise, !head) << g.signature;
  }
}

// quantization_keep: a projection kept in some layers is planned in both dtypes, each with the
// calls of its layers; one kept everywhere only in the compute dtype.
TEST(WarmupPlan, KeptProjectionsPlanTheComputeDtypeToo) {
  GemmModelShape m = llama3_8b();
  m.layer_dtype = GemmDType::kF8E4M3FN;
  m.kept_layers = {2, 0, 0, 32};  // qkv in 2 layers, down in all 32
  absl::StatusOr<std::vector<WarmupGemm>> plan = plan_warmup_gemms(m, TokenBuckets{}, WarmupLimits{});
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Per token count: qkv twice, o and gate_up in FP8, down in bf16 only; lm_head.
  ASSERT_EQ(plan->size(), 38u * 5 + 9);
  for (const WarmupGemm& g : *plan) {
    if (g.used_by == "qkv_proj") {
      EXPECT_EQ(g.per_step, g.signature.dtype == GemmDType::kBF16 ? 2 : 30) << g.signature;
    } else if (g.used_by == "down") {
      EXPECT_EQ(g.signature.dtype, GemmDType::kBF16) << g.signature;
      EXPECT_EQ(g.per_step, 32) << g.signature;
    } else if (g.used_by != "lm_head") {
      EXPECT_EQ(g.signature.dtype, GemmDType::kF8E4M3FN) << g.signature;
    }
  }
}

TEST(WarmupPlan, SharedShapesMerge) {
  // hidden == H*D == intermediate: o_proj and down share [hidden, hidden].
  GemmModelShape m;
  m.hidden = 64;
  m.intermediate = 64;
  m.num_heads = 4;
  m.num_kv_heads = 4;
  m.head_dim = 16;
  m.vocab = 100;
  m.num_layers = 2;
  TokenBuckets b;
  b.decode = {1, 2};
  b.prefill_pad = 4;
  WarmupLimits limits;
  limits.max_batch_tokens = 8;
  limits.max_logit_rows = 2;
  absl::StatusOr<std::vector<WarmupGemm>> plan = plan_warmup_gemms(m, b, limits);
  ASSERT_TRUE(plan.ok()) << plan.status();
  // Layer tokens {1, 2} (decode) and {4, 8} (prefill): 4 counts x 3 shapes; lm_head at 1 and 2.
  EXPECT_EQ(plan->size(), 4u * 3 + 2);
  EXPECT_EQ((*plan)[1].used_by, "o_proj+down");
  EXPECT_EQ((*plan)[1].per_step, 4);
}

TEST(WarmupPlan, LimitsNotOnABucketArePadded) {
  TokenBuckets b;
  WarmupLimits limits;
  limits.max_batch_tokens = 100;  // a 100-token prefill pads to 128
  limits.max_logit_rows = 3;      // 3 rows pad to 4
  EXPECT_THAT(layer_token_counts(b, limits), ElementsAre(1, 2, 4, 64, 128));
  EXPECT_THAT(logit_row_counts(b, limits), ElementsAre(1, 2, 4));
  limits.max_logit_rows = 300;  // beyond the largest bucket: multiples of the pad
  EXPECT_EQ(logit_row_counts(b, limits).back(), 320);
}

TEST(WarmupPlan, ErrorsNameTheBadDimension) {
  GemmModelShape m = llama3_8b();
  m.num_kv_heads = 0;
  absl::StatusOr<std::vector<WarmupGemm>> plan =
      plan_warmup_gemms(m, TokenBuckets{}, WarmupLimits{});
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("num_kv_heads is 0"));
  WarmupLimits limits;
  limits.max_batch_tokens = -1;
  plan = plan_warmup_gemms(llama3_8b(), TokenBuckets{}, limits);
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("max_batch_tokens is -1"));
  TokenBuckets b;
  b.prefill_pad = 0;
  plan = plan_warmup_gemms(llama3_8b(), b, WarmupLimits{});
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("prefill pad is 0"));
}

}  // namespace
}  // namespace tessera
