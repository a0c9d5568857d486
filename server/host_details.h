// What GetModelInfo and ListModels tell a caller that did not present the admin token. The
// answer is the model and its serving limits; what describes the host is left out: each
// placement entry's device name (a GPU or CPU model) and the memory the plan allowed it (the
// device's free memory, or max_memory). Everything else is the model's (shapes, weight bytes)
// or a capacity every client may plan with (KV blocks, max_num_seqs). The path is the model
// path as the operator gave it (config or flag value), never a resolved one.
#pragma once

#include "tessera/v1/tessera.pb.h"

namespace tessera::server {

// `info` with the host details cleared (proto3 defaults: "" and 0).
tessera::v1::ModelInfo without_host_details(tessera::v1::ModelInfo info);

}  // namespace tessera::server
