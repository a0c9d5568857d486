#include "runtime/placement/device_map.h"

#include <cctype>
#include <charconv>
#include <limits>
#include <optional>

#include "absl/status/status.h"
#include "runtime/placement/memory_size.h"
#include "base/status_macros.h"
#include "base/str_cat.h"

namespace tessera {
namespace {

constexpr std::string_view kStrategiesAllowed =
    "auto, balanced, balanced_low_0, sequential, or an explicit map "
    "(prefix=device,..., e.g. model.layers.0-15=0,model.layers.16-31=1)";
constexpr int32_t kMaxDeviceIndex = 1 << 16;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    if (at == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, at - start));
    start = at + 1;
  }
}

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// A non-negative decimal integer no larger than `max`, or nullopt.
std::optional<int32_t> parse_index(std::string_view s, int32_t max) {
  if (!all_digits(s)) return std::nullopt;
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size() || value > max) return std::nullopt;
  return static_cast<int32_t>(value);
}

absl::StatusOr<int32_t> parse_device_index(std::string_view option, std::string_view token,
                                           std::string_view text) {
  std::optional<int32_t> index = parse_index(text, kMaxDeviceIndex);
  if (!index) {
    return absl::InvalidArgumentError(str_cat(option, ": \"", token, "\": device \"", text,
                                              "\" is not a device index (an integer from 0 to ",
                                              kMaxDeviceIndex, ")"));
  }
  return *index;
}

// Fills the prefix fields of `entry` from `prefix`.
absl::Status parse_prefix(std::string_view token, std::string_view prefix, DeviceMapEntry* entry) {
  auto bad = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        str_cat("device_map: \"", token, "\": module prefix \"", prefix, "\" ", why));
  };
  if (prefix.empty()) {
    return bad(
        "is empty; name a module, e.g. model.layers.0-15 (or use device_map=sequential "
        "to put the whole model on the first device that holds it)");
  }
  const std::vector<std::string_view> parts = split(prefix, '.');
  for (std::string_view part : parts) {
    if (part.empty()) return bad("has an empty component (a leading, trailing or double dot)");
    for (char c : part) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
        return bad(str_cat("has the character '", std::string(1, c),
                           "'; module names use letters, digits, '_', '.' and '-' (ranges)"));
      }
    }
  }
  entry->prefix = std::string(prefix);
  const std::string_view last = parts.back();
  std::optional<int32_t> first;
  std::optional<int32_t> final_index;
  if (all_digits(last)) {
    first = final_index = parse_index(last, kMaxDeviceIndex * 16);
    if (!first) return bad("has a layer number out of range");
  } else if (const size_t dash = last.find('-'); dash != std::string_view::npos &&
                                                 all_digits(last.substr(0, dash)) &&
                                                 all_digits(last.substr(dash + 1))) {
    first = parse_index(last.substr(0, dash), kMaxDeviceIndex * 16);
    final_index = parse_index(last.substr(dash + 1), kMaxDeviceIndex * 16);
    if (!first || !final_index) return bad("has a layer number out of range");
    if (*first > *final_index) {
      return bad(str_cat("has the range ", *first, "-", *final_index,
                         ", which is empty; write the lower layer first"));
    }
  }
  if (first) {
    entry->base = parts.size() == 1
                      ? std::string()
                      : std::string(prefix.substr(0, prefix.size() - last.size() - 1));
    entry->first = *first;
    entry->last = *final_index;
  } else {
    entry->base = std::string(prefix);
  }
  return absl::OkStatus();
}

bool ranged(const DeviceMapEntry& e) {
  return e.first >= 0;
}

bool overlaps(const DeviceMapEntry& a, const DeviceMapEntry& b) {
  if (a.base != b.base || ranged(a) != ranged(b)) return false;
  if (!ranged(a)) return true;
  return a.first <= b.last && b.first <= a.last;
}

// Whether `module` starts with the dotted prefix `base` ("" is the root).
bool under(std::string_view module, std::string_view base, std::string_view* rest) {
  if (base.empty()) {
    *rest = module;
    return true;
  }
  if (module.size() < base.size() || module.substr(0, base.size()) != base) return false;
  if (module.size() == base.size()) {
    *rest = std::string_view();
    return true;
  }
  if (module[base.size()] != '.') return false;
  *rest = module.substr(base.size() + 1);
  return true;
}

size_t specificity(const DeviceMapEntry& e) {
  size_t n = e.base.empty() ? 0 : split(e.base, '.').size();
  return n + (ranged(e) ? 1 : 0);
}

}  // namespace

std::string_view device_map_strategy_name(DeviceMapStrategy strategy) {
  switch (strategy) {
    case DeviceMapStrategy::kAuto:
      return "auto";
    case DeviceMapStrategy::kBalanced:
      return "balanced";
    case DeviceMapStrategy::kBalancedLow0:
      return "balanced_low_0";
    case DeviceMapStrategy::kSequential:
      return "sequential";
    case DeviceMapStrategy::kExplicit:
      return "explicit";
  }
  return "unknown";
}

absl::StatusOr<DeviceMapSpec> parse_device_map(std::string_view text) {
  const std::string_view s = trim(text);
  DeviceMapSpec spec;
  if (s == "auto") {
    spec.strategy = DeviceMapStrategy::kAuto;
    return spec;
  }
  if (s == "balanced") {
    spec.strategy = DeviceMapStrategy::kBalanced;
    return spec;
  }
  if (s == "balanced_low_0") {
    spec.strategy = DeviceMapStrategy::kBalancedLow0;
    return spec;
  }
  if (s == "sequential") {
    spec.strategy = DeviceMapStrategy::kSequential;
    return spec;
  }
  if (s.find('=') == std::string_view::npos) {
    return absl::InvalidArgumentError(
        str_cat("device_map: \"", text, "\" is not one of ", kStrategiesAllowed));
  }
  spec.strategy = DeviceMapStrategy::kExplicit;
  for (std::string_view raw : split(s, ',')) {
    const std::string_view token = trim(raw);
    if (token.empty()) {
      return absl::InvalidArgumentError(
          str_cat("device_map: \"", text,
                  "\" has an empty entry; write prefix=device entries "
                  "separated by single commas"));
    }
    const size_t eq = token.find('=');
    if (eq == std::string_view::npos || token.find('=', eq + 1) != std::string_view::npos) {
      return absl::InvalidArgumentError(str_cat(
          "device_map: \"", token, "\" is not a prefix=device entry (e.g. model.layers.0-15=0)"));
    }
    DeviceMapEntry entry;
    TESSERA_RETURN_IF_ERROR(parse_prefix(token, trim(token.substr(0, eq)), &entry));
    TESSERA_ASSIGN_OR_RETURN(entry.device,
                             parse_device_index("device_map", token, trim(token.substr(eq + 1))));
    for (const DeviceMapEntry& other : spec.entries) {
      if (overlaps(entry, other)) {
        return absl::InvalidArgumentError(str_cat("device_map: \"", token, "\" overlaps \"",
                                                  other.prefix, "=", other.device,
                                                  "\"; each module may be placed only once"));
      }
    }
    spec.entries.push_back(std::move(entry));
  }
  return spec;
}

bool device_map_entry_covers(const DeviceMapEntry& e, std::string_view module) {
  std::string_view rest;
  if (!under(module, e.base, &rest)) return false;
  if (!ranged(e)) return true;
  const std::string_view component = rest.substr(0, rest.find('.'));
  std::optional<int32_t> n = parse_index(component, std::numeric_limits<int32_t>::max());
  return n && *n >= e.first && *n <= e.last;
}

const DeviceMapEntry* find_device_map_entry(const DeviceMapSpec& spec, std::string_view module) {
  const DeviceMapEntry* best = nullptr;
  for (const DeviceMapEntry& e : spec.entries) {
    if (device_map_entry_covers(e, module) &&
        (best == nullptr || specificity(e) > specificity(*best)))
      best = &e;
  }
  return best;
}

absl::StatusOr<std::map<int32_t, uint64_t>> parse_max_memory(std::string_view text) {
  std::map<int32_t, uint64_t> result;
  const std::string_view s = trim(text);
  if (s.empty()) return result;
  for (std::string_view raw : split(s, ',')) {
    const std::string_view token = trim(raw);
    const size_t eq = token.find('=');
    if (token.empty() || eq == std::string_view::npos) {
      return absl::InvalidArgumentError(
          str_cat("max_memory: \"", token, "\" in \"", text,
                  "\" is not a device=size entry (e.g. 0=40GiB,1=70GiB)"));
    }
    TESSERA_ASSIGN_OR_RETURN(const int32_t device,
                             parse_device_index("max_memory", token, trim(token.substr(0, eq))));
    TESSERA_ASSIGN_OR_RETURN(
        const uint64_t bytes,
        parse_memory_size(token.substr(eq + 1), str_cat("max_memory for device ", device)));
    if (!result.emplace(device, bytes).second) {
      return absl::InvalidArgumentError(
          str_cat("max_memory: \"", text, "\" gives device ", device, " twice"));
    }
  }
  return result;
}

absl::StatusOr<std::vector<int32_t>> parse_devices(std::string_view text) {
  std::vector<int32_t> result;
  const std::string_view s = trim(text);
  if (s.empty()) return result;
  for (std::string_view raw : split(s, ',')) {
    const std::string_view token = trim(raw);
    std::optional<int32_t> index = parse_index(token, kMaxDeviceIndex);
    if (!index) {
      return absl::InvalidArgumentError(
          str_cat("devices: \"", token, "\" in \"", text,
                  "\" is not a device index; write device indices (0 to ", kMaxDeviceIndex,
                  ") separated by commas, e.g. 0,1"));
    }
    for (int32_t d : result) {
      if (d == *index) {
        return absl::InvalidArgumentError(
            str_cat("devices: \"", text, "\" names device ", d, " twice"));
      }
    }
    result.push_back(*index);
  }
  return result;
}

}  // namespace tessera
