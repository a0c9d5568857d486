// Device sampling: one CTA of 1024 threads per logit row, the math of runtime/backend/sampling_math.h,
// no memory beyond the logits, the tokens and static shared memory. The passes over the fp32 row
// (the first from HBM, the rest from L2; float4 loads where the row is 16-byte aligned):
//   1. max, argmax and min (greedy stops here);
//   2. (top-k or top-p) a bucket histogram: bucket(logit) = floor((max - logit) * scale), 2048
//      buckets over [max - span, max] with span = min(max - min, 28.5 T). It is monotone in the
//      logit and ties share a bucket, so every threshold on logit keys lies in one bucket and the
//      buckets above it are wholly kept. Counts (top-k) and masses after min-p (top-p) per
//      bucket; when the span is cut at 28.5 T the last bucket holds only tokens with w < 2^-40
//      (no mass: (max - logit) / T >= 28.48 there) and takes no atomics;
//   3. top-k: the bucket holding the k-th largest logit, from the counts; that bucket's keys
//      (and indices) are collected into shared memory and the exact k-th key found there by
//      radix select over the bits in which the bucket's keys differ (a bucket of one key, i.e.
//      ties, needs none);
//   4. top-p: the same with masses (the top-k bucket counting only its kept part); the collected
//      bucket is reused when it is the same one;
//   5. the draw: per warp slice (a contiguous 1/kWarps of the row) the
//      kept mass, then the whole block scans the slice holding the draw point, in index order, to
//      the token. The collect pass of the bucket that holds the final threshold already sums each
//      slice's mass above that bucket and keeps the bucket's tokens, so then the draw reads only
//      the one slice; otherwise (no top-k/top-p) it is a pass of its own.
// A bucket of more distinct keys than shared memory holds falls back to selecting over the row
// (restricted to the bucket) and a separate draw pass: slower, the same answer. Masses are 64-bit
// integers (sampling_mass), accumulated exactly (32-bit shared atomics that carry into a high
// word), so every sum is exact whatever the order: the result is deterministic and equals the CPU
// reference's except where exp() differs in the last bit right at a boundary.
#define TESSERA_GPU_KERNELS_ONLY
#include "kernels/gpu_ops.h"
#include "kernels/launch.h"
#include "runtime/backend.h"

namespace tessera::gpu {

namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / kWarpSize;
constexpr int kBuckets = 2048;
constexpr int kDigitBits = 8;
constexpr int kDigitBins = 1 << kDigitBits;
constexpr int kCollect = 2560;        // keys of one bucket that shared memory holds
constexpr float kSpanCutoff = 28.5f;  // (max - logit) / T beyond this: w < 2^-40, no mass
static_assert(kDigitBins <= kThreads, "find_crossing gives each thread at most one digit bin");

struct SampleShared {
  uint32_t bucket_count[kBuckets];
  uint32_t bucket_lo[kBuckets];  // masses: low words; high words take the carries
  uint32_t bucket_hi[kBuckets];
  uint32_t digit_lo[kDigitBins];
  uint32_t digit_hi[kDigitBins];
  uint32_t keys[kCollect];  // one bucket's keys and their indices (collect and select)
  uint32_t index[kCollect];
  unsigned long long slice_below[kWarps];  // per draw slice: kept mass above the bucket
  uint32_t slice_count[kWarps];            // per draw slice: the bucket's tokens
  uint32_t slice_lo[kWarps], slice_hi[kWarps];
  unsigned long long warp_part[kWarps];
  float warp_max[kWarps];
  float warp_min[kWarps];
  int32_t warp_arg[kWarps];
  uint32_t warp_base[kWarps];
  uint32_t n_collect;
  uint32_t kmin, kmax;
  int32_t cross_index;
  unsigned long long cross_before;
  int32_t chosen_slice;
};
static_assert(sizeof(SampleShared) <= 48 * 1024, "static shared memory");

// v added exactly to the 64-bit value held as (hi, lo): the low word's atomic reports whether it
// wrapped, and the carry goes to the high word with v's own high bits.
__device__ __forceinline__ void add_split(uint32_t* lo, uint32_t* hi, uint64_t v) {
  const uint32_t vlo = static_cast<uint32_t>(v);
  uint32_t vhi = static_cast<uint32_t>(v >> 32);
  if (vlo != 0) {
    const uint32_t old = atomicAdd(lo, vlo);
    vhi += old + vlo < old ? 1u : 0u;
  }
  if (vhi != 0) atomicAdd(hi, vhi);
}
__device__ __forceinline__ uint64_t read_split(const uint32_t* lo, const uint32_t* hi, int i) {
  return (static_cast<uint64_t>(hi[i]) << 32) | lo[i];
}

__device__ __forceinline__ uint64_t shfl_xor_u64(uint64_t v, int lane_mask) {
  const uint32_t lo = shfl_xor(static_cast<uint32_t>(v), lane_mask);
  const uint32_t hi = shfl_xor(static_cast<uint32_t>(v >> 32), lane_mask);
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// The exclusive prefix sum of v over the block's threads in order; `total` gets the whole sum.
__device__ uint64_t block_exclusive_scan(uint64_t v, uint64_t& total, SampleShared& sh) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
  uint64_t upto = v, group = v;  // inclusive prefix over lanes <= this one; the warp's sum
  for (int m = 1; m < kWarpSize; m <<= 1) {
    const uint64_t other = shfl_xor_u64(group, m);
    if ((lane & m) != 0) upto += other;
    group += other;
  }
  if (lane == 0) sh.warp_part[warp] = group;
  __syncthreads();
  uint64_t before = 0, all = 0;
  for (int w = 0; w < kWarps; ++w) {
    const uint64_t s = sh.warp_part[w];
    if (w < warp) before += s;
    all += s;
  }
  __syncthreads();
  total = all;
  return before + upto - v;
}

// Over ranks 0..n-1 with weights get(r) (rank 0 first): the rank r where the running sum first
// reaches target (1 <= target), and the sum of the ranks before it. Returns false (index -1)
// when the whole sum stays below target.
struct Crossing {
  int32_t index;
  uint64_t before;
  uint64_t total;
};
template <typename Get>
__device__ Crossing find_crossing(int32_t n, Get get, uint64_t target, SampleShared& sh) {
  const int32_t per = (n + kThreads - 1) / kThreads;
  const int32_t lo = threadIdx.x * per, hi = lo + per < n ? lo + per : n;
  uint64_t own = 0;
  for (int32_t r = lo; r < hi; ++r) own += get(r);
  if (threadIdx.x == 0) sh.cross_index = -1;
  uint64_t total;
  const uint64_t excl = block_exclusive_scan(own, total, sh);  // its barriers order the init
  if (excl < target && target <= excl + own) {
    uint64_t acc = excl;
    for (int32_t r = lo; r < hi; ++r) {
      const uint64_t w = get(r);
      if (acc + w >= target) {
        sh.cross_index = r;
        sh.cross_before = acc;
        break;
      }
      acc += w;
    }
  }
  __syncthreads();
  const Crossing c{sh.cross_index, sh.cross_before, total};
  __syncthreads();
  return c;
}

__device__ __forceinline__ float key_logit(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) != 0 ? key & 0x7fffffffu : ~key);
}

// One row: its values in groups of four (float4 loads when the row is 16-byte aligned).
struct RowView {
  const float* data;
  int32_t vocab;
  int32_t groups;
  bool aligned;
  // Group g's values; out-of-row slots are -inf and must be masked with valid().
  __device__ __forceinline__ void load(int32_t g, float v[4]) const {
    const int32_t i = 4 * g;
    if (aligned && i + 3 < vocab) {
      const float4 q = reinterpret_cast<const float4*>(data)[g];
      v[0] = q.x;
      v[1] = q.y;
      v[2] = q.z;
      v[3] = q.w;
    } else {
      for (int c = 0; c < 4; ++c) v[c] = i + c < vocab ? data[i + c] : -INFINITY;
    }
  }
  __device__ __forceinline__ bool valid(int32_t g, int c) const { return 4 * g + c < vocab; }
};

struct LaunchRows {
  SampleRow row[kSampleRowsPerLaunch];  // by value: no upload, no buffer to keep alive
};

// One row's sampling on one CTA: the state the phases share, and one device function per phase
// (sample_kernel below runs them in order). Every thread of the CTA holds the same copy; the
// shared-memory scratch is `sh`.
class RowSampling {
 public:
  __device__ __forceinline__ RowSampling(SampleShared& sh, const SampleRow& p, const float* data,
                                         int64_t vocab)
      : sh_(sh), p_(p), tid_(threadIdx.x), warp_(threadIdx.x / kWarpSize),
        lane_(threadIdx.x % kWarpSize) {
    row_.data = data;
    row_.vocab = static_cast<int32_t>(vocab);
    row_.groups = (row_.vocab + 3) / 4;
    row_.aligned = (reinterpret_cast<uintptr_t>(data) & 15) == 0;
  }

  __device__ __forceinline__ int32_t argmax() const { return argmax_; }
  __device__ __forceinline__ bool greedy() const { return !(p_.temperature > 0.0f); }

  // 1. max (lowest index among equals) and min.
  __device__ __forceinline__ void find_extremes() {
    constexpr int kUnroll = 4;
    float best = -INFINITY, least = INFINITY;
    int32_t arg = -1;
    for (int32_t g0 = tid_; g0 < row_.groups; g0 += kUnroll * kThreads) {
      float v[kUnroll][4];
      for (int u = 0; u < kUnroll; ++u) {
        const int32_t g = g0 + u * kThreads;
        if (g < row_.groups) row_.load(g, v[u]);
      }
      for (int u = 0; u < kUnroll; ++u) {
        const int32_t g = g0 + u * kThreads;
        if (g >= row_.groups) break;
        for (int c = 0; c < 4; ++c) {
          if (!row_.valid(g, c)) break;
          if (arg < 0 || v[u][c] > best) {  // this thread's indices only grow
            best = v[u][c];
            arg = 4 * g + c;
          }
          least = fminf(least, v[u][c]);
        }
      }
    }
    for (int m = kWarpSize / 2; m > 0; m >>= 1) {
      const float ov = shfl_xor(best, m);
      const int32_t oa = shfl_xor(arg, m);
      least = fminf(least, shfl_xor(least, m));
      if (oa >= 0 && (arg < 0 || ov > best || (ov == best && oa < arg))) {
        best = ov;
        arg = oa;
      }
    }
    if (lane_ == 0) {
      sh_.warp_max[warp_] = best;
      sh_.warp_arg[warp_] = arg;
      sh_.warp_min[warp_] = least;
    }
    __syncthreads();
    best = -INFINITY;
    least = INFINITY;
    arg = -1;
    for (int w = 0; w < kWarps; ++w) {
      const int32_t a = sh_.warp_arg[w];
      const float v = sh_.warp_max[w];
      least = fminf(least, sh_.warp_min[w]);
      if (a >= 0 && (arg < 0 || v > best || (v == best && a < arg))) {
        best = v;
        arg = a;
      }
    }
    __syncthreads();
    max_logit_ = best;
    min_logit_ = least;
    argmax_ = arg;
  }

  // The buckets (monotone, non-increasing in the logit; ties share one) and the filters in force.
  __device__ __forceinline__ void plan() {
    temperature_ = p_.temperature;
    const float cut = kSpanCutoff * temperature_;
    const float range = max_logit_ - min_logit_;
    clamped_ = range > cut;  // the last bucket then holds only massless tokens
    const float span = clamped_ ? cut : range;
    scale_ = span > 0.0f ? fminf(static_cast<float>(kBuckets) / span, 1e30f) : 0.0f;
    topk_on_ = p_.top_k > 0 && p_.top_k < row_.vocab;
    topp_on_ = p_.top_p < 1.0f;
  }

  // Each warp's draw slice: groups [warp * per_slice, (warp + 1) * per_slice) (set after the
  // histogram, which does not need them, so that they hold no registers through it).
  __device__ __forceinline__ void assign_slices() {
    per_slice_ = (row_.groups + kWarps - 1) / kWarps;
    my_begin_ = warp_ * per_slice_;
    my_end_ = my_begin_ + per_slice_ < row_.groups ? my_begin_ + per_slice_ : row_.groups;
  }

  // 2. The bucket histogram: counts (top-k) and masses after min-p (top-p) per bucket.
  __device__ __forceinline__ void histogram() {
    if (!topk_on_ && !topp_on_) return;
    for (int j = tid_; j < kBuckets; j += kThreads) {
      sh_.bucket_count[j] = 0;
      sh_.bucket_lo[j] = 0;
      sh_.bucket_hi[j] = 0;
    }
    __syncthreads();
    constexpr int kUnroll = 2;
    for (int32_t g0 = 0; g0 < row_.groups; g0 += kUnroll * kThreads) {
      float v[kUnroll][4];
      for (int u = 0; u < kUnroll; ++u) {
        const int32_t g = g0 + u * kThreads + tid_;
        if (g < row_.groups) row_.load(g, v[u]);
      }
      for (int u = 0; u < kUnroll; ++u) {
        const int32_t g = g0 + u * kThreads + tid_;
        for (int c = 0; c < 4; ++c) {
          if (g >= row_.groups || !row_.valid(g, c)) continue;
          const int32_t b = bucket_of(v[u][c]);
          if (clamped_ && b == kBuckets - 1) continue;  // the massless tail: not needed
          if (topk_on_) atomicAdd(&sh_.bucket_count[b], 1u);
          if (topp_on_) {
            const uint64_t m = mass_of(v[u][c]);
            if (m != 0) add_split(&sh_.bucket_lo[b], &sh_.bucket_hi[b], m);
          }
        }
      }
    }
    __syncthreads();
  }

  // 3. top-k: the bucket holding the k-th largest logit, then the exact k-th key in it.
  __device__ __forceinline__ void top_k() {
    if (!topk_on_) return;
    const Crossing c = find_crossing(
        clamped_ ? kBuckets - 1 : kBuckets,
        [&](int32_t b) { return static_cast<uint64_t>(sh_.bucket_count[b]); },
        static_cast<uint64_t>(p_.top_k), sh_);
    // Not found: the k-th largest logit lies in the massless tail, so top-k removes no mass.
    if (c.index < 0) return;
    bk_ = c.index;
    collect(bk_);
    kth_key_ = select_key(static_cast<uint64_t>(p_.top_k) - c.before,
                          [](uint32_t) -> uint64_t { return 1; });
    if (!topp_on_) return;
    if (kmin_ == kmax_) {
      bk_mass_ = read_split(sh_.bucket_lo, sh_.bucket_hi, bk_);
    } else {
      uint64_t own = 0;
      for_each_key([&](uint32_t key) { own += row_mass(key); });
      uint64_t total;
      block_exclusive_scan(own, total, sh_);
      bk_mass_ = total;
    }
  }

  // 4. top-p: the same over masses (the top-k bucket counting only its kept part).
  __device__ __forceinline__ void top_p() {
    tau_key_ = kth_key_;
    if (!topp_on_) return;
    auto bucket_mass = [&](int32_t b) -> uint64_t {
      return b < bk_ ? read_split(sh_.bucket_lo, sh_.bucket_hi, b) : b == bk_ ? bk_mass_ : 0;
    };
    uint64_t own = 0;
    for (int32_t b = tid_; b < kBuckets; b += kThreads) own += bucket_mass(b);
    uint64_t total;
    block_exclusive_scan(own, total, sh_);
    const uint64_t target = sampling_top_p_target(p_.top_p, total);
    const Crossing c = find_crossing(kBuckets, bucket_mass, target, sh_);
    const int32_t bp = c.index < 0 ? 0 : c.index;  // always found: 1 <= target <= total
    if (bp != collected_) collect(bp);
    tau_key_ = select_key(target - c.before, [&](uint32_t key) { return row_mass(key); });
  }

  // 5. The draw: each slice's kept mass, the slice holding the draw point, then the token in it.
  __device__ __forceinline__ void draw(int32_t* token) {
    slice_masses();
    uint64_t kept_mass = 0;
    for (int w = 0; w < kWarps; ++w) kept_mass += sh_.warp_part[w];
    const uint64_t point = sampling_draw_point(p_.draw_bits, kept_mass);
    // The slice holding the point (the most likely token keeps mass 2^40, so kept_mass > point).
    uint64_t acc = 0;
    int32_t slice = kWarps - 1;
    for (int w = 0; w < kWarps; ++w) {
      const uint64_t s = sh_.warp_part[w];
      if (acc + s > point) {
        slice = w;
        break;
      }
      acc += s;
    }
    __syncthreads();  // warp_part is reused by the scans below
    const int32_t begin = slice * per_slice_;
    const int32_t end = begin + per_slice_ < row_.groups ? begin + per_slice_ : row_.groups;
    for (int32_t base = begin; base < end; base += kThreads) {  // uniform: acc is the same everywhere
      const int32_t g = base + tid_;
      uint64_t q[4] = {0, 0, 0, 0};
      if (g < end) {
        float v[4];
        row_.load(g, v);
        for (int c = 0; c < 4; ++c) q[c] = row_.valid(g, c) ? kept(v[c]) : 0;
      }
      const uint64_t mine = q[0] + q[1] + q[2] + q[3];
      uint64_t chunk;
      const uint64_t excl = acc + block_exclusive_scan(mine, chunk, sh_);
      if (excl <= point && point < excl + mine) {
        uint64_t upto = excl;
        for (int c = 0; c < 4; ++c) {
          if (q[c] != 0 && upto + q[c] > point) {
            *token = 4 * g + c;
            break;
          }
          upto += q[c];
        }
      }
      acc += chunk;
      if (acc > point) break;
    }
  }

 private:
  __device__ __forceinline__ int32_t bucket_of(float logit) const {
    const float x = (max_logit_ - logit) * scale_;
    return x < static_cast<float>(kBuckets - 1) ? static_cast<int32_t>(x) : kBuckets - 1;
  }
  // An element's mass after min-p.
  __device__ __forceinline__ uint64_t mass_of(float logit) const {
    const float w = sampling_weight(logit, max_logit_, temperature_);
    if (p_.min_p > 0.0f && w < p_.min_p) return 0;
    return sampling_mass(w);
  }
  // A key's mass after min-p and (once kth_key_ is set) top-k.
  __device__ __forceinline__ uint64_t row_mass(uint32_t key) const {
    return key < kth_key_ ? 0 : mass_of(key_logit(key));
  }
  // The mass of a token that survives every filter.
  __device__ __forceinline__ uint64_t kept(float logit) const {
    if (clamped_ && bucket_of(logit) == kBuckets - 1) return 0;
    const uint32_t key = sampling_logit_key(logit);
    return key < tau_key_ ? 0 : row_mass(key);
  }

  // Collects bucket b's keys (and indices): into shared memory when they fit, else the selects
  // read them from the row. kmin_/kmax_: the bucket's smallest and largest key. Each warp reads
  // its draw slice and also sums the mass of its tokens in the buckets above (kept whatever the
  // threshold within the bucket turns out to be) and counts its tokens in the bucket, so that
  // the draw needs no pass of its own when this bucket holds the threshold.
  __device__ __forceinline__ void collect(int32_t b) {
    if (tid_ == 0) {
      sh_.n_collect = 0;
      sh_.kmin = 0xffffffffu;
      sh_.kmax = 0;
    }
    __syncthreads();
    uint32_t lo_key = 0xffffffffu, hi_key = 0, in_count = 0;
    uint64_t below = 0;
    constexpr int kUnroll = 2;
    for (int32_t g0 = my_begin_; g0 < my_end_; g0 += kUnroll * kWarpSize) {  // uniform in a warp
      float v[kUnroll][4];
      for (int u = 0; u < kUnroll; ++u) {
        const int32_t g = g0 + u * kWarpSize + lane_;
        if (g < my_end_) row_.load(g, v[u]);
      }
      for (int u = 0; u < kUnroll; ++u) {
        const int32_t g = g0 + u * kWarpSize + lane_;
        for (int c = 0; c < 4; ++c) {
          const int32_t eb = g < my_end_ && row_.valid(g, c) ? bucket_of(v[u][c]) : kBuckets;
          if (eb < b) below += row_mass(sampling_logit_key(v[u][c]));
          const bool in = eb == b;
          const LaneMask hits = warp_ballot(in);
          if (hits == 0) continue;  // uniform across the warp
          in_count += static_cast<uint32_t>(__popcll(hits));
          const uint32_t key = sampling_logit_key(v[u][c]);
          if (in) {
            lo_key = key < lo_key ? key : lo_key;
            hi_key = key > hi_key ? key : hi_key;
          }
          uint32_t base = 0;
          const int leader = lowest_lane(hits);
          if (lane_ == leader) base = atomicAdd(&sh_.n_collect, static_cast<uint32_t>(__popcll(hits)));
          base = shfl_from(base, leader);
          const uint32_t pos =
              base + static_cast<uint32_t>(__popcll(hits & ((LaneMask{1} << lane_) - 1)));
          if (in && pos < kCollect) {
            sh_.keys[pos] = key;
            sh_.index[pos] = static_cast<uint32_t>(4 * g + c);
          }
        }
      }
    }
    for (int m = kWarpSize / 2; m > 0; m >>= 1) below += shfl_xor_u64(below, m);
    if (lane_ == 0) {
      sh_.slice_below[warp_] = below;
      sh_.slice_count[warp_] = in_count;
    }
    for (int m = kWarpSize / 2; m > 0; m >>= 1) {
      const uint32_t ol = shfl_xor(lo_key, m), oh = shfl_xor(hi_key, m);
      lo_key = ol < lo_key ? ol : lo_key;
      hi_key = oh > hi_key ? oh : hi_key;
    }
    if (lane_ == 0) {
      atomicMin(&sh_.kmin, lo_key);
      atomicMax(&sh_.kmax, hi_key);
    }
    __syncthreads();
    const uint32_t total = sh_.n_collect;
    overflow_ = total > kCollect;
    n_keys_ = overflow_ ? kCollect : total;
    kmin_ = sh_.kmin;
    kmax_ = sh_.kmax;
    collected_ = b;
    __syncthreads();
  }

  // f(key) for every key of the collected bucket.
  template <typename F>
  __device__ __forceinline__ void for_each_key(F&& f) {
    if (!overflow_) {
      for (uint32_t i = tid_; i < n_keys_; i += kThreads) f(sh_.keys[i]);
      return;
    }
    for (int32_t g = tid_; g < row_.groups; g += kThreads) {
      float v[4];
      row_.load(g, v);
      for (int c = 0; c < 4; ++c) {
        if (row_.valid(g, c) && bucket_of(v[c]) == collected_) f(sampling_logit_key(v[c]));
      }
    }
  }

  // The largest key K of the collected bucket whose elements with keys >= K weigh at least
  // `need` (1 <= need <= the bucket's weight): radix select over the bits where its keys differ.
  template <typename Weight>
  __device__ __forceinline__ uint32_t select_key(uint64_t need, Weight&& weight) {
    if (kmin_ == kmax_) return kmin_;
    const int top = 31 - __clz(static_cast<int>(kmin_ ^ kmax_));  // highest differing bit
    uint32_t fixed = top == 31 ? 0u : ~((2u << top) - 1u);
    uint32_t prefix = kmin_ & fixed;
    uint64_t above = 0;
    for (int shift_top = top + 1; shift_top > 0;) {
      const int width = shift_top < kDigitBits ? shift_top : kDigitBits;
      const int shift = shift_top - width;
      const int bins = 1 << width;
      for (int j = tid_; j < bins; j += kThreads) {
        sh_.digit_lo[j] = 0;
        sh_.digit_hi[j] = 0;
      }
      __syncthreads();
      for_each_key([&](uint32_t key) {
        if ((key & fixed) != prefix) return;
        const uint64_t w = weight(key);
        if (w == 0) return;
        const uint32_t d = (key >> shift) & static_cast<uint32_t>(bins - 1);
        add_split(&sh_.digit_lo[d], &sh_.digit_hi[d], w);
      });
      __syncthreads();
      const Crossing c = find_crossing(
          bins, [&](int32_t r) { return read_split(sh_.digit_lo, sh_.digit_hi, bins - 1 - r); },
          need - above, sh_);
      const uint32_t digit = static_cast<uint32_t>(bins - 1 - (c.index < 0 ? bins - 1 : c.index));
      above += c.before;
      prefix |= digit << shift;
      fixed |= static_cast<uint32_t>(bins - 1) << shift;
      shift_top = shift;
    }
    return prefix;
  }

  // Each draw slice's kept mass, into sh_.warp_part: from the collect's sums above the bucket
  // that holds the final threshold plus that bucket's kept tokens when it was collected whole,
  // else by a pass over the slice.
  __device__ __forceinline__ void slice_masses() {
    const int32_t final_bucket = topp_on_ ? collected_ : bk_;  // the bucket holding tau_key_
    if (collected_ >= 0 && collected_ == final_bucket && (kmin_ == kmax_ || !overflow_)) {
      if (tid_ < kWarps) {
        uint64_t s = sh_.slice_below[tid_];
        if (kmin_ == kmax_ && kmin_ >= tau_key_) s += sh_.slice_count[tid_] * row_mass(kmin_);
        sh_.slice_lo[tid_] = static_cast<uint32_t>(s);
        sh_.slice_hi[tid_] = static_cast<uint32_t>(s >> 32);
      }
      __syncthreads();
      if (kmin_ != kmax_) {
        for (uint32_t i = tid_; i < n_keys_; i += kThreads) {
          const uint32_t key = sh_.keys[i];
          if (key < tau_key_) continue;
          const uint64_t m = row_mass(key);
          const int32_t w = static_cast<int32_t>(sh_.index[i] / 4) / per_slice_;
          if (m != 0) add_split(&sh_.slice_lo[w], &sh_.slice_hi[w], m);
        }
        __syncthreads();
      }
      if (tid_ < kWarps) sh_.warp_part[tid_] = read_split(sh_.slice_lo, sh_.slice_hi, tid_);
      __syncthreads();
      return;
    }
    uint64_t own = 0;
    constexpr int kUnroll = 2;
    for (int32_t g0 = my_begin_ + lane_; g0 < my_end_; g0 += kUnroll * kWarpSize) {
      float v[kUnroll][4];
      for (int u = 0; u < kUnroll; ++u) {
        const int32_t g = g0 + u * kWarpSize;
        if (g < my_end_) row_.load(g, v[u]);
      }
      for (int u = 0; u < kUnroll; ++u) {
        const int32_t g = g0 + u * kWarpSize;
        if (g >= my_end_) break;
        for (int c = 0; c < 4; ++c) {
          if (row_.valid(g, c)) own += kept(v[u][c]);
        }
      }
    }
    for (int m = kWarpSize / 2; m > 0; m >>= 1) own += shfl_xor_u64(own, m);
    if (lane_ == 0) sh_.warp_part[warp_] = own;
    __syncthreads();
  }

  SampleShared& sh_;
  const SampleRow p_;
  RowView row_;
  const int tid_, warp_, lane_;
  float max_logit_ = 0, min_logit_ = 0;
  int32_t argmax_ = -1;
  float temperature_ = 0, scale_ = 0;
  bool clamped_ = false, topk_on_ = false, topp_on_ = false;
  int32_t per_slice_ = 0, my_begin_ = 0, my_end_ = 0;  // this warp's draw slice, in groups
  uint32_t kth_key_ = 0;        // top-k's threshold key (0: none)
  int32_t bk_ = kBuckets;       // the top-k bucket; every bucket before it is wholly kept
  uint64_t bk_mass_ = 0;        // its mass at or above kth_key_
  uint32_t tau_key_ = 0;        // the final threshold key (top-p's, else top-k's)
  int32_t collected_ = -1;      // the bucket whose keys collect() gathered
  uint32_t n_keys_ = 0, kmin_ = 0, kmax_ = 0;
  bool overflow_ = false;       // its keys did not fit in shared memory
};

__global__ void __launch_bounds__(kThreads) sample_kernel(const float* logits, int64_t vocab64,
                                                          LaunchRows rows, int32_t* tokens) {
  wait_for_prior_kernels();  // launched overlapping the previous kernel (launch.h)
  let_next_kernel_start();
  __shared__ SampleShared sh;
  RowSampling s(sh, rows.row[blockIdx.x], logits + blockIdx.x * vocab64, vocab64);
  s.find_extremes();
  // Greedy rows end here. A sampled row's draw overwrites this below; one whose filters keep no
  // mass (non-finite logits) keeps its argmax instead of whatever the buffer held (-1 when no
  // logit is a number: the engine refuses ids outside the vocabulary).
  if (threadIdx.x == 0) tokens[blockIdx.x] = s.argmax();
  if (s.greedy()) return;
  s.plan();
  s.histogram();
  s.assign_slices();
  s.top_k();
  s.top_p();
  s.draw(&tokens[blockIdx.x]);
}

}  // namespace

gpuError_t sample(const float* logits, int64_t vocab, const SampleRow* rows, int32_t n_rows,
                  int32_t* tokens, gpuStream_t stream) {
  for (int32_t done = 0; done < n_rows; done += kSampleRowsPerLaunch) {
    const int32_t count = n_rows - done < kSampleRowsPerLaunch ? n_rows - done : kSampleRowsPerLaunch;
    LaunchRows batch{};
    for (int32_t r = 0; r < count; ++r) batch.row[r] = rows[done + r];
    const gpuError_t err = launch(sample_kernel, dim3(static_cast<unsigned>(count)), dim3(kThreads), 0,
                                  stream, logits + static_cast<int64_t>(done) * vocab, vocab, batch,
                                  tokens + done);
    if (err != gpuSuccess) return err;
  }
  return gpuSuccess;
}

}  // namespace tessera::gpu
