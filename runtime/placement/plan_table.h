// A placement plan as a text table for logs and the CLI: per device its layers, the modules
// that travel with them, weight bytes, allowed bytes, KV cache bytes and KV capacity in tokens,
// then a summary line.
#pragma once

#include <string>

#include "runtime/placement/placement_planner.h"

namespace tessera {

// Lines end in '\n'; columns are padded to their widest cell. Example:
//   device  name  layers  modules         weights   allowed  kv cache  kv tokens
//   0       H100  0-15    embed_tokens   17.0 GiB  80.0 GiB  63.0 GiB      64512
//   1       H100  16-31   norm, lm_head  17.0 GiB  80.0 GiB  63.0 GiB      64511
//   device_map=balanced: weights 34.0 GiB on 2 of 2 devices, KV capacity 64511 tokens
// A device without layers shows "-" for layers, modules, kv cache and kv tokens.
std::string format_plan_table(const PlacementPlan& plan);

}  // namespace tessera
