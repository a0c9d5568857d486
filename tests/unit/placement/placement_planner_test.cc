// plan_placement on fake devices: every strategy with exact layer ranges, max_memory, the KV
// reserve, tied embeddings, explicit maps, and every error with its message.
#include "runtime/placement/placement_planner.h"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/placement/fake_model.h"

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using namespace placement_test;

std::vector<DeviceInfo> devices(std::vector<uint64_t> free_gib) {
  std::vector<DeviceInfo> out;
  for (size_t i = 0; i < free_gib.size(); ++i) {
    out.push_back({static_cast<int32_t>(i), "fake" + std::to_string(i), free_gib[i] * kGiB,
                   free_gib[i] * kGiB});
  }
  return out;
}

PlacementOptions with_map(const std::string& device_map) {
  PlacementOptions o;
  absl::StatusOr<DeviceMapSpec> spec = parse_device_map(device_map);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  if (spec.ok()) o.device_map = *spec;
  return o;
}

PlacementPlan plan_ok(const ModelFootprint& m, const std::vector<DeviceInfo>& d,
                      const PlacementOptions& o) {
  absl::StatusOr<PlacementPlan> plan = plan_placement(m, d, o);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  return plan.ok() ? *plan : PlacementPlan{};
}

absl::Status plan_error(const ModelFootprint& m, const std::vector<DeviceInfo>& d,
                        const PlacementOptions& o) {
  absl::StatusOr<PlacementPlan> plan = plan_placement(m, d, o);
  EXPECT_FALSE(plan.ok());
  return plan.ok() ? absl::OkStatus() : plan.status();
}

// "first-last" of each device, "-" for none.
std::vector<std::string> layer_ranges(const PlacementPlan& plan) {
  std::vector<std::string> out;
  for (const DevicePlacement& d : plan.devices) {
    out.push_back(d.num_layers() == 0
                      ? "-"
                      : std::to_string(d.first_layer) + "-" + std::to_string(d.last_layer));
  }
  return out;
}

using ::testing::ElementsAre;

TEST(PlanPlacement, Balanced32LayersOnTwoDevices) {
  const PlacementPlan plan = plan_ok(model32(), devices({80, 80}), with_map("balanced"));
  ASSERT_EQ(plan.devices.size(), 2u);
  EXPECT_EQ(plan.strategy, DeviceMapStrategy::kBalanced);
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-15", "16-31"));
  const DevicePlacement& d0 = plan.devices[0];
  const DevicePlacement& d1 = plan.devices[1];
  EXPECT_EQ(d0.device, 0);
  EXPECT_EQ(d0.name, "fake0");
  EXPECT_TRUE(d0.embeddings);
  EXPECT_FALSE(d0.head);
  EXPECT_FALSE(d1.embeddings);
  EXPECT_TRUE(d1.head);
  EXPECT_FALSE(d1.tied_embedding_copy);
  EXPECT_EQ(d0.weight_bytes, 17 * kGiB);
  EXPECT_EQ(d1.weight_bytes, 17 * kGiB + 8 * kKiB);
  EXPECT_EQ(d0.allowed_bytes, 80 * kGiB);
  EXPECT_EQ(d0.weight_budget_bytes, 72 * kGiB);  // default KV reserve: 10% of allowed
  EXPECT_EQ(d0.kv_bytes, 63 * kGiB);
  EXPECT_EQ(d1.kv_bytes, 63 * kGiB - 8 * kKiB);
  EXPECT_EQ(d0.kv_capacity_tokens, 64512);  // 63 GiB / (16 layers * 64 KiB)
  EXPECT_EQ(d1.kv_capacity_tokens, 64511);
  EXPECT_EQ(plan.kv_capacity_tokens, 64511);
  EXPECT_EQ(plan.weight_bytes, 34 * kGiB + 8 * kKiB);
  EXPECT_EQ(plan.device_of_layer(0), 0);
  EXPECT_EQ(plan.device_of_layer(15), 0);
  EXPECT_EQ(plan.device_of_layer(16), 1);
  EXPECT_EQ(plan.device_of_layer(31), 1);
  EXPECT_EQ(plan.device_of_layer(32), -1);
}

TEST(PlanPlacement, AutoIsBalanced) {
  const PlacementPlan plan = plan_ok(model32(), devices({80, 80}), PlacementOptions{});
  EXPECT_EQ(plan.strategy, DeviceMapStrategy::kAuto);
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-15", "16-31"));
}

TEST(PlanPlacement, BalancedOnFourDevices) {
  const PlacementPlan plan = plan_ok(model32(), devices({80, 80, 80, 80}), with_map("balanced"));
  // 8 layers each; the end devices also carry the embeddings and lm_head.
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-7", "8-15", "16-23", "24-31"));
  EXPECT_TRUE(plan.devices[0].embeddings);
  EXPECT_TRUE(plan.devices[3].head);
}

TEST(PlanPlacement, BalancedOnOneDevice) {
  const PlacementPlan plan = plan_ok(model32(), devices({80}), with_map("balanced"));
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-31"));
  EXPECT_TRUE(plan.devices[0].embeddings);
  EXPECT_TRUE(plan.devices[0].head);
}

TEST(PlanPlacement, BalancedHeterogeneousDevicesTakeTheSmallestKvCapacity) {
  const PlacementPlan plan = plan_ok(model32(), devices({80, 40}), with_map("balanced"));
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-15", "16-31"));  // equal shares, as accelerate
  EXPECT_EQ(plan.devices[1].kv_bytes, 23 * kGiB - 8 * kKiB);
  EXPECT_EQ(plan.devices[1].kv_capacity_tokens, 23551);
  EXPECT_EQ(plan.kv_capacity_tokens, 23551);
}

TEST(PlanPlacement, SequentialWithBigDevicesUsesDeviceZeroOnly) {
  const PlacementPlan plan = plan_ok(model32(), devices({80, 80}), with_map("sequential"));
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-31", "-"));
  const DevicePlacement& d0 = plan.devices[0];
  const DevicePlacement& d1 = plan.devices[1];
  EXPECT_TRUE(d0.embeddings);
  EXPECT_TRUE(d0.head);
  EXPECT_EQ(d0.weight_bytes, 34 * kGiB + 8 * kKiB);
  EXPECT_EQ(d0.kv_capacity_tokens, 23551);  // (46 GiB - 8 KiB) / (32 * 64 KiB)
  EXPECT_EQ(d1.first_layer, -1);
  EXPECT_EQ(d1.last_layer, -1);
  EXPECT_EQ(d1.num_layers(), 0);
  EXPECT_FALSE(d1.embeddings);
  EXPECT_FALSE(d1.head);
  EXPECT_EQ(d1.weight_bytes, 0u);
  EXPECT_EQ(d1.kv_bytes, 0u);
  EXPECT_EQ(d1.kv_capacity_tokens, 0);
  EXPECT_EQ(plan.kv_capacity_tokens, 23551);  // devices without layers do not count
}

TEST(PlanPlacement, SequentialFillsUpToMaxMemory) {
  PlacementOptions o = with_map("sequential");
  o.max_memory = {{0, 10 * kGiB}};
  o.kv_reserve_fraction = 0;
  const PlacementPlan plan = plan_ok(model32(), devices({80, 80}), o);
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-8", "9-31"));  // 1 GiB embeddings + 9 layers
  EXPECT_EQ(plan.devices[0].allowed_bytes, 10 * kGiB);
  EXPECT_EQ(plan.devices[0].weight_bytes, 10 * kGiB);
  EXPECT_EQ(plan.devices[0].kv_bytes, 0u);
  EXPECT_EQ(plan.devices[0].kv_capacity_tokens, 0);
  EXPECT_EQ(plan.kv_capacity_tokens, 0);
  EXPECT_EQ(plan.devices[1].allowed_bytes, 80 * kGiB);
}

TEST(PlanPlacement, MaxMemoryCapsBalanced) {
  PlacementOptions o = with_map("balanced");
  o.max_memory = {{0, 10 * kGiB}};
  o.kv_reserve_fraction = 0;
  const PlacementPlan plan = plan_ok(model32(), devices({80, 80}), o);
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-8", "9-31"));
}

TEST(PlanPlacement, MaxMemoryAboveFreeMemoryIsCappedByFree) {
  PlacementOptions o;
  o.max_memory = {{0, 100 * kGiB}, {1, 30 * kGiB}};
  const PlacementPlan plan = plan_ok(model32(), devices({80, 80}), o);
  EXPECT_EQ(plan.devices[0].allowed_bytes, 80 * kGiB);
  EXPECT_EQ(plan.devices[1].allowed_bytes, 30 * kGiB);
  EXPECT_EQ(plan.devices[1].weight_budget_bytes, 27 * kGiB);
}

TEST(PlanPlacement, BalancedLow0LeavesDeviceZeroEmpty) {
  const PlacementPlan plan = plan_ok(model32(), devices({80, 80, 80}), with_map("balanced_low_0"));
  EXPECT_EQ(plan.strategy, DeviceMapStrategy::kBalancedLow0);
  EXPECT_THAT(layer_ranges(plan), ElementsAre("-", "0-15", "16-31"));
  EXPECT_FALSE(plan.devices[0].embeddings);
  EXPECT_TRUE(plan.devices[1].embeddings);  // embeddings go with the first layer
  EXPECT_TRUE(plan.devices[2].head);
}

TEST(PlanPlacement, BalancedLow0PutsOnlyTheOverflowOnDeviceZero) {
  PlacementOptions o = with_map("balanced_low_0");
  o.max_memory = {{1, 12 * kGiB}, {2, 12 * kGiB}};
  o.kv_reserve_fraction = 0;
  const PlacementPlan plan = plan_ok(model32(), devices({80, 80, 80}), o);
  // Device 1 holds 12 layers, device 2 10 layers + norm + lm_head: device 0 keeps the first 10.
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-9", "10-21", "22-31"));
  EXPECT_EQ(plan.devices[0].weight_bytes, 11 * kGiB);
  EXPECT_EQ(plan.devices[1].weight_bytes, 12 * kGiB);
}

TEST(PlanPlacement, BalancedLow0OnOneDevice) {
  const PlacementPlan plan = plan_ok(model32(), devices({80}), with_map("balanced_low_0"));
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-31"));
}

TEST(PlanPlacement, KvReserveBytesLimitsWeights) {
  PlacementOptions o = with_map("sequential");
  o.kv_reserve_bytes = 60 * kGiB;  // replaces the fraction
  const PlacementPlan plan = plan_ok(model32(), devices({80, 80}), o);
  EXPECT_EQ(plan.devices[0].weight_budget_bytes, 20 * kGiB);
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-18", "19-31"));
  EXPECT_EQ(plan.devices[0].kv_bytes, 60 * kGiB);

  o.device_map = *parse_device_map("balanced");
  EXPECT_THAT(layer_ranges(plan_ok(model32(), devices({80, 80}), o)), ElementsAre("0-15", "16-31"));
}

TEST(PlanPlacement, KvReserveFraction) {
  PlacementOptions o = with_map("sequential");
  o.kv_reserve_fraction = 0.5;
  const PlacementPlan plan = plan_ok(model32(), devices({40, 40}), o);
  EXPECT_EQ(plan.devices[0].weight_budget_bytes, 20 * kGiB);
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-18", "19-31"));
}

TEST(PlanPlacement, ActivationBytesComeOffBudgetAndKv) {
  PlacementOptions o;
  o.kv_reserve_fraction = 0;
  o.activation_bytes = 2 * kGiB;
  const PlacementPlan plan = plan_ok(model32(), devices({80, 80}), o);
  EXPECT_EQ(plan.devices[0].weight_budget_bytes, 78 * kGiB);
  EXPECT_EQ(plan.devices[0].kv_bytes, 61 * kGiB);
  EXPECT_EQ(plan.devices[0].kv_capacity_tokens, 62464);  // 61 GiB / (16 * 64 KiB)
}

// lm_head's input rows and logits live on the last stage only: the other devices keep that
// memory for their KV cache.
TEST(PlanPlacement, HeadActivationsComeOffTheLmHeadDeviceOnly) {
  PlacementOptions o;
  o.kv_reserve_fraction = 0;
  o.activation_bytes = 2 * kGiB;
  o.head_activation_bytes = kGiB;
  const PlacementPlan plan = plan_ok(model32(), devices({80, 80}), o);
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-15", "16-31"));
  EXPECT_FALSE(plan.devices[0].head);
  EXPECT_TRUE(plan.devices[1].head);
  EXPECT_EQ(plan.devices[0].weight_budget_bytes, 78 * kGiB);
  EXPECT_EQ(plan.devices[0].weight_bytes, 17 * kGiB);
  EXPECT_EQ(plan.devices[1].weight_bytes, 17 * kGiB + 8 * kKiB);  // no logits among the weights
  EXPECT_EQ(plan.devices[0].kv_bytes, 61 * kGiB);                 // 80 - 2 - 17
  EXPECT_EQ(plan.devices[1].kv_bytes, 60 * kGiB - 8 * kKiB);      // 80 - 2 - 17 - norm - 1
}

// They count against the budget of the device that holds lm_head when the layers are placed,
// and against no other device's.
TEST(PlanPlacement, HeadActivationsMustFitOnTheLmHeadDevice) {
  PlacementOptions o = with_map("sequential");
  o.kv_reserve_fraction = 0;
  o.head_activation_bytes = kGiB;
  // Device 0 fills its 20 GiB with the embeddings and 19 layers, as it would without them;
  // device 1 holds 13 layers, the norm, lm_head and the 1 GiB of the head: 15 GiB + 8 KiB.
  EXPECT_THAT(layer_ranges(plan_ok(model32(), devices({20, 16}), o)),
              ElementsAre("0-18", "19-31"));
  const absl::Status s = plan_error(model32(), devices({20, 15}), o);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("and the logits buffers 1.0 GiB"),
                    HasSubstr("left over: model.layers.31, model.norm, lm_head, the logits "
                              "buffers (3.0 GiB)")));
}

TEST(PlanPlacement, TiedEmbeddingsAreCopiedToTheLastDevice) {
  const PlacementPlan plan = plan_ok(model32(true), devices({80, 80}), with_map("balanced"));
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-15", "16-31"));
  EXPECT_FALSE(plan.devices[0].tied_embedding_copy);
  EXPECT_TRUE(plan.devices[1].tied_embedding_copy);
  EXPECT_EQ(plan.devices[0].weight_bytes, 17 * kGiB);
  EXPECT_EQ(plan.devices[1].weight_bytes, 17 * kGiB + 8 * kKiB);  // 16 layers, norm, the copy
  EXPECT_EQ(plan.weight_bytes, 34 * kGiB + 8 * kKiB);
}

TEST(PlanPlacement, TiedEmbeddingsOnOneDeviceAreNotCopied) {
  const PlacementPlan plan = plan_ok(model32(true), devices({80, 80}), with_map("sequential"));
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-31", "-"));
  EXPECT_FALSE(plan.devices[0].tied_embedding_copy);
  EXPECT_EQ(plan.devices[0].weight_bytes, 33 * kGiB + 8 * kKiB);
}

TEST(PlanPlacement, DeviceListOrderIsThePipelineOrder) {
  std::vector<DeviceInfo> d = devices({80, 80});
  std::swap(d[0], d[1]);
  PlacementOptions o = with_map("sequential");
  const PlacementPlan plan = plan_ok(model32(), d, o);
  EXPECT_EQ(plan.devices[0].device, 1);
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-31", "-"));
  EXPECT_EQ(plan.device_of_layer(0), 1);
}

TEST(PlanPlacement, ExplicitMap) {
  const PlacementPlan plan =
      plan_ok(model32(), devices({80, 80}),
              with_map("model.embed_tokens=0,model.layers.0-15=0,model.layers.16-31=1,"
                       "model.norm=1,lm_head=1"));
  EXPECT_EQ(plan.strategy, DeviceMapStrategy::kExplicit);
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-15", "16-31"));
  EXPECT_TRUE(plan.devices[0].embeddings);
  EXPECT_TRUE(plan.devices[1].head);
  EXPECT_EQ(plan.kv_capacity_tokens, 64511);
}

TEST(PlanPlacement, ExplicitMapUnevenAndNested) {
  const PlacementPlan plan = plan_ok(
      model32(), devices({80, 80}), with_map("model=0,model.layers.4-31=1,model.norm=1,lm_head=1"));
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-3", "4-31"));
}

TEST(PlanPlacement, ExplicitMapOnOneOfTwoDevices) {
  const PlacementPlan plan = plan_ok(model32(), devices({80, 80}), with_map("model=1,lm_head=1"));
  EXPECT_THAT(layer_ranges(plan), ElementsAre("-", "0-31"));
}

TEST(PlanPlacement, ExplicitMapFollowsTheDeviceListOrder) {
  std::vector<DeviceInfo> d = devices({80, 80});
  std::swap(d[0], d[1]);
  const PlacementPlan plan =
      plan_ok(model32(), d, with_map("model=1,model.layers.16-31=0,model.norm=0,lm_head=0"));
  EXPECT_THAT(layer_ranges(plan), ElementsAre("0-15", "16-31"));
  EXPECT_EQ(plan.devices[0].device, 1);
}

TEST(PlanPlacementErrors, ExplicitMapMissesAModule) {
  const absl::Status s =
      plan_error(model32(), devices({80, 80}),
                 with_map("model.embed_tokens=0,model.layers.0-15=0,model.norm=1,lm_head=1"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("device_map: no entry places model.layers.16-31; an "
                                     "explicit map must place every module (model.embed_tokens, "
                                     "model.layers.0-31, model.norm, lm_head)"));
  EXPECT_THAT(plan_error(model32(), devices({80, 80}), with_map("model=0")).message(),
              HasSubstr("no entry places lm_head;"));
  EXPECT_THAT(plan_error(model32(), devices({80, 80}),
                         with_map("model.layers=0,model.layers.3=1,lm_head=1"))
                  .message(),
              HasSubstr("no entry places model.embed_tokens, model.norm;"));
}

TEST(PlanPlacementErrors, ExplicitMapNamesAnUnknownDevice) {
  const absl::Status s = plan_error(model32(), devices({80, 80}), with_map("model=0,lm_head=3"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("device_map: \"lm_head=3\" names device 3, which is not "
                                     "among the devices (0, 1)"));
}

TEST(PlanPlacementErrors, ExplicitMapAgainstThePipelineOrder) {
  const absl::Status s =
      plan_error(model32(), devices({80, 80}),
                 with_map("model=1,model.layers.16-31=0,model.norm=0,lm_head=0"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("device_map: model.layers.16 is on device 0 after "
                                           "model.layers.15 on device 1"),
                                 HasSubstr("each device must hold one contiguous range of layers"),
                                 HasSubstr("the order of the devices (0, 1)")));
}

TEST(PlanPlacementErrors, ExplicitMapWithANonContiguousDevice) {
  const absl::Status s =
      plan_error(model32(), devices({80, 80}), with_map("model=0,model.layers.10-19=1,lm_head=0"));
  EXPECT_THAT(s.message(), HasSubstr("model.layers.20 is on device 0 after model.layers.19 on "
                                     "device 1"));
}

TEST(PlanPlacementErrors, ExplicitMapSeparatesEmbeddingsFromTheFirstLayer) {
  const absl::Status s =
      plan_error(model32(), devices({80, 80}), with_map("model=1,model.embed_tokens=0,lm_head=1"));
  EXPECT_THAT(s.message(),
              HasSubstr("device_map: model.embed_tokens is on device 0 but model.layers.0 is on "
                        "device 1; the embeddings must be on the first layer's device"));
}

TEST(PlanPlacementErrors, ExplicitMapSeparatesTheHeadFromTheLastLayer) {
  EXPECT_THAT(plan_error(model32(), devices({80, 80}), with_map("model=0,lm_head=1")).message(),
              HasSubstr("device_map: lm_head is on device 1 but model.layers.31 is on device 0; "
                        "model.norm and lm_head must be on the last layer's device"));
  EXPECT_THAT(
      plan_error(model32(), devices({80, 80}), with_map("model=0,model.norm=1,lm_head=0"))
          .message(),
      HasSubstr("device_map: model.norm is on device 1 but model.layers.31 is on device 0"));
}

TEST(PlanPlacementErrors, ExplicitEntryThatPlacesNothing) {
  EXPECT_THAT(
      plan_error(model32(), devices({80, 80}), with_map("model=0,lm_head=0,model.layers.3.mlp=1"))
          .message(),
      HasSubstr("device_map: \"model.layers.3.mlp=1\" places no module of this model; a "
                "decoder layer is placed whole (model.layers.N), and the modules are "
                "model.embed_tokens, model.layers.0-31, model.norm, lm_head"));
  EXPECT_THAT(plan_error(model32(), devices({80, 80}), with_map("model=0,lm_haed=0")).message(),
              HasSubstr("\"lm_haed=0\" places no module"));
}

TEST(PlanPlacementErrors, ExplicitRangePastTheLastLayer) {
  EXPECT_THAT(plan_error(model32(), devices({80, 80}),
                         with_map("model=0,model.layers.16-40=1,model.norm=1,lm_head=1"))
                  .message(),
              HasSubstr("device_map: \"model.layers.16-40=1\" names layers up to 40, but the "
                        "model has 32 (model.layers.0-31)"));
}

TEST(PlanPlacementErrors, ExplicitMapDoesNotFit) {
  PlacementOptions o = with_map(
      "model.embed_tokens=0,model.layers.0-15=0,model.layers.16-31=1,model.norm=1,lm_head=1");
  o.max_memory = {{1, 10 * kGiB}};
  const absl::Status s = plan_error(model32(), devices({80, 80}), o);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(
      s.message(),
      AllOf(HasSubstr("the model does not fit with this device_map"),
            HasSubstr("device 0 (fake0): model.embed_tokens, model.layers.0-15 need 17.0 GiB "
                      "(fits)"),
            HasSubstr("device 1 (fake1): model.layers.16-31, model.norm, lm_head need 17.0 GiB "
                      "(too much); weight budget 9.0 GiB = allowed 10.0 GiB (min(max_memory "
                      "10.0 GiB, free 80.0 GiB)) - KV cache reserve 1.0 GiB - activations 0 B"),
            HasSubstr("raise max_memory, add devices (the devices option), lower the KV cache "
                      "reserve, or load the weights in a smaller dtype")));
}

TEST(PlanPlacementErrors, ModelDoesNotFit) {
  PlacementOptions o = with_map("balanced");
  o.kv_reserve_bytes = 70 * kGiB;
  const absl::Status s = plan_error(model32(), devices({80, 80}), o);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(
      s.message(),
      AllOf(HasSubstr("the model does not fit with device_map=balanced: its weights need "
                      "34.0 GiB"),
            HasSubstr("the devices allow 20.0 GiB for weights"),
            HasSubstr("device 0 (fake0): takes model.embed_tokens, model.layers.0-8 (10.0 GiB); "
                      "weight budget 10.0 GiB = allowed 80.0 GiB (free memory, no max_memory) - "
                      "KV cache reserve 70.0 GiB - activations 0 B"),
            HasSubstr("device 1 (fake1): takes model.layers.9-18 (10.0 GiB)"),
            HasSubstr("left over: model.layers.19-31, model.norm, lm_head (14.0 GiB)"),
            HasSubstr("raise max_memory"), HasSubstr("add devices"),
            HasSubstr("lower the KV cache reserve"), HasSubstr("smaller dtype")));
}

TEST(PlanPlacementErrors, ModelDoesNotFitNamesMaxMemoryAndStrategy) {
  for (const char* strategy : {"sequential", "balanced_low_0", "auto"}) {
    PlacementOptions o = with_map(strategy);
    o.max_memory = {{0, 8 * kGiB}, {1, 8 * kGiB}};
    const absl::Status s = plan_error(model32(), devices({80, 80}), o);
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(s.message(),
                AllOf(HasSubstr(std::string("does not fit with device_map=") + strategy + ":"),
                      HasSubstr("allowed 8.0 GiB (min(max_memory 8.0 GiB, free 80.0 GiB))")));
  }
}

TEST(PlanPlacementErrors, LayerLargerThanAnyDevice) {
  ModelFootprint m = model32();
  m.layer_bytes[5] = 100 * kGiB;
  const absl::Status s = plan_error(m, devices({80, 80}), PlacementOptions{});
  EXPECT_THAT(s.message(), AllOf(HasSubstr("the largest is 100.0 GiB"),
                                 HasSubstr("left over: model.layers.5-31")));
}

TEST(PlanPlacementErrors, NoDevices) {
  const absl::Status s = plan_error(model32(), {}, PlacementOptions{});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("devices: there are no devices to place the model on"));
}

TEST(PlanPlacementErrors, DuplicateDevice) {
  std::vector<DeviceInfo> d = devices({80, 80});
  d[1].index = 0;
  EXPECT_THAT(plan_error(model32(), d, PlacementOptions{}).message(),
              HasSubstr("devices: device 0 is listed twice"));
}

TEST(PlanPlacementErrors, MaxMemoryForAnUnknownDevice) {
  PlacementOptions o;
  o.max_memory = {{0, 10 * kGiB}, {2, 10 * kGiB}};
  const absl::Status s = plan_error(model32(), devices({80, 80}), o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("max_memory: device 2 is not among the devices (0, 1)"));
}

TEST(PlanPlacementErrors, BadFootprintAndOptions) {
  ModelFootprint no_layers = model32();
  no_layers.layer_bytes.clear();
  EXPECT_THAT(plan_error(no_layers, devices({80}), PlacementOptions{}).message(),
              HasSubstr("the model has no decoder layers"));

  ModelFootprint no_kv = model32();
  no_kv.kv_bytes_per_token_per_layer = 0;
  EXPECT_THAT(plan_error(no_kv, devices({80}), PlacementOptions{}).message(),
              HasSubstr("kv_bytes_per_token_per_layer is 0"));

  ModelFootprint tied = model32(true);
  tied.lm_head_bytes = kGiB;
  EXPECT_THAT(plan_error(tied, devices({80}), PlacementOptions{}).message(),
              HasSubstr("lm_head_bytes is 1073741824 but the embeddings are tied"));

  PlacementOptions o;
  o.kv_reserve_fraction = 1.0;
  EXPECT_THAT(plan_error(model32(), devices({80}), o).message(),
              HasSubstr("kv_reserve_fraction: 1 is not allowed; use a fraction in [0, 1)"));
  o.kv_reserve_fraction = -0.5;
  EXPECT_THAT(plan_error(model32(), devices({80}), o).message(),
              HasSubstr("kv_reserve_fraction: -0.5 is not allowed"));

  PlacementOptions empty_map;
  empty_map.device_map.strategy = DeviceMapStrategy::kExplicit;
  EXPECT_THAT(plan_error(model32(), devices({80}), empty_map).message(),
              HasSubstr("device_map: the explicit map has no entries"));
}

}  // namespace
}  // namespace tessera
