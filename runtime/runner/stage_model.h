// What a model family gives the StepRunner: the math of one pipeline stage's layers, over
// weights it has placed on each stage's backend. Everything about how a step runs -- padding to
// buckets, decode graphs, the stages and the hops between them, micro-batches, where tokens are
// sampled -- is the runner's; a family says only what to compute, top to bottom.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/backend.h"
#include "runtime/backend/layer_segment.h"
#include "runtime/kv_cache/kv_cache.h"

namespace tessera {

// The rows of one pass inside a stage's activations (a pass is a whole step, one micro-batch of
// it, or a padded graph step).
struct PassRows {
  int64_t first = 0;  // its first row
  int64_t count = 0;  // its rows
  int64_t gemm = 0;   // rows its GEMMs run over: count padded to the buckets (>= count); the
                      // padding rows compute nothing anyone reads
  Tensor of(const Tensor& t) const { return t.rows(first, count); }
  Tensor gemm_of(const Tensor& t) const { return t.rows(first, gemm); }
};

// One stage's share of one pass, on one of its tensor-parallel ranks (each rank runs its own pass,
// concurrently with the others, on segment.rank_backend(rank)).
struct StagePass {
  int32_t stage = 0;
  int32_t rank = 0;
  const LayerSegment& segment;  // its backends and layers
  bool first_stage = false;     // embeds the tokens
  bool last_stage = false;      // runs the final norm and lm_head
  const KvCache& cache;
  PassRows tokens;
  PassRows logits;   // last stage: the rows lm_head runs for (count 0: none this pass)
  Tensor residual;   // [rows, hidden] the rank's residual stream, all rows (the pass's are
                     // tokens.of(residual)); the same rank of a later stage receives it complete
  Tensor logit_out;  // last stage, rank 0: [logit rows, vocab] fp32, all rows (empty elsewhere)
};

class StageModel {
 public:
  virtual ~StageModel() = default;
  virtual int32_t num_layers() const = 0;
  virtual int64_t hidden_size() const = 0;  // the residual stream's width
  virtual int64_t vocab_size() const = 0;
  // Allocates the family's activations for stage `stage` (on each of `segment`'s ranks): `rows`
  // token rows, and on the last stage `logit_rows` rows of lm_head input.
  virtual absl::Status allocate_activations(int32_t stage, const LayerSegment& segment, int64_t rows,
                                            int64_t logit_rows, bool last) = 0;
  // Queues the stage's work for one pass on its rank's backend, after the runner made the pass's
  // batch current there (Backend::begin_step) and, past the first stage, brought the residual
  // stream over. Called for every rank of a stage concurrently, each from its own thread.
  virtual void run_stage(const StagePass& pass) = 0;
};

}  // namespace tessera
