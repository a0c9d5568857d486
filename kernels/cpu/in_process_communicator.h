// The tensor-parallel collectives of CPU ranks in one process (runtime/backend/communicator.h):
// what makes every tensor-parallel path of the runner and the families run without GPUs. The
// ranks' threads meet at barriers and read one another's buffers directly; each element of an
// all-reduce is summed once, in rank order, and written to every rank, so all ranks hold the
// same bits.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/backend.h"

namespace tessera {

// One communicator per rank of a group of `size` CPU ranks (fp32 tensors).
std::vector<std::unique_ptr<Communicator>> make_in_process_communicators(int32_t size);

}  // namespace tessera
