#include "runtime/placement/placement_planner.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "runtime/placement/layer_partition.h"
#include "runtime/placement/memory_size.h"
#include "base/status_macros.h"
#include "base/str_cat.h"

namespace tessera {
namespace {

constexpr std::string_view kEmbeddings = "model.embed_tokens";
constexpr std::string_view kLayerPrefix = "model.layers.";
constexpr std::string_view kFinalNorm = "model.norm";
constexpr std::string_view kLmHead = "lm_head";
constexpr std::string_view kLogits = "the logits buffers";
constexpr std::string_view kFitAdvice =
    "to make it fit, raise max_memory, add devices (the devices option), lower the KV cache "
    "reserve, or load the weights in a smaller dtype";

std::string layer_name(int32_t layer) {
  return str_cat(kLayerPrefix, layer);
}

// "model.layers.3" or "model.layers.0-15" for layers [begin, end).
std::string layers_text(int32_t begin, int32_t end) {
  if (end - begin == 1) return layer_name(begin);
  return str_cat(kLayerPrefix, begin, "-", end - 1);
}

uint64_t saturating_sub(uint64_t a, uint64_t b) {
  return a > b ? a - b : 0;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

// Memory of one device, as the header's formulas say.
struct Budget {
  std::optional<uint64_t> max_memory;
  uint64_t allowed = 0;
  uint64_t kv_reserve = 0;
  uint64_t weights = 0;  // the weight budget
};

class Planner {
 public:
  Planner(const ModelFootprint& model, const std::vector<DeviceInfo>& devices,
          const PlacementOptions& options)
      : model_(model),
        devices_(devices),
        options_(options),
        num_layers_(static_cast<int32_t>(model.layer_bytes.size())) {}

  absl::StatusOr<PlacementPlan> plan() {
    TESSERA_RETURN_IF_ERROR(validate());
    compute_budgets();
    std::vector<uint64_t> weight_budgets;
    for (const Budget& b : budgets_) weight_budgets.push_back(b.weights);
    const SegmentCost cost = [this](int32_t begin, int32_t end) { return this->cost(begin, end); };

    LayerPartition partition;
    switch (options_.device_map.strategy) {
      case DeviceMapStrategy::kAuto:
      case DeviceMapStrategy::kBalanced:
        partition = partition_balanced(model_.layer_bytes, weight_budgets, cost);
        break;
      case DeviceMapStrategy::kBalancedLow0:
        partition = partition_balanced_low_0(model_.layer_bytes, weight_budgets, cost);
        break;
      case DeviceMapStrategy::kSequential:
        partition = partition_sequential(model_.layer_bytes, weight_budgets, cost);
        break;
      case DeviceMapStrategy::kExplicit: {
        TESSERA_ASSIGN_OR_RETURN(partition.segments, explicit_segments());
        partition.placed = num_layers_;
        TESSERA_RETURN_IF_ERROR(check_explicit_fits(partition.segments));
        break;
      }
    }
    if (partition.placed != num_layers_) return does_not_fit(partition);
    return assemble(partition.segments);
  }

 private:
  absl::Status validate() {
    if (devices_.empty()) {
      return absl::InvalidArgumentError(
          "devices: there are no devices to place the model on (no GPU is visible, or the "
          "devices option selects none)");
    }
    for (size_t i = 0; i < devices_.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (devices_[i].index == devices_[j].index) {
          return absl::InvalidArgumentError(
              str_cat("devices: device ", devices_[i].index, " is listed twice"));
        }
      }
    }
    if (num_layers_ == 0) {
      return absl::InvalidArgumentError("placement: the model has no decoder layers to place");
    }
    if (model_.kv_bytes_per_token_per_layer == 0) {
      return absl::InvalidArgumentError(
          "placement: kv_bytes_per_token_per_layer is 0; it must be positive");
    }
    if (model_.tied_embeddings && model_.lm_head_bytes != 0) {
      return absl::InvalidArgumentError(
          str_cat("placement: lm_head_bytes is ", model_.lm_head_bytes,
                  " but the embeddings are tied; a tied lm_head has no weights of its own (0)"));
    }
    unsigned __int128 total = model_.embedding_bytes;
    total += model_.final_norm_bytes;
    total += model_.lm_head_bytes;
    prefix_.assign(1, 0);
    for (uint64_t b : model_.layer_bytes) {
      total += b;
      prefix_.push_back(prefix_.back() + b);
    }
    total += model_.embedding_bytes;  // a possible tied copy
    total += options_.head_activation_bytes;
    if (total > std::numeric_limits<uint64_t>::max()) {
      return absl::InvalidArgumentError("placement: the model's byte counts overflow 64 bits");
    }
    const double f = options_.kv_reserve_fraction;
    if (!(f >= 0.0 && f < 1.0)) {
      return absl::InvalidArgumentError(
          str_cat("kv_reserve_fraction: ", f, " is not allowed; use a fraction in [0, 1)"));
    }
    for (const auto& [device, bytes] : options_.max_memory) {
      if (position(device) < 0) {
        return absl::InvalidArgumentError(str_cat("max_memory: device ", device,
                                                  " is not among the devices (", device_list(),
                                                  "); give limits only for those"));
      }
    }
    if (options_.device_map.strategy == DeviceMapStrategy::kExplicit) {
      if (options_.device_map.entries.empty()) {
        return absl::InvalidArgumentError("device_map: the explicit map has no entries");
      }
      for (const DeviceMapEntry& e : options_.device_map.entries) {
        if (position(e.device) < 0) {
          return absl::InvalidArgumentError(
              str_cat("device_map: \"", e.prefix, "=", e.device, "\" names device ", e.device,
                      ", which is not among the devices (", device_list(), ")"));
        }
      }
    }
    return absl::OkStatus();
  }

  void compute_budgets() {
    for (const DeviceInfo& d : devices_) {
      Budget b;
      b.allowed = d.free_bytes;
      if (auto it = options_.max_memory.find(d.index); it != options_.max_memory.end()) {
        b.max_memory = it->second;
        b.allowed = std::min(b.allowed, it->second);
      }
      b.kv_reserve = options_.kv_reserve_bytes != 0
                         ? options_.kv_reserve_bytes
                         : static_cast<uint64_t>(std::floor(options_.kv_reserve_fraction *
                                                            static_cast<double>(b.allowed)));
      b.weights =
          saturating_sub(saturating_sub(b.allowed, options_.activation_bytes), b.kv_reserve);
      budgets_.push_back(b);
    }
  }

  // Weight bytes of layers [begin, end) with the modules that go with them.
  uint64_t weight_bytes(int32_t begin, int32_t end) const {
    if (begin == end) return 0;
    uint64_t bytes = prefix_[end] - prefix_[begin];
    if (begin == 0) bytes += model_.embedding_bytes;
    if (end == num_layers_) {
      bytes += model_.final_norm_bytes;
      bytes +=
          model_.tied_embeddings ? (begin == 0 ? 0 : model_.embedding_bytes) : model_.lm_head_bytes;
    }
    return bytes;
  }

  // What holding layers [begin, end) takes from a weight budget: their weights, and with the last
  // layer the buffers only the lm_head device allocates.
  uint64_t cost(int32_t begin, int32_t end) const {
    const uint64_t head = begin < end && end == num_layers_ ? options_.head_activation_bytes : 0;
    return weight_bytes(begin, end) + head;
  }

  int32_t position(int32_t device) const {
    for (size_t i = 0; i < devices_.size(); ++i) {
      if (devices_[i].index == device) return static_cast<int32_t>(i);
    }
    return -1;
  }

  std::string device_list() const {
    std::vector<std::string> parts;
    for (const DeviceInfo& d : devices_) parts.push_back(str_cat(d.index));
    return join(parts, ", ");
  }

  std::string modules_list() const {
    return str_cat(kEmbeddings, ", ", layers_text(0, num_layers_), ", ", kFinalNorm, ", ", kLmHead);
  }

  // Modules of segment [begin, end), e.g. "model.embed_tokens, model.layers.0-15".
  std::string segment_modules(int32_t begin, int32_t end) const {
    if (begin == end) return "nothing";
    std::vector<std::string> parts;
    if (begin == 0) parts.emplace_back(kEmbeddings);
    parts.push_back(layers_text(begin, end));
    if (end == num_layers_) {
      parts.emplace_back(kFinalNorm);
      parts.push_back(model_.tied_embeddings && begin != 0
                          ? str_cat(kLmHead, " (tied: a copy of ", kEmbeddings, ")")
                          : std::string(kLmHead));
      if (options_.head_activation_bytes > 0) parts.emplace_back(kLogits);
    }
    return join(parts, ", ");
  }

  // Where device i's weight budget comes from.
  std::string budget_text(size_t i) const {
    const Budget& b = budgets_[i];
    const DeviceInfo& d = devices_[i];
    std::string limit = b.max_memory ? str_cat("min(max_memory ", format_memory_size(*b.max_memory),
                                               ", free ", format_memory_size(d.free_bytes), ")")
                                     : str_cat("free memory, no max_memory");
    return str_cat("weight budget ", format_memory_size(b.weights), " = allowed ",
                   format_memory_size(b.allowed), " (", limit, ") - KV cache reserve ",
                   format_memory_size(b.kv_reserve), " - activations ",
                   format_memory_size(options_.activation_bytes));
  }

  std::string device_text(size_t i) const {
    return str_cat("device ", devices_[i].index, " (", devices_[i].name, ")");
  }

  absl::StatusOr<std::vector<LayerSegment>> explicit_segments() const {
    const DeviceMapSpec& spec = options_.device_map;
    // Every entry must name something of this model.
    for (const DeviceMapEntry& e : spec.entries) {
      bool covers_any = false;
      for (std::string_view m : {kEmbeddings, kFinalNorm, kLmHead}) {
        covers_any = covers_any || device_map_entry_covers(e, m);
      }
      for (int32_t l = 0; l < num_layers_ && !covers_any; ++l) {
        covers_any = device_map_entry_covers(e, layer_name(l));
      }
      if (!covers_any) {
        return absl::InvalidArgumentError(
            str_cat("device_map: \"", e.prefix, "=", e.device,
                    "\" places no module of this model; a decoder layer is placed whole "
                    "(model.layers.N), and the modules are ",
                    modules_list()));
      }
      if (e.first >= 0 && e.last >= num_layers_ && str_cat(e.base, ".") == kLayerPrefix) {
        return absl::InvalidArgumentError(
            str_cat("device_map: \"", e.prefix, "=", e.device, "\" names layers up to ", e.last,
                    ", but the model has ", num_layers_, " (", layers_text(0, num_layers_), ")"));
      }
    }
    // Every module must be placed.
    std::vector<int32_t> layer_device(num_layers_, -1);
    std::vector<std::string> missing;
    auto device_of = [&](std::string_view module) -> int32_t {
      const DeviceMapEntry* e = find_device_map_entry(spec, module);
      return e == nullptr ? -1 : e->device;
    };
    const int32_t embed_device = device_of(kEmbeddings);
    if (embed_device < 0) missing.emplace_back(kEmbeddings);
    for (int32_t l = 0; l < num_layers_;) {
      layer_device[l] = device_of(layer_name(l));
      if (layer_device[l] >= 0) {
        ++l;
        continue;
      }
      int32_t end = l + 1;
      while (end < num_layers_ && device_of(layer_name(end)) < 0) ++end;
      missing.push_back(layers_text(l, end));
      l = end;
    }
    const int32_t norm_device = device_of(kFinalNorm);
    if (norm_device < 0) missing.emplace_back(kFinalNorm);
    const int32_t head_device = device_of(kLmHead);
    if (head_device < 0) missing.emplace_back(kLmHead);
    if (!missing.empty()) {
      return absl::InvalidArgumentError(
          str_cat("device_map: no entry places ", join(missing, ", "),
                  "; an explicit map must place every module (", modules_list(),
                  "), or use a strategy (auto, balanced, balanced_low_0, sequential)"));
    }
    // Pipeline order: layers go through the devices in the order of the device list.
    for (int32_t l = 1; l < num_layers_; ++l) {
      if (position(layer_device[l]) < position(layer_device[l - 1])) {
        return absl::InvalidArgumentError(
            str_cat("device_map: ", layer_name(l), " is on device ", layer_device[l], " after ",
                    layer_name(l - 1), " on device ", layer_device[l - 1],
                    "; layers run as a pipeline, so each device must hold one contiguous range of "
                    "layers and the ranges must follow the order of the devices (",
                    device_list(), ")"));
      }
    }
    const int32_t last = num_layers_ - 1;
    if (embed_device != layer_device[0]) {
      return absl::InvalidArgumentError(
          str_cat("device_map: ", kEmbeddings, " is on device ", embed_device, " but ",
                  layer_name(0), " is on device ", layer_device[0],
                  "; the embeddings must be on the first layer's device"));
    }
    for (auto [module, device] : std::initializer_list<std::pair<std::string_view, int32_t>>{
             {kFinalNorm, norm_device}, {kLmHead, head_device}}) {
      if (device != layer_device[last]) {
        return absl::InvalidArgumentError(str_cat("device_map: ", module, " is on device ", device,
                                                  " but ", layer_name(last), " is on device ",
                                                  layer_device[last], "; ", kFinalNorm, " and ",
                                                  kLmHead, " must be on the last layer's device"));
      }
    }
    std::vector<LayerSegment> segments;
    int32_t at = 0;
    for (const DeviceInfo& d : devices_) {
      int32_t end = at;
      while (end < num_layers_ && layer_device[end] == d.index) ++end;
      segments.push_back({at, end});
      at = end;
    }
    return segments;
  }

  absl::Status check_explicit_fits(const std::vector<LayerSegment>& segments) const {
    bool fits = true;
    std::vector<std::string> lines;
    for (size_t i = 0; i < segments.size(); ++i) {
      const uint64_t need = cost(segments[i].begin, segments[i].end);
      if (need > budgets_[i].weights) fits = false;
      if (segments[i].size() == 0) continue;
      lines.push_back(
          str_cat(device_text(i), ": ", segment_modules(segments[i].begin, segments[i].end),
                  " need ", format_memory_size(need),
                  need > budgets_[i].weights ? " (too much)" : " (fits)", "; ", budget_text(i)));
    }
    if (fits) return absl::OkStatus();
    return absl::ResourceExhaustedError(str_cat(
        "the model does not fit with this device_map: ", join(lines, "; "), "; ", kFitAdvice));
  }

  absl::Status does_not_fit(const LayerPartition& partition) const {
    uint64_t total_budget = 0;
    std::vector<std::string> lines;
    for (size_t i = 0; i < partition.segments.size(); ++i) {
      const LayerSegment& s = partition.segments[i];
      total_budget += budgets_[i].weights;
      lines.push_back(str_cat(device_text(i), ": takes ", segment_modules(s.begin, s.end), " (",
                              format_memory_size(cost(s.begin, s.end)), "); ", budget_text(i)));
    }
    const uint64_t left = cost(partition.placed, num_layers_);
    return absl::ResourceExhaustedError(str_cat(
        "the model does not fit with device_map=",
        device_map_strategy_name(options_.device_map.strategy), ": its weights need ",
        format_memory_size(weight_bytes(0, num_layers_)),
        " (in whole decoder layers; the largest is ",
        format_memory_size(*std::max_element(model_.layer_bytes.begin(), model_.layer_bytes.end())),
        ")",
        options_.head_activation_bytes > 0
            ? str_cat(" and ", kLogits, " ", format_memory_size(options_.head_activation_bytes))
            : std::string(),
        ", the devices allow ", format_memory_size(total_budget), " for weights; ",
        join(lines, "; "), "; left over: ", segment_modules(partition.placed, num_layers_), " (",
        format_memory_size(left), "); ", kFitAdvice));
  }

  PlacementPlan assemble(const std::vector<LayerSegment>& segments) const {
    PlacementPlan plan;
    plan.strategy = options_.device_map.strategy;
    plan.kv_capacity_tokens = std::numeric_limits<int64_t>::max();
    for (size_t i = 0; i < segments.size(); ++i) {
      const LayerSegment& s = segments[i];
      DevicePlacement p;
      p.device = devices_[i].index;
      p.name = devices_[i].name;
      p.allowed_bytes = budgets_[i].allowed;
      p.weight_budget_bytes = budgets_[i].weights;
      if (s.size() > 0) {
        p.first_layer = s.begin;
        p.last_layer = s.end - 1;
        p.embeddings = s.begin == 0;
        p.head = s.end == num_layers_;
        p.tied_embedding_copy = p.head && model_.tied_embeddings && s.begin != 0;
        p.weight_bytes = weight_bytes(s.begin, s.end);
        p.kv_bytes = saturating_sub(saturating_sub(p.allowed_bytes, options_.activation_bytes),
                                    cost(s.begin, s.end));
        p.kv_capacity_tokens = static_cast<int64_t>(
            p.kv_bytes / (model_.kv_bytes_per_token_per_layer * static_cast<uint64_t>(s.size())));
        plan.kv_capacity_tokens = std::min(plan.kv_capacity_tokens, p.kv_capacity_tokens);
      }
      plan.weight_bytes += p.weight_bytes;
      plan.devices.push_back(std::move(p));
    }
    return plan;
  }

  const ModelFootprint& model_;
  const std::vector<DeviceInfo>& devices_;
  const PlacementOptions& options_;
  const int32_t num_layers_;
  std::vector<uint64_t> prefix_;  // prefix_[i]: bytes of layers [0, i)
  std::vector<Budget> budgets_;   // per device, in device-list order
};

}  // namespace

int32_t PlacementPlan::device_of_layer(int32_t layer) const {
  for (const DevicePlacement& d : devices) {
    if (d.first_layer >= 0 && layer >= d.first_layer && layer <= d.last_layer) return d.device;
  }
  return -1;
}

absl::StatusOr<PlacementPlan> plan_placement(const ModelFootprint& model,
                                             const std::vector<DeviceInfo>& devices,
                                             const PlacementOptions& options) {
  return Planner(model, devices, options).plan();
}

}  // namespace tessera
