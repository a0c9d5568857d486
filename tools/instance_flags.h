// The flags of the offline commands that load a model in-process (`tessera run`, `tessera
// perplexity`): backend, devices, placement, tensor parallelism, micro-batches, decode graphs and
// threads, read into the composition root's InstanceOptions as tesserad's keys would set them.
#pragma once

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/model_instance.h"
#include "tools/cli_args.h"

namespace tessera::cli {

// The value flags instance_options() reads.
const std::set<std::string>& instance_flags();
// Their lines for a command's usage text.
extern const char kInstanceFlagsUsage[];
// InstanceOptions from `args` (the rest at their defaults); errors name the flag.
absl::StatusOr<InstanceOptions> instance_options(const Args& args);

}  // namespace tessera::cli
