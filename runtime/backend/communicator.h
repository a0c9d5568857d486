// The collectives of a tensor-parallel group (runtime/model splits each layer over its ranks).
// One Communicator per rank, bound to that rank's backend: an op joins the backend's queue (its
// stream on a GPU), running after the work queued there so far and before any queued afterwards,
// and may be recorded into the backend's decode graphs. Every rank of a group calls the same ops
// in the same order with the same shapes, each from its own thread: the ranks of a group are
// driven concurrently (a rank's op may wait for the others'; on the CPU backend it does).
//
// Part of the backend seam (runtime/backend.h includes it). Implementations: InProcessCommunicator (kernels/cpu/, CPU ranks of one process), and on the
// GPU NCCL / RCCL with a one-shot peer-memory all-reduce for small messages
// (kernels/gpu_communicator.*). runtime/backend_factory creates a group for a set of backends.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "runtime/backend/norm_spec.h"
#include "runtime/backend/tensor.h"

namespace tessera {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int32_t rank() const = 0;
  virtual int32_t size() const = 0;
  // What carries the collectives ("in-process", "nccl", "nccl + one-shot up to 512 KiB"), for the
  // start-up log and GetModelInfo.
  virtual std::string describe() const = 0;

  // x = the sum over every rank of its x, in place, on every rank. x is contiguous, in the
  // backend's compute dtype or fp32. Every rank's result is the same, bit for bit.
  virtual void all_reduce_sum(const Tensor& x) = 0;

  // residual += the sum over every rank of x; out = rms_norm(residual) * w -- all_reduce_sum(x)
  // and then the backend's add_rms_norm(residual, x, w, norm, out) -- as one op, where this
  // implementation fuses them for these tensors: true when queued (x is left as it was). False,
  // doing nothing, where it does not; the caller then makes those two calls. Every rank of the
  // group must give the same answer: it depends on the tensors' shapes and dtypes only. x,
  // residual and out [rows, cols] in the compute dtype, contiguous; w [cols].
  virtual bool all_reduce_add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& w,
                                       NormSpec norm, const Tensor& out) = 0;

  // Rank 0's `full` [rows, full_cols] receives every rank's `part` [rows, part_cols] as its
  // columns [r * part_cols, (r + 1) * part_cols), clipped to full_cols (the last rank's part may
  // be padding past the end). fp32, contiguous. On the other ranks `full` is not touched (it may
  // be an empty tensor).
  virtual void gather_columns(const Tensor& part, const Tensor& full) = 0;

  // The first error any op met since the last call (OK when none), cleared. Ops return nothing,
  // like the backend's (Backend::record_error): a step checks once, after synchronize().
  virtual absl::Status take_error() = 0;
};

}  // namespace tessera
