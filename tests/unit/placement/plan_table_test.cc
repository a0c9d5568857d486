// format_plan_table: the exact text of a two-device plan, a device without layers, a tied copy.
#include "runtime/placement/plan_table.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/placement/fake_model.h"

namespace tessera {
namespace {

using namespace placement_test;

PlacementPlan plan(const char* device_map, bool tied, int num_devices) {
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < num_devices; ++i) {
    devices.push_back({i, i == 0 ? "NVIDIA H100 80GB HBM3" : "H100", 80 * kGiB, 80 * kGiB});
  }
  PlacementOptions o;
  o.device_map = *parse_device_map(device_map);
  absl::StatusOr<PlacementPlan> p = plan_placement(model32(tied), devices, o);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : PlacementPlan{};
}

TEST(FormatPlanTable, TwoDevices) {
  EXPECT_EQ(format_plan_table(plan("balanced", false, 2)),
            "device  name                   layers  modules         weights   allowed  kv cache  "
            "kv tokens\n"
            "0       NVIDIA H100 80GB HBM3  0-15    embed_tokens   17.0 GiB  80.0 GiB  63.0 GiB  "
            "    64512\n"
            "1       H100                   16-31   norm, lm_head  17.0 GiB  80.0 GiB  63.0 GiB  "
            "    64511\n"
            "device_map=balanced: weights 34.0 GiB on 2 of 2 devices, KV capacity 64511 tokens\n");
}

TEST(FormatPlanTable, EmptyDeviceAndTiedCopy) {
  EXPECT_EQ(format_plan_table(plan("balanced_low_0", true, 3)),
            "device  name                   layers  modules                     weights   allowed  "
            "kv cache  kv tokens\n"
            "0       NVIDIA H100 80GB HBM3  -       -                               0 B  80.0 GiB  "
            "       -          -\n"
            "1       H100                   0-15    embed_tokens               17.0 GiB  80.0 GiB  "
            "63.0 GiB      64512\n"
            "2       H100                   16-31   norm, lm_head (tied copy)  17.0 GiB  80.0 GiB  "
            "63.0 GiB      64511\n"
            "device_map=balanced_low_0: weights 34.0 GiB on 2 of 3 devices, KV capacity 64511 "
            "tokens\n");
}

}  // namespace
}  // namespace tessera
