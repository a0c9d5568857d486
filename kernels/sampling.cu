// Device sampling: one CTA per logit row, the math of runtime/sampling_math.h. Every pass streams
// the fp32 row (it stays in L2 across passes):
//   1. max and argmax (greedy stops here);
//   2. top-k: the k-th largest logit key by radix select (4 digit passes of 8 bits, count
//      histograms);
//   3. the mass left after top-k and min-p (integer masses, a block reduction);
//   4. top-p: the largest logit key whose kept mass reaches the target, by the same radix select
//      with mass histograms;
//   5. the draw: each warp sums its contiguous slice of the row, the slice holding the draw point
//      is found from those sums, and its warp scans it in order to the token.
// Masses are 64-bit integers (sampling_mass), so every sum is exact whatever the order of the
// atomics and reductions: the result is deterministic and equals the CPU reference's except
// where exp() differs in the last bit right at a boundary.
#define TESSERA_GPU_KERNELS_ONLY
#include "kernels/gpu_ops.h"
#include "runtime/sampling_math.h"

namespace tessera::gpu {

namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kDigitBits = 8;
constexpr int kBins = 1 << kDigitBits;
constexpr int kBinsPerLane = kBins / kWarpSize;
static_assert(kBins % kWarpSize == 0, "each lane of the bin search owns whole bins");

struct SampleShared {
  unsigned long long hist[kWarps][kBins];  // one histogram per warp: fewer colliding atomics
  unsigned long long warp_mass[kWarps];
  float warp_max[kWarps];
  int32_t warp_argmax[kWarps];
  uint32_t bin;               // the bin search's answer
  unsigned long long above;   // mass above the chosen bin
};

__device__ __forceinline__ uint64_t shfl_xor_u64(uint64_t v, int lane_mask) {
  const uint32_t lo = shfl_xor(static_cast<uint32_t>(v), lane_mask);
  const uint32_t hi = shfl_xor(static_cast<uint32_t>(v >> 32), lane_mask);
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

__device__ __forceinline__ uint64_t warp_sum(uint64_t v) {
  for (int m = kWarpSize / 2; m > 0; m >>= 1) v += shfl_xor_u64(v, m);
  return v;
}

__device__ uint64_t block_sum(uint64_t v, SampleShared& sh) {
  v = warp_sum(v);
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  if (lane == 0) sh.warp_mass[warp] = v;
  __syncthreads();
  uint64_t total = 0;
  for (int w = 0; w < kWarps; ++w) total += sh.warp_mass[w];
  __syncthreads();
  return total;
}

// The largest logit and its lowest index; every thread gets them.
__device__ void block_argmax(const float* row, int64_t vocab, SampleShared& sh, float& max_out,
                             int32_t& arg_out) {
  float best = -INFINITY;
  int32_t arg = -1;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = row[i];
    if (arg < 0 || v > best) {
      best = v;
      arg = static_cast<int32_t>(i);
    }
  }
  for (int m = kWarpSize / 2; m > 0; m >>= 1) {
    const float ov = shfl_xor(best, m);
    const int32_t oa = shfl_xor(arg, m);
    if (oa >= 0 && (arg < 0 || ov > best || (ov == best && oa < arg))) {
      best = ov;
      arg = oa;
    }
  }
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  if (lane == 0) {
    sh.warp_max[warp] = best;
    sh.warp_argmax[warp] = arg;
  }
  __syncthreads();
  best = -INFINITY;
  arg = -1;
  for (int w = 0; w < kWarps; ++w) {  // warps interleave indices: ties go to the lower index
    const int32_t a = sh.warp_argmax[w];
    const float v = sh.warp_max[w];
    if (a >= 0 && (arg < 0 || v > best || (v == best && a < arg))) {
      best = v;
      arg = a;
    }
  }
  __syncthreads();
  max_out = best;
  arg_out = arg;
}

// Radix select over the row's logit keys: the largest key K such that the weight of the elements
// with key >= K reaches `target` (1 <= target <= the total weight). weight(i, logit, key) is
// 0 for elements that do not take part. Top-k: weight 1, target k; top-p: mass, target mass.
template <typename Weight>
__device__ uint32_t select_key(const float* row, int64_t vocab, uint64_t target, Weight weight,
                               SampleShared& sh) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  uint32_t prefix = 0, mask = 0;
  uint64_t above = 0;  // weight of the elements whose key is above the current prefix's range
  for (int shift = 32 - kDigitBits; shift >= 0; shift -= kDigitBits) {
    unsigned long long* flat = &sh.hist[0][0];
    for (int j = threadIdx.x; j < kWarps * kBins; j += kThreads) flat[j] = 0;
    __syncthreads();
    unsigned long long* mine = sh.hist[warp];
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float logit = row[i];
      const uint32_t key = sampling_logit_key(logit);
      if ((key & mask) != prefix) continue;
      const uint64_t w = weight(i, logit, key);
      if (w != 0) atomicAdd(&mine[(key >> shift) & (kBins - 1)], static_cast<unsigned long long>(w));
    }
    __syncthreads();
    for (int b = threadIdx.x; b < kBins; b += kThreads) {
      unsigned long long s = 0;
      for (int w = 0; w < kWarps; ++w) s += sh.hist[w][b];
      sh.hist[0][b] = s;  // each thread owns its column: no race
    }
    __syncthreads();
    if (warp == 0) {
      // Lane l owns bins [l * kBinsPerLane, (l + 1) * kBinsPerLane); the answer is the highest
      // bin b with above + weight(bins >= b) >= target.
      const unsigned long long* hist = sh.hist[0];
      uint64_t own = 0;
      for (int j = 0; j < kBinsPerLane; ++j) own += hist[lane * kBinsPerLane + j];
      uint64_t from_here = own, group = own;  // inclusive suffix sum over lanes >= this one
      for (int m = 1; m < kWarpSize; m <<= 1) {
        const uint64_t other = shfl_xor_u64(group, m);
        if ((lane & m) == 0) from_here += other;
        group += other;
      }
      const uint64_t before = above + (from_here - own);
      if (before < target && above + from_here >= target) {
        uint64_t acc = before;
        for (int j = kBinsPerLane - 1; j >= 0; --j) {
          const int b = lane * kBinsPerLane + j;
          if (acc + hist[b] >= target) {
            sh.bin = static_cast<uint32_t>(b);
            sh.above = acc;
            break;
          }
          acc += hist[b];
        }
      }
    }
    __syncthreads();
    prefix |= sh.bin << shift;
    mask |= static_cast<uint32_t>(kBins - 1) << shift;
    above = sh.above;
  }
  return prefix;
}

struct LaunchRows {
  SampleRow row[kSampleRowsPerLaunch];  // by value: no upload, no buffer to keep alive
};

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* logits, int64_t vocab,
                                                          LaunchRows rows, int32_t* tokens) {
  __shared__ SampleShared sh;
  const SampleRow p = rows.row[blockIdx.x];
  const float* row = logits + blockIdx.x * vocab;
  float max_logit;
  int32_t argmax;
  block_argmax(row, vocab, sh, max_logit, argmax);
  if (!(p.temperature > 0.0f)) {
    if (threadIdx.x == 0) tokens[blockIdx.x] = argmax;
    return;
  }

  uint32_t kth_key = 0;
  if (p.top_k > 0 && p.top_k < vocab) {
    kth_key = select_key(row, vocab, static_cast<uint64_t>(p.top_k),
                         [](int64_t, float, uint32_t) -> uint64_t { return 1; }, sh);
  }
  // An element's mass after top-k and min-p (0 when filtered out).
  auto mass = [&](float logit, uint32_t key) -> uint64_t {
    if (key < kth_key) return 0;
    const float w = sampling_weight(logit, max_logit, p.temperature);
    if (p.min_p > 0.0f && w < p.min_p) return 0;
    return sampling_mass(w);
  };
  uint64_t left = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    left += mass(row[i], sampling_logit_key(row[i]));
  }
  left = block_sum(left, sh);

  uint32_t tau_key = kth_key;
  if (p.top_p < 1.0f) {
    tau_key = select_key(row, vocab, sampling_top_p_target(p.top_p, left),
                         [&](int64_t, float logit, uint32_t key) { return mass(logit, key); }, sh);
  }
  auto kept = [&](int64_t i) -> uint64_t {
    if (i >= vocab) return 0;
    const float logit = row[i];
    const uint32_t key = sampling_logit_key(logit);
    return key < tau_key ? 0 : mass(logit, key);
  };

  // The draw: warp w owns the contiguous slice [w * slice, (w + 1) * slice), read lane-strided.
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  const int64_t slice = (vocab + kWarps - 1) / kWarps;
  const int64_t begin = warp * slice, end = begin + slice;
  uint64_t own = 0;
  for (int64_t i = begin + lane; i < end; i += kWarpSize) own += kept(i);
  own = warp_sum(own);
  if (lane == 0) sh.warp_mass[warp] = own;
  __syncthreads();
  uint64_t kept_mass = 0;
  for (int w = 0; w < kWarps; ++w) kept_mass += sh.warp_mass[w];
  const uint64_t point = sampling_draw_point(p.draw_bits, kept_mass);
  // The warp whose slice holds the point (the most likely token has mass 2^40 > 0, so
  // kept_mass > point and one does).
  uint64_t acc = 0;
  int chosen_warp = 0;
  for (int w = 0; w < kWarps; ++w) {
    if (acc + sh.warp_mass[w] > point) {
      chosen_warp = w;
      break;
    }
    acc += sh.warp_mass[w];
  }
  if (warp != chosen_warp) return;
  for (int64_t base = begin; base < end; base += kWarpSize) {
    const uint64_t q = base + lane < end ? kept(base + lane) : 0;
    uint64_t upto = q, group = q;  // inclusive prefix sum over lanes <= this one
    for (int m = 1; m < kWarpSize; m <<= 1) {
      const uint64_t other = shfl_xor_u64(group, m);
      if ((lane & m) != 0) upto += other;
      group += other;
    }
    if (acc + group > point) {
      if (q > 0 && acc + upto > point && acc + upto - q <= point) {
        tokens[blockIdx.x] = static_cast<int32_t>(base + lane);
      }
      return;
    }
    acc += group;
  }
}

}  // namespace

gpuError_t sample(const float* logits, int64_t vocab, const SampleRow* rows, int32_t n_rows,
                  int32_t* tokens, gpuStream_t stream) {
  for (int32_t done = 0; done < n_rows; done += kSampleRowsPerLaunch) {
    const int32_t count = n_rows - done < kSampleRowsPerLaunch ? n_rows - done : kSampleRowsPerLaunch;
    LaunchRows launch{};
    for (int32_t r = 0; r < count; ++r) launch.row[r] = rows[done + r];
    sample_kernel<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(
        logits + static_cast<int64_t>(done) * vocab, vocab, launch, tokens + done);
    if (const gpuError_t err = gpuGetLastError(); err != gpuSuccess) return err;
  }
  return gpuSuccess;
}

}  // namespace tessera::gpu
