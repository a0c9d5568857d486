// The user-facing placement options, parsed from their text form:
//   device_map   a strategy (auto, balanced, balanced_low_0, sequential) or an explicit map
//                "prefix=device,...", e.g. "model.embed_tokens=0,model.layers.0-15=0,
//                model.layers.16-31=1,model.norm=1,lm_head=1" (accelerate's semantics);
//   max_memory   per-device caps, "0=40GiB,1=70GiB";
//   devices      the device indices to use, in pipeline order, "0,1".
// Whether the indices exist, and whether a map covers the model, is checked by the planner
// (placement_planner.h), which knows the devices and the model.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {

enum class DeviceMapStrategy {
  kAuto,          // = kBalanced
  kBalanced,      // about the same weight bytes on every device
  kBalancedLow0,  // device 0 holds only what does not fit on the others
  kSequential,    // fill device 0, then 1, ...
  kExplicit,      // every module placed by DeviceMapSpec::entries
};

std::string_view device_map_strategy_name(DeviceMapStrategy strategy);

// One "prefix=device" of an explicit map. The prefix covers a module when it equals the
// module's name or is a dotted ancestor of it ("model" covers "model.layers.3"). A last
// component "A-B" is the range shorthand: "model.layers.0-15" covers model.layers.0 ..
// model.layers.15. A plain number as last component ("model.layers.3") is the range 3-3.
struct DeviceMapEntry {
  std::string prefix;  // as written, for messages
  int32_t device = 0;

  // The prefix without a numeric / range last component, and that range (inclusive); both
  // layer bounds are -1 when the last component is not numeric.
  std::string base;
  int32_t first = -1;
  int32_t last = -1;
};

struct DeviceMapSpec {
  DeviceMapStrategy strategy = DeviceMapStrategy::kAuto;
  std::vector<DeviceMapEntry> entries;  // only for kExplicit, in the order written
};

// A strategy name, or an explicit map. Entries that overlap at the same level ("model.norm"
// twice, "model.layers.0-15" and "model.layers.10") are an error; a more specific entry
// inside a broader one ("model=0,model.layers.31=1") is allowed and wins.
absl::StatusOr<DeviceMapSpec> parse_device_map(std::string_view text);

// Whether `entry` covers `module` (a module name such as "model.layers.3").
bool device_map_entry_covers(const DeviceMapEntry& entry, std::string_view module);

// The entry that places `module` (the most specific covering one), or nullptr.
const DeviceMapEntry* find_device_map_entry(const DeviceMapSpec& spec, std::string_view module);

// "0=40GiB,1=70GiB" -> {0: 40 GiB, 1: 70 GiB}. Empty text is no limits (an empty map).
absl::StatusOr<std::map<int32_t, uint64_t>> parse_max_memory(std::string_view text);

// "0,1" -> {0, 1}, in the order written (the pipeline order). Empty text is an empty list,
// which callers read as "every visible device".
absl::StatusOr<std::vector<int32_t>> parse_devices(std::string_view text);

}  // namespace tessera
