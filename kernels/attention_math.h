// Score arithmetic the fast attention kernels share (attention_prefill.cu, attention_decode.cu):
// logit soft-capping (Gemma 2) in the kernels' unscaled score units, and the first key a query
// sees under a sliding window. Device code for both vendors.
#pragma once

#include "kernels/gpu.h"

namespace tessera::gpu {

// The soft-cap of raw scores s = q.k, in the same units: the kernels scale by scale * log2(e)
// afterwards, and softcap * tanh(scale * s / softcap) / scale is what that scaling must see.
// Made once per launch from (scale, softcap); softcap <= 0 means no capping (on = false).
struct SoftCapArgs {
  bool on = false;
  float cap = 0.0f;   // softcap / scale
  float k2 = 0.0f;    // 2 log2(e) scale / softcap: exp(2 x) = exp2(k2 s) for x = scale s / softcap
};

inline SoftCapArgs make_soft_cap(float scale, float softcap) {
  SoftCapArgs a;
  if (softcap > 0.0f && scale > 0.0f) {
    a.on = true;
    a.cap = softcap / scale;
    a.k2 = 2.0f * 1.4426950408889634f * scale / softcap;
  }
  return a;
}

// cap * tanh(s / cap) as cap * (1 - 2 / (exp(2x) + 1)): an absolute error of a few 1e-7 of the cap
// across the whole range, where tanh.approx's relative 2^-11 near +-1 would move a capped score
// by ~0.02 logits (softmax sees absolute errors of its inputs). The exponent is clamped at 64
// (tanh is 1 - 1e-19 there) so that the fast division never sees infinity; exp2 underflowing to 0
// gives exactly -cap.
__device__ __forceinline__ float soft_cap_score(float s, const SoftCapArgs& a) {
  return a.cap - 2.0f * a.cap * __fdividef(1.0f, exp2f(fminf(a.k2 * s, 64.0f)) + 1.0f);
}

// The first key position a query at position `pos` sees: keys in (pos - window, pos]; window <= 0
// is no window.
__device__ __forceinline__ int window_first_key(int pos, int window) {
  return window > 0 ? max(0, pos - window + 1) : 0;
}

}  // namespace tessera::gpu
