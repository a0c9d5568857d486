// Decode steps run as recorded graphs (Backend::run_graph): which steps qualify, the key a step
// runs under, and the padded batch the recording of that key reads.
//
// A key is (decode bucket, context class): the batch's sequences padded up to the bucket (the
// token buckets of runtime/tuning/token_buckets.h, so that a graph's GEMMs are the shapes tuned),
// and its longest context rounded up to a power of two (the attention's split-KV plan and the
// block-table width are recorded for that many keys). Padding sequences decode one token at
// position 0 over block 0, and their K/V are not written (slot -1): their rows compute nothing
// anyone reads.
#pragma once

#include <cstdint>

#include "runtime/backend/step_batch.h"
#include "runtime/tuning/token_buckets.h"

namespace tessera {

// The smallest context class: short contexts share one recording.
inline constexpr int32_t kMinGraphContext = 512;

// Whether `batch` is decode only: one new token per sequence, every one sampled (logits_rows are
// 0..n-1).
bool is_decode_step(const StepBatch& batch);

// The longest context of `batch` rounded up to a power of two, at least kMinGraphContext.
int32_t graph_context_class(const StepBatch& batch);

// `batch` (decode only, at most `bucket` sequences) padded to `bucket` sequences, with block
// tables `ceil(max_context / block_size)` wide, into `out` (its vectors' capacity reused).
void pad_decode_step(const StepBatch& batch, int32_t bucket, int32_t max_context,
                     int32_t block_size, StepBatch* out);

// The run_graph key of (bucket, max_context) on pipeline stage `stage` of model `model` (a number
// unique to each loaded model: a backend may outlive a model, or hold several, and a recording
// points at one model's weights).
uint64_t graph_key(uint32_t model, size_t stage, int32_t bucket, int32_t max_context);

}  // namespace tessera
