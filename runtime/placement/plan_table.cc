#include "runtime/placement/plan_table.h"

#include <algorithm>
#include <array>
#include <vector>

#include "fmt/format.h"
#include "runtime/placement/memory_size.h"

namespace tessera {
namespace {

constexpr size_t kColumns = 8;
using Row = std::array<std::string, kColumns>;
// Numbers are right-aligned, text left-aligned.
constexpr std::array<bool, kColumns> kRightAligned = {false, false, false, false,
                                                      true,  true,  true,  true};

std::string modules_text(const DevicePlacement& d) {
  std::vector<std::string> parts;
  if (d.embeddings) parts.emplace_back("embed_tokens");
  if (d.head) {
    parts.emplace_back("norm");
    parts.emplace_back(d.tied_embedding_copy ? "lm_head (tied copy)" : "lm_head");
  }
  if (parts.empty()) return "-";
  std::string out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) out += ", " + parts[i];
  return out;
}

}  // namespace

std::string format_plan_table(const PlacementPlan& plan) {
  std::vector<Row> rows;
  rows.push_back(
      {"device", "name", "layers", "modules", "weights", "allowed", "kv cache", "kv tokens"});
  int32_t used = 0;
  for (const DevicePlacement& d : plan.devices) {
    const bool holds = d.num_layers() > 0;
    used += holds ? 1 : 0;
    std::string device = fmt::format("{}", d.device);
    for (size_t r = 1; r < d.ranks.size(); ++r) device += fmt::format(",{}", d.ranks[r]);
    rows.push_back({
        device,
        d.name.empty() ? "-" : d.name,
        holds ? fmt::format("{}-{}", d.first_layer, d.last_layer) : "-",
        modules_text(d),
        format_memory_size(d.weight_bytes),
        format_memory_size(d.allowed_bytes),
        holds ? format_memory_size(d.kv_bytes) : "-",
        holds ? fmt::format("{}", d.kv_capacity_tokens) : "-",
    });
  }
  std::array<size_t, kColumns> width{};
  for (const Row& row : rows) {
    for (size_t c = 0; c < kColumns; ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const Row& row : rows) {
    std::string line;
    for (size_t c = 0; c < kColumns; ++c) {
      if (c > 0) line += "  ";
      line += kRightAligned[c] ? fmt::format("{:>{}}", row[c], width[c])
                               : fmt::format("{:<{}}", row[c], width[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  if (plan.tensor_parallel_size > 1) {
    out += fmt::format("tensor_parallel_size={}: each row is a stage of that many devices; its "
                       "weights, allowed, kv cache and kv tokens are per device\n",
                       plan.tensor_parallel_size);
  }
  out += fmt::format("device_map={}: weights {} on {} of {} {}, KV capacity {} tokens\n",
                     device_map_strategy_name(plan.strategy), format_memory_size(plan.weight_bytes),
                     used, plan.devices.size(), plan.tensor_parallel_size > 1 ? "stages" : "devices",
                     plan.kv_capacity_tokens);
  return out;
}

}  // namespace tessera
