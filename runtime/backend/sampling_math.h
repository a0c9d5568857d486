// The one definition of how a row of logits becomes a token, shared by the host Sampler, the CPU
// backend's sample op (the reference below) and the GPU kernel (kernels/sampling.cu), so that a
// seeded request gets the same tokens whichever of them runs:
//
//   temperature <= 0: argmax, the lowest index among equal maxima.
//   Otherwise, with w_i = exp((logit_i - max_logit) / temperature) in fp32 (w_max = 1):
//   1. top-k (0 < k < vocab): keep logit_i >= the k-th largest logit (ties at it are all kept);
//   2. min-p (> 0): keep w_i >= min_p, i.e. p_i >= min_p * p_max;
//   3. top-p (< 1): of what is left, keep logit_i >= tau for the largest tau whose kept mass
//      sum(w_j : logit_j >= tau) reaches top_p times the mass left (a threshold, so ties at it
//      are all kept and the result does not depend on an order among equals);
//   4. draw: u from (seed, counter); the first kept token, in index order, whose cumulative mass
//      exceeds u times the kept mass.
//
// Masses are integers: w quantized to multiples of 2^-40 (truncated). Integer sums are exact in
// any order, so a parallel reduction and a serial loop reach the same thresholds and the same
// cumulative masses; the only remaining difference between implementations is the last bit of
// exp() (CPU libm vs the device's expf), which moves a decision only when it lies within about
// 1e-7 of its boundary. Tokens whose w is below 2^-40 carry no mass and are never drawn.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
// The GPU kernels build as C++17 (no <span>) and need only the scalar steps.
#if !defined(TESSERA_GPU_KERNELS_ONLY)
#include <span>
#include <utility>
#include <vector>
#endif

// The scalar steps below also compile into the GPU kernel (nvcc / hipcc device code).
#if defined(__CUDACC__) || defined(__HIPCC__)
#define TESSERA_HOST_DEVICE __host__ __device__
#else
#define TESSERA_HOST_DEVICE
#endif

namespace tessera {

// One row's sampling parameters, as the backends' sample op takes them.
struct SamplingRow {
  float temperature = 1.0f;  // <= 0: greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // (0, 1]; 1 = off
  float min_p = 0.0f;        // [0, 1]; 0 = off
  uint64_t seed = 0;
  uint64_t counter = 0;      // which draw of the seed's stream: the sequence's output index
};

inline constexpr int kSamplingDrawBits = 24;   // u = bits / 2^24, exact in fp32
inline constexpr int kSamplingMassBits = 40;   // masses in units of 2^-40 of w_max
// Masses of a whole row must fit in 63 bits: vocab * 2^40 < 2^63.
inline constexpr int64_t kMaxSamplingVocab = int64_t{1} << 23;

// Maps a float to an unsigned key with the same order (negative values below positive ones), so
// that thresholds on logits can be found digit by digit. -0 and +0 share a key: they are equal
// logits, and ties at a threshold are kept.
TESSERA_HOST_DEVICE inline uint32_t sampling_logit_key(float logit) {
  uint32_t bits;
  std::memcpy(&bits, &logit, sizeof bits);
  if (bits == 0x80000000u) bits = 0;
  return (bits & 0x80000000u) != 0 ? ~bits : bits | 0x80000000u;
}

TESSERA_HOST_DEVICE inline float sampling_weight(float logit, float max_logit, float temperature) {
  return expf((logit - max_logit) / temperature);
}

// w in units of 2^-40, truncated (w * 2^40 is exact in fp32: a power-of-two scale).
TESSERA_HOST_DEVICE inline uint64_t sampling_mass(float weight) {
  return static_cast<uint64_t>(weight * static_cast<float>(uint64_t{1} << kSamplingMassBits));
}

// The mass top-p must reach: ceil(top_p * total), at least 1 (top_p near 0 keeps the most
// likely logit's tokens) and at most total.
TESSERA_HOST_DEVICE inline uint64_t sampling_top_p_target(float top_p, uint64_t total) {
  const double want = ceil(static_cast<double>(top_p) * static_cast<double>(total));
  if (!(want >= 1.0)) return 1;
  if (want >= static_cast<double>(total)) return total;
  return static_cast<uint64_t>(want);
}

// floor(bits * mass / 2^24) without overflow (mass < 2^63, bits < 2^24): the point of the kept
// mass that the draw lands on.
TESSERA_HOST_DEVICE inline uint64_t sampling_draw_point(uint32_t bits, uint64_t mass) {
  const uint64_t hi = mass >> kSamplingDrawBits, lo = mass & ((1u << kSamplingDrawBits) - 1);
  return bits * hi + ((bits * lo) >> kSamplingDrawBits);
}

#if !defined(TESSERA_GPU_KERNELS_ONLY)
// log(sum(exp(x[i]))) over x[0 .. n), stably (the largest subtracted first, the sum in double):
// the normalizer of a row's log-probabilities (logprobs, perplexity). -inf for n = 0.
double log_sum_exp(const float* x, size_t n);

// The draw's 24 uniform bits: output `counter` of a SplitMix64 stream seeded by mix(seed). The
// host computes them for every path (the GPU backend passes them to its kernel).
uint32_t sampling_draw_bits(uint64_t seed, uint64_t counter);
// u in [0, 1): the draw as a number (for tests and documentation; the math uses the bits).
inline double sampling_uniform(uint64_t seed, uint64_t counter) {
  return sampling_draw_bits(seed, counter) * (1.0 / (1u << kSamplingDrawBits));
}

// The reference's answer, and how close it came to another one.
struct SamplingOutcome {
  int32_t token = -1;
  // The smallest distance of any fp32-dependent decision from its boundary, relative to its
  // scale: min-p (|w - min_p| / min_p), top-p (kept mass vs target, / the mass left) and the
  // draw (draw point vs the chosen token's cumulative range, / the kept mass). Infinity when no
  // such decision was made (greedy). An implementation whose exp() differs in the last bit may
  // pick another token only when this is below ~1e-6.
  double margin = 0.0;
};

// Scratch space for sample_reference, reused across calls to avoid allocating per token.
struct SamplingScratch {
  std::vector<uint32_t> keys;                              // [vocab] logit keys
  std::vector<uint32_t> selected;                          // top-k's partially ordered copy
  std::vector<uint64_t> mass;                              // [vocab] 0 once filtered out
  std::vector<std::pair<uint32_t, uint64_t>> candidates;   // top-p's (key, mass), sorted
};

// The reference: samples one row of `logits` [vocab] (1 <= vocab <= kMaxSamplingVocab) by `row`.
SamplingOutcome sample_reference(std::span<const float> logits, const SamplingRow& row,
                                 SamplingScratch& scratch);
#endif  // !TESSERA_GPU_KERNELS_ONLY

}  // namespace tessera
