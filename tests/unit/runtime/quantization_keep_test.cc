// quantization_keep: which linear weights `quantization: fp8` leaves in the compute dtype -- the
// list's forms, the layers each projection stays in, and errors that name the bad entry.
#include <gtest/gtest.h>

#include <string>

#include "runtime/backend/quantization.h"

namespace tessera {
namespace {

using P = LinearProjection;

TEST(QuantizationKeep, EmptyKeepsNothing) {
  const absl::StatusOr<QuantizationKeep> keep = QuantizationKeep::parse("");
  ASSERT_TRUE(keep.ok()) << keep.status();
  EXPECT_TRUE(keep->empty());
  EXPECT_FALSE(keep->keeps(0, P::kDown));
  EXPECT_EQ(keep->kept_layers(32), (std::array<int64_t, 4>{0, 0, 0, 0}));
  EXPECT_EQ(keep->text(), "");
}

TEST(QuantizationKeep, ProjectionsLayersAndOneProjectionOfALayer) {
  const absl::StatusOr<QuantizationKeep> keep =
      QuantizationKeep::parse(" down, layers.0 ,layers.5.qkv");
  ASSERT_TRUE(keep.ok()) << keep.status();
  EXPECT_EQ(keep->text(), "down,layers.0,layers.5.qkv");
  // down everywhere; layer 0 whole; layer 5's qkv only.
  for (int64_t l : {0, 3, 5, 9}) EXPECT_TRUE(keep->keeps(l, P::kDown)) << l;
  EXPECT_TRUE(keep->keeps(0, P::kQkv));
  EXPECT_TRUE(keep->keeps(0, P::kO));
  EXPECT_TRUE(keep->keeps(0, P::kGateUp));
  EXPECT_TRUE(keep->keeps(5, P::kQkv));
  EXPECT_FALSE(keep->keeps(5, P::kO));
  EXPECT_FALSE(keep->keeps(3, P::kQkv));
  EXPECT_FALSE(keep->keeps(3, P::kGateUp));
  // Per projection (qkv, o, gate_up, down): layers that stay in the compute dtype, of 10.
  EXPECT_EQ(keep->kept_layers(10), (std::array<int64_t, 4>{2, 1, 1, 10}));
  EXPECT_TRUE(keep->check_layers(6).ok());
}

TEST(QuantizationKeep, ErrorsNameTheEntry) {
  struct Case {
    const char* list;
    const char* want;
  };
  for (const Case& c : {Case{"down_proj", "\"down_proj\" is not a projection or a layer"},
                        Case{"layers.x", "\"layers.x\" has no layer index ('x')"},
                        Case{"layers.-1", "has no layer index ('-1')"},
                        Case{"layers.3.mlp", "\"layers.3.mlp\" names no projection ('mlp')"},
                        Case{"qkv,lm_head", "\"lm_head\" is not a projection or a layer"}}) {
    const absl::StatusOr<QuantizationKeep> keep = QuantizationKeep::parse(c.list);
    ASSERT_FALSE(keep.ok()) << c.list;
    EXPECT_EQ(keep.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(keep.status().message()).find(c.want), std::string::npos)
        << keep.status();
    EXPECT_NE(std::string(keep.status().message()).find("expected qkv, o, gate_up, down"),
              std::string::npos)
        << keep.status();
  }
}

TEST(QuantizationKeep, ALayerPastTheModelIsAnError) {
  const absl::StatusOr<QuantizationKeep> keep = QuantizationKeep::parse("layers.30");
  ASSERT_TRUE(keep.ok());
  EXPECT_TRUE(keep->check_layers(31).ok());
  const absl::Status s = keep->check_layers(30);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("\"layers.30\" names layer 30; the model has 30 (0 .. 29)"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace tessera
