// parse_device_map (strategies, explicit maps with ranges), find_device_map_entry,
// parse_max_memory and parse_devices, with every error's message.
#include "runtime/placement/device_map.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr const char* kExample =
    "model.embed_tokens=0,model.layers.0-15=0,model.layers.16-31=1,model.norm=1,lm_head=1";

DeviceMapSpec parse_ok(const std::string& text) {
  absl::StatusOr<DeviceMapSpec> spec = parse_device_map(text);
  EXPECT_TRUE(spec.ok()) << text << ": " << spec.status().ToString();
  return spec.ok() ? *spec : DeviceMapSpec{};
}

std::string parse_error(const std::string& text) {
  absl::StatusOr<DeviceMapSpec> spec = parse_device_map(text);
  EXPECT_FALSE(spec.ok()) << text;
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

// The device placing `module`, or -1.
int device_of(const DeviceMapSpec& spec, const std::string& module) {
  const DeviceMapEntry* e = find_device_map_entry(spec, module);
  return e == nullptr ? -1 : e->device;
}

TEST(ParseDeviceMap, Strategies) {
  EXPECT_EQ(parse_ok("auto").strategy, DeviceMapStrategy::kAuto);
  EXPECT_EQ(parse_ok("balanced").strategy, DeviceMapStrategy::kBalanced);
  EXPECT_EQ(parse_ok("balanced_low_0").strategy, DeviceMapStrategy::kBalancedLow0);
  EXPECT_EQ(parse_ok("sequential").strategy, DeviceMapStrategy::kSequential);
  EXPECT_EQ(parse_ok("  sequential ").strategy, DeviceMapStrategy::kSequential);
  EXPECT_TRUE(parse_ok("balanced").entries.empty());
}

TEST(ParseDeviceMap, StrategyNames) {
  EXPECT_EQ(device_map_strategy_name(DeviceMapStrategy::kAuto), "auto");
  EXPECT_EQ(device_map_strategy_name(DeviceMapStrategy::kBalanced), "balanced");
  EXPECT_EQ(device_map_strategy_name(DeviceMapStrategy::kBalancedLow0), "balanced_low_0");
  EXPECT_EQ(device_map_strategy_name(DeviceMapStrategy::kSequential), "sequential");
  EXPECT_EQ(device_map_strategy_name(DeviceMapStrategy::kExplicit), "explicit");
}

TEST(ParseDeviceMap, UnknownStrategy) {
  EXPECT_THAT(parse_error("balanced_low_1"),
              HasSubstr("device_map: \"balanced_low_1\" is not one of auto, balanced, "
                        "balanced_low_0, sequential, or an explicit map"));
  EXPECT_THAT(parse_error(""), HasSubstr("device_map: \"\" is not one of"));
  EXPECT_THAT(parse_error("Balanced"), HasSubstr("\"Balanced\" is not one of"));
}

TEST(ParseDeviceMap, ExplicitWithRanges) {
  const DeviceMapSpec spec = parse_ok(kExample);
  EXPECT_EQ(spec.strategy, DeviceMapStrategy::kExplicit);
  ASSERT_EQ(spec.entries.size(), 5u);
  EXPECT_EQ(spec.entries[1].prefix, "model.layers.0-15");
  EXPECT_EQ(spec.entries[1].base, "model.layers");
  EXPECT_EQ(spec.entries[1].first, 0);
  EXPECT_EQ(spec.entries[1].last, 15);
  EXPECT_EQ(spec.entries[0].base, "model.embed_tokens");
  EXPECT_EQ(spec.entries[0].first, -1);

  EXPECT_EQ(device_of(spec, "model.embed_tokens"), 0);
  EXPECT_EQ(device_of(spec, "model.layers.0"), 0);
  EXPECT_EQ(device_of(spec, "model.layers.15"), 0);
  EXPECT_EQ(device_of(spec, "model.layers.16"), 1);
  EXPECT_EQ(device_of(spec, "model.layers.31"), 1);
  EXPECT_EQ(device_of(spec, "model.layers.31.mlp.down_proj"), 1);
  EXPECT_EQ(device_of(spec, "model.norm"), 1);
  EXPECT_EQ(device_of(spec, "lm_head"), 1);
  EXPECT_EQ(device_of(spec, "model.layers.32"), -1);
  EXPECT_EQ(device_of(spec, "model.layers"), -1);
  EXPECT_EQ(device_of(spec, "model.normal"), -1);  // a prefix matches whole components only
}

TEST(ParseDeviceMap, PlainHfPrefixesAndSpaces) {
  const DeviceMapSpec spec =
      parse_ok(" model.embed_tokens = 0 , model.layers.0=0, model.layers.1 =1,model.norm=1 ");
  ASSERT_EQ(spec.entries.size(), 4u);
  EXPECT_EQ(spec.entries[1].first, 0);
  EXPECT_EQ(spec.entries[1].last, 0);
  EXPECT_EQ(device_of(spec, "model.layers.0"), 0);
  EXPECT_EQ(device_of(spec, "model.layers.1"), 1);
  EXPECT_EQ(device_of(spec, "model.layers.10"), -1);  // "1" does not cover "10"
}

TEST(ParseDeviceMap, MoreSpecificEntryWins) {
  const DeviceMapSpec spec = parse_ok("model=0,model.layers.30-31=1,model.norm=1,lm_head=1");
  EXPECT_EQ(device_of(spec, "model.embed_tokens"), 0);
  EXPECT_EQ(device_of(spec, "model.layers.29"), 0);
  EXPECT_EQ(device_of(spec, "model.layers.30"), 1);
  EXPECT_EQ(device_of(spec, "model.norm"), 1);
  EXPECT_EQ(device_of(spec, "lm_head"), 1);

  const DeviceMapSpec nested = parse_ok("model.layers=1,model.layers.3=0");
  EXPECT_EQ(device_of(nested, "model.layers.3"), 0);
  EXPECT_EQ(device_of(nested, "model.layers.4"), 1);
}

TEST(ParseDeviceMap, ExplicitErrors) {
  EXPECT_THAT(parse_error("model.layers.0-15=0,model.layers.10=1"),
              HasSubstr("device_map: \"model.layers.10=1\" overlaps \"model.layers.0-15=0\""));
  EXPECT_THAT(parse_error("model.norm=0,model.norm=1"),
              HasSubstr("\"model.norm=1\" overlaps \"model.norm=0\""));
  EXPECT_THAT(parse_error("model.layers.0-15=0,model.layers.15-31=1"), HasSubstr("overlaps"));
  EXPECT_THAT(parse_error("model.layers.15-0=0"),
              HasSubstr("device_map: \"model.layers.15-0=0\": module prefix "
                        "\"model.layers.15-0\" has the range 15-0, which is empty"));
  EXPECT_THAT(parse_error("=0"), HasSubstr("module prefix \"\" is empty"));
  EXPECT_THAT(parse_error("model..norm=0"), HasSubstr("has an empty component"));
  EXPECT_THAT(parse_error("model.norm.=0"), HasSubstr("has an empty component"));
  EXPECT_THAT(parse_error("model/norm=0"), HasSubstr("has the character '/'"));
  EXPECT_THAT(parse_error("model.norm=gpu1"),
              HasSubstr("device_map: \"model.norm=gpu1\": device \"gpu1\" is not a device "
                        "index"));
  EXPECT_THAT(parse_error("model.norm=-1"), HasSubstr("device \"-1\" is not a device index"));
  EXPECT_THAT(parse_error("model.norm=99999999999"), HasSubstr("is not a device index"));
  EXPECT_THAT(parse_error("model.norm="), HasSubstr("device \"\" is not a device index"));
  EXPECT_THAT(parse_error("model.norm=0,"), HasSubstr("has an empty entry"));
  EXPECT_THAT(parse_error("model.norm=0=1"),
              HasSubstr("device_map: \"model.norm=0=1\" is not a prefix=device entry"));
  EXPECT_THAT(parse_error("model.norm=0,lm_head"),
              HasSubstr("\"lm_head\" is not a prefix=device entry"));
}

TEST(ParseMaxMemory, Entries) {
  absl::StatusOr<std::map<int32_t, uint64_t>> m = parse_max_memory("0=40GiB,1=70GiB");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_THAT(*m, ElementsAre(Pair(0, 40 * kGiB), Pair(1, 70 * kGiB)));

  m = parse_max_memory(" 3 = 1.5 GiB , 1=1000 ");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_THAT(*m, ElementsAre(Pair(1, 1000u), Pair(3, 3 * kGiB / 2)));

  m = parse_max_memory("0=0");  // a valid limit: nothing goes on device 0
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_THAT(*m, ElementsAre(Pair(0, 0u)));

  m = parse_max_memory("");
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->empty());
}

TEST(ParseMaxMemory, Errors) {
  auto error = [](const std::string& text) {
    absl::StatusOr<std::map<int32_t, uint64_t>> m = parse_max_memory(text);
    EXPECT_FALSE(m.ok()) << text;
    return m.ok() ? std::string() : std::string(m.status().message());
  };
  EXPECT_THAT(error("cpu=10GiB"),
              HasSubstr("max_memory: \"cpu=10GiB\": device \"cpu\" is not a device index"));
  EXPECT_THAT(error("0=40GX"),
              HasSubstr("max_memory for device 0: \"40GX\" has unknown unit \"GX\""));
  EXPECT_THAT(error("0=-1GiB"), HasSubstr("max_memory for device 0: \"-1GiB\" is negative"));
  EXPECT_THAT(error("40GiB"), HasSubstr("max_memory: \"40GiB\" in \"40GiB\" is not a "
                                        "device=size entry"));
  EXPECT_THAT(error("0=1GiB,,1=2GiB"), HasSubstr("is not a device=size entry"));
  EXPECT_THAT(error("0=1GiB,0=2GiB"), HasSubstr("gives device 0 twice"));
}

TEST(ParseDevices, Lists) {
  absl::StatusOr<std::vector<int32_t>> d = parse_devices("0,1");
  ASSERT_TRUE(d.ok());
  EXPECT_THAT(*d, ElementsAre(0, 1));
  d = parse_devices(" 3 , 1,2 ");
  ASSERT_TRUE(d.ok());
  EXPECT_THAT(*d, ElementsAre(3, 1, 2));  // the order written is the pipeline order
  d = parse_devices("");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->empty());
}

TEST(ParseDevices, Errors) {
  auto error = [](const std::string& text) {
    absl::StatusOr<std::vector<int32_t>> d = parse_devices(text);
    EXPECT_FALSE(d.ok()) << text;
    return d.ok() ? std::string() : std::string(d.status().message());
  };
  EXPECT_THAT(error("0,,1"), HasSubstr("devices: \"\" in \"0,,1\" is not a device index"));
  EXPECT_THAT(error("gpu0"), HasSubstr("devices: \"gpu0\" in \"gpu0\" is not a device index"));
  EXPECT_THAT(error("-1"), HasSubstr("\"-1\" in \"-1\" is not a device index"));
  EXPECT_THAT(error("0,1,0"), HasSubstr("devices: \"0,1,0\" names device 0 twice"));
}

}  // namespace
}  // namespace tessera
