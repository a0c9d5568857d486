// The multi-device placement planner: given what the model weighs, the devices and the user's
// device_map / max_memory / KV reserve, decides which device holds which decoder layers (a
// pipeline: each device one contiguous range, in the order of the device list), and how much
// memory each device has left for the KV cache of its layers.
//
// Rules (DESIGN.md, "Placement"): the decoder layer is never split; the embeddings go with the
// first layer, the final norm and lm_head with the last. With tied embeddings lm_head uses the
// embedding matrix: when the last layer is on another device than the first, that device holds
// a copy of it, counted on both devices.
//
// Strategies (layer_partition.h has the details): auto = balanced, the decoder layers spread
// evenly over the devices within their budgets; balanced_low_0, device 0 holds only what does
// not fit on the others; sequential, fill device 0, then 1, ...; explicit, the map's entries.
//
// Memory per device d:
//   allowed       = min(max_memory[d] if given, free_bytes)
//   kv reserve    = kv_reserve_bytes if non-zero, else kv_reserve_fraction * allowed
//   weight budget = allowed - activation_bytes - kv reserve
//   head          = head_activation_bytes on the device that holds lm_head, else 0
//   kv bytes      = allowed - activation_bytes - weights - head  (devices that hold layers)
//   kv tokens     = kv bytes / (kv_bytes_per_token_per_layer * layers on d)
// A device's weights and head must fit its weight budget: the head's buffers go with lm_head.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/placement/device_map.h"

namespace tessera {

// Bytes of the model's weights as they will be stored on the devices (after any conversion).
struct ModelFootprint {
  uint64_t embedding_bytes = 0;               // model.embed_tokens
  std::vector<uint64_t> layer_bytes;          // model.layers.i, one entry per decoder layer
  uint64_t final_norm_bytes = 0;              // model.norm
  uint64_t lm_head_bytes = 0;                 // lm_head; must be 0 when tied
  bool tied_embeddings = false;               // lm_head uses the embedding matrix
  uint64_t kv_bytes_per_token_per_layer = 0;  // K and V of one token in one layer; > 0
};

struct DeviceInfo {
  int32_t index = 0;
  std::string name;  // e.g. "NVIDIA H100 80GB HBM3", for logs
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
};

struct PlacementOptions {
  DeviceMapSpec device_map;                // default: auto
  std::map<int32_t, uint64_t> max_memory;  // device index -> cap; absent = free memory
  uint64_t activation_bytes = 0;           // per device: activations and workspaces
  uint64_t head_activation_bytes = 0;      // the lm_head device's alone: its input rows, logits
  uint64_t kv_reserve_bytes = 0;           // per device kept free of weights; 0 = use fraction
  double kv_reserve_fraction = 0.1;        // of allowed memory, when kv_reserve_bytes is 0
};

struct DevicePlacement {
  int32_t device = 0;
  std::string name;
  // Tensor parallelism: the devices of this stage, in rank order (device is the first); every
  // byte figure below is one rank's. Empty without it.
  std::vector<int32_t> ranks;
  std::vector<std::string> rank_names;  // each of those devices' names
  int32_t first_layer = -1;  // inclusive range of decoder layers; both -1 when it holds none
  int32_t last_layer = -1;
  bool embeddings = false;           // model.embed_tokens
  bool head = false;                 // model.norm and lm_head
  bool tied_embedding_copy = false;  // holds a copy of the embeddings for a tied lm_head
  uint64_t weight_bytes = 0;
  uint64_t allowed_bytes = 0;
  uint64_t weight_budget_bytes = 0;
  uint64_t kv_bytes = 0;           // 0 when it holds no layer
  int64_t kv_capacity_tokens = 0;  // tokens of KV for all its layers; 0 when it holds none

  int32_t num_layers() const { return first_layer < 0 ? 0 : last_layer - first_layer + 1; }
};

struct PlacementPlan {
  DeviceMapStrategy strategy = DeviceMapStrategy::kAuto;  // as requested
  int32_t tensor_parallel_size = 1;  // ranks per stage (each `devices` entry a stage of them)
  std::vector<DevicePlacement> devices;                   // every device, in pipeline order
  uint64_t weight_bytes = 0;       // over all devices and ranks (a tied copy counted twice)
  int64_t kv_capacity_tokens = 0;  // the smallest over the devices that hold layers

  // The device holding decoder layer `layer` (embeddings: layer 0; head: the last layer), or -1
  // for a layer the model does not have.
  int32_t device_of_layer(int32_t layer) const;
};

// The plan, or INVALID_ARGUMENT for bad input (no devices, no layers, a max_memory or
// device_map entry naming a device not in `devices`, an explicit map that misses a module or
// breaks the pipeline order) and RESOURCE_EXHAUSTED when the weights do not fit (the message
// lists each device's need and allowance and the options that change them).
absl::StatusOr<PlacementPlan> plan_placement(const ModelFootprint& model,
                                             const std::vector<DeviceInfo>& devices,
                                             const PlacementOptions& options);

}  // namespace tessera
