// gpu::attention_decode over an FP8 KV cache (Fp8KvPools) against an fp64 host reference over
// the dequantized values (code value x scale), and against the 16-bit attention_decode over a T
// cache holding those values: bit for bit where the scales are powers of two (every dequantized
// value is then exact in T, and the FP8 launch's folded scales differ from the 16-bit launch's
// by powers of two only, which move no rounding), within T's rounding otherwise. bf16 and fp16
// queries, both e4m3 encodings, head_dim 64, 128 and 256, GQA groups 1, 4 and 8 (one and two KV
// heads), soft-cap and sliding window on and off; codes drawn over every exponent (subnormal
// codes and zeros included); a batch of sequences over shuffled pages, decoded in reverse order,
// each with the device's split plan and with one split. Outputs and split workspaces are
// poisoned (NaN) before each launch. Skips without a GPU, except the check that e5m2 pools are
// refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/fp8.h"
#include "base/half.h"
#include "base/str_cat.h"
#include "kernels/gpu_backend.h"
#include "kernels/gpu_ops.h"
#include "tests/kernels/device_alloc.h"

namespace tessera {
namespace {

struct Param {
  bool f16;
  Fp8Encoding enc;
};

std::string name_of(const Param& p) {
  return std::string(p.f16 ? "f16" : "bf16") +
         (p.enc == Fp8Encoding::kE4M3FN ? "_e4m3fn" : "_e4m3fnuz");
}
std::string param_name(const ::testing::TestParamInfo<Param>& info) { return name_of(info.param); }

constexpr int32_t kBlockSize = 16;
// The batch's sequences, each one decode token over `context` keys: fewer than a tile (1), part
// of one (37), exactly one (64), several (517), and enough for several splits (3001).
constexpr std::array<int32_t, 5> kContexts = {1, 37, 64, 517, 3001};
constexpr int32_t kNumSeqs = static_cast<int32_t>(kContexts.size());
constexpr int32_t kWindow = 1000;  // longer than every sequence but the last
constexpr float kSoftCap = 2.0f;   // bites: the scaled scores here spread over about +-5

// Relative errors per row (sequence, head) of the output. bf16 keeps 8 significant bits, and P
// and the output are rounded to it: a host model of the kernel's roundings puts the worst row at
// 4.5e-3 of the reference. The 16-bit cache's own rounding of every key and value (to 8 bits,
// where the FP8 kernel's widened codes are exact) moves the scores too, which the softmax
// amplifies: 1.5e-2 in the model between the two kernels. fp16 (11 bits): 6e-4 and 1.3e-3.
struct Tolerances {
  double reference;
  double sixteen_bit;
};
Tolerances tolerances(bool f16) {
  if (f16) return {2e-3, 5e-3};
  return {1e-2, 3e-2};
}

struct Shape {
  int32_t head_dim, num_heads, num_kv_heads;
  float softcap;
  int32_t window;
};

std::string describe(const Shape& s) {
  return str_cat("d", s.head_dim, " heads ", s.num_heads, "/", s.num_kv_heads, " softcap ",
                 s.softcap, " window ", s.window);
}

// The largest over rows of `d` elements of max |got - want| / max |want|; infinity where either
// is not finite (a poisoned element survived).
template <typename W>
double worst_row_error(const std::vector<float>& got, const std::vector<W>& want, int32_t d) {
  double worst = 0.0;
  for (size_t row = 0; row < want.size(); row += d) {
    double diff = 0.0, peak = 0.0;
    for (size_t i = row; i < row + d; ++i) {
      if (!std::isfinite(got[i]) || !std::isfinite(static_cast<double>(want[i]))) {
        return std::numeric_limits<double>::infinity();
      }
      diff = std::max(diff, std::fabs(got[i] - static_cast<double>(want[i])));
      peak = std::max(peak, std::fabs(static_cast<double>(want[i])));
    }
    worst = std::max(worst, peak > 0.0 ? diff / peak : diff);
  }
  return worst;
}

class GpuKvFp8DecodeTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (GpuBackend::device_count() == 0) GTEST_SKIP() << "no GPU visible";
    ASSERT_EQ(gpuSetDevice(0), gpuSuccess);
    ASSERT_EQ(gpuStreamCreateWithFlags(&stream_, gpuStreamNonBlocking), gpuSuccess);
    gpuDeviceProp prop{};
    ASSERT_EQ(gpuGetDeviceProperties(&prop, 0), gpuSuccess);
    multiprocessors_ = prop.multiProcessorCount;
  }
  void TearDown() override {
    if (stream_ != nullptr) (void)gpuStreamDestroy(stream_);
  }

  bool f16() const { return GetParam().f16; }
  Fp8Encoding enc() const { return GetParam().enc; }
  float value_of(uint16_t bits) const { return f16() ? half_to_float(bits) : bf16_to_float(bits); }
  uint16_t bits_of(float f) const { return f16() ? float_to_half(f) : float_to_bf16(f); }


  // The batch's metadata: one token per sequence (token s of sequence s), sequences decoded in
  // reverse order (a decode index is not its sequence's index), pages shuffled over the pool
  // (a few spare pages no sequence uses).
  struct Batch {
    int32_t max_blocks = 0, num_blocks = 0;
    std::vector<int32_t> tables;  // [kNumSeqs, max_blocks], -1 past a sequence's pages
    std::vector<DevicePtr> arrays;
    gpu::DeviceStep step;
  };
  Batch make_batch() {
    Batch b;
    for (int32_t ctx : kContexts) {
      const int32_t pages = (ctx + kBlockSize - 1) / kBlockSize;
      b.max_blocks = std::max(b.max_blocks, pages);
      b.num_blocks += pages;
    }
    b.num_blocks += 7;
    std::vector<int32_t> pages(b.num_blocks);
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng_);
    b.tables.assign(static_cast<size_t>(kNumSeqs) * b.max_blocks, -1);
    std::vector<int32_t> query_start(kNumSeqs + 1), context(kContexts.begin(), kContexts.end()),
        decode_seqs(kNumSeqs);
    size_t next = 0;
    for (int32_t s = 0; s < kNumSeqs; ++s) {
      for (int32_t j = 0; j * kBlockSize < kContexts[s]; ++j) {
        b.tables[static_cast<size_t>(s) * b.max_blocks + j] = pages[next++];
      }
      query_start[s + 1] = s + 1;
      decode_seqs[s] = kNumSeqs - 1 - s;
    }
    b.arrays.push_back(device_upload(query_start));
    b.arrays.push_back(device_upload(context));
    b.arrays.push_back(device_upload(b.tables));
    b.arrays.push_back(device_upload(decode_seqs));
    gpu::DeviceStep& st = b.step;
    st.query_start = static_cast<const int32_t*>(b.arrays[0].get());
    st.context_len = static_cast<const int32_t*>(b.arrays[1].get());
    st.block_tables = static_cast<const int32_t*>(b.arrays[2].get());
    st.decode_seqs = static_cast<const int32_t*>(b.arrays[3].get());
    st.num_tokens = kNumSeqs;
    st.num_seqs = kNumSeqs;
    st.max_blocks = b.max_blocks;
    st.num_decode_seqs = kNumSeqs;
    st.max_decode_context = *std::max_element(kContexts.begin(), kContexts.end());
    return b;
  }

  // `count` codes of sign x peak x 2^-u, u uniform in [0, 20]: every exponent from the peak's
  // down, a quarter of them subnormal or zero. Drawn from a table of such codes (encoding each
  // draw would take most of the test's time).
  std::vector<uint8_t> random_codes(size_t count, float peak) {
    constexpr size_t kTable = 4096;
    std::uniform_real_distribution<float> u(0.0f, 20.0f);
    std::vector<uint8_t> table(kTable);
    for (uint8_t& c : table) {
      const float sign = (rng_() & 1) != 0 ? -1.0f : 1.0f;
      c = float_to_fp8(enc(), sign * peak * std::exp2(-u(rng_)));
    }
    std::vector<uint8_t> codes(count);
    for (uint8_t& c : codes) c = table[rng_() % kTable];
    return codes;
  }

  // fp64 decode attention of the batch over k and v (the pools' values): [kNumSeqs, heads, d].
  std::vector<double> reference(const Shape& s, const Batch& b, const std::vector<float>& q,
                                const std::vector<float>& k, const std::vector<float>& v,
                                float scale) const {
    const int32_t d = s.head_dim, group = s.num_heads / s.num_kv_heads;
    std::vector<double> out(static_cast<size_t>(kNumSeqs) * s.num_heads * d, 0.0);
    std::vector<double> score;
    std::vector<size_t> rows;  // pool offset of each key's row (of KV head 0)
    for (int32_t seq = 0; seq < kNumSeqs; ++seq) {
      const int32_t ctx = kContexts[seq];
      const int32_t first = s.window > 0 ? std::max(0, ctx - s.window) : 0;
      rows.clear();
      for (int32_t j = first; j < ctx; ++j) {
        const int64_t slot =
            static_cast<int64_t>(b.tables[static_cast<size_t>(seq) * b.max_blocks +
                                          j / kBlockSize]) * kBlockSize + j % kBlockSize;
        rows.push_back(static_cast<size_t>(slot) * s.num_kv_heads * d);
      }
      for (int32_t h = 0; h < s.num_heads; ++h) {
        const size_t head_off = static_cast<size_t>(h / group) * d;
        const float* qh = q.data() + (static_cast<size_t>(seq) * s.num_heads + h) * d;
        score.assign(rows.size(), 0.0);
        double mx = -std::numeric_limits<double>::infinity();
        for (size_t j = 0; j < rows.size(); ++j) {
          const float* kj = k.data() + rows[j] + head_off;
          double dot = 0.0;
          for (int32_t e = 0; e < d; ++e) dot += static_cast<double>(qh[e]) * kj[e];
          double x = scale * dot;
          if (s.softcap > 0.0f) x = s.softcap * std::tanh(x / s.softcap);
          score[j] = x;
          mx = std::max(mx, x);
        }
        double sum = 0.0;
        double* o = out.data() + (static_cast<size_t>(seq) * s.num_heads + h) * d;
        for (size_t j = 0; j < rows.size(); ++j) {
          const double p = std::exp(score[j] - mx);
          sum += p;
          const float* vj = v.data() + rows[j] + head_off;
          for (int32_t e = 0; e < d; ++e) o[e] += p * vj[e];
        }
        for (int32_t e = 0; e < d; ++e) o[e] /= sum;
      }
    }
    return out;
  }

  // The output of one launch ([kNumSeqs, heads * d] as floats): `launch(out, part_acc, part_ml)`
  // with the output and the split workspace poisoned (NaN) first.
  template <typename T, typename Launch>
  std::vector<float> run(const Shape& s, const gpu::DecodeSplits& splits, Launch launch) {
    const size_t count = static_cast<size_t>(kNumSeqs) * s.num_heads * s.head_dim;
    const size_t parts = static_cast<size_t>(kNumSeqs) * s.num_heads * splits.num_splits;
    DevicePtr out = device_alloc(count * sizeof(T));
    DevicePtr part_acc = device_alloc(parts * s.head_dim * sizeof(float));
    DevicePtr part_ml = device_alloc(parts * 2 * sizeof(float));
    EXPECT_EQ(gpuMemsetAsync(out.get(), 0xff, count * sizeof(T), stream_), gpuSuccess);
    EXPECT_EQ(gpuMemsetAsync(part_acc.get(), 0xff, parts * s.head_dim * sizeof(float), stream_),
              gpuSuccess);
    EXPECT_EQ(gpuMemsetAsync(part_ml.get(), 0xff, parts * 2 * sizeof(float), stream_),
              gpuSuccess);
    EXPECT_EQ(launch(static_cast<T*>(out.get()), static_cast<float*>(part_acc.get()),
                     static_cast<float*>(part_ml.get())),
              gpuSuccess)
        << describe(s);
    EXPECT_EQ(gpuStreamSynchronize(stream_), gpuSuccess);
    std::vector<uint16_t> bits(count);
    EXPECT_EQ(gpuMemcpy(bits.data(), out.get(), count * sizeof(T), gpuMemcpyDeviceToHost),
              gpuSuccess);
    std::vector<float> values(count);
    for (size_t i = 0; i < count; ++i) values[i] = value_of(bits[i]);
    return values;
  }

  // Every shape under scales (k_scale, v_scale): the FP8 kernel against the reference, and
  // against the 16-bit kernel over the dequantized values rounded to T -- bit for bit when
  // `exact` (scales that are powers of two, which leave those values exact).
  template <typename T>
  void check_shapes(float k_scale, float v_scale, bool exact) {
    const Tolerances tol = tolerances(f16());
    const Batch batch = make_batch();
    for (const int32_t d : {64, 128, 256}) {
      const float scale = 1.0f / std::sqrt(static_cast<float>(d));
      // GQA groups 1 and 4 over two KV heads, 8 over one.
      for (const auto& [heads, kv_heads] : {std::pair{2, 2}, std::pair{8, 2}, std::pair{8, 1}}) {
        const size_t pool = static_cast<size_t>(batch.num_blocks) * kBlockSize * kv_heads * d;
        // Keys up to 300 and values up to 200 in code units.
        const std::vector<uint8_t> k_codes = random_codes(pool, 300.0f);
        const std::vector<uint8_t> v_codes = random_codes(pool, 200.0f);
        std::vector<float> k(pool), v(pool);
        std::vector<uint16_t> k16(pool), v16(pool);
        size_t inexact = 0;
        for (size_t i = 0; i < pool; ++i) {
          k[i] = fp8_to_float(enc(), k_codes[i]) * k_scale;
          v[i] = fp8_to_float(enc(), v_codes[i]) * v_scale;
          k16[i] = bits_of(k[i]);
          v16[i] = bits_of(v[i]);
          inexact += (value_of(k16[i]) != k[i]) + (value_of(v16[i]) != v[i]);
        }
        if (exact) {
          ASSERT_EQ(inexact, 0u) << "dequantized values not exact in 16 bits";
        }
        const DevicePtr k_dev = device_upload(k_codes), v_dev = device_upload(v_codes);
        const DevicePtr k16_dev = device_upload(k16), v16_dev = device_upload(v16);
        const gpu::Fp8KvPools pools{static_cast<const uint8_t*>(k_dev.get()),
                                    static_cast<const uint8_t*>(v_dev.get()), k_scale, v_scale,
                                    enc()};
        const auto* k_cache = static_cast<const T*>(k16_dev.get());
        const auto* v_cache = static_cast<const T*>(v16_dev.get());
        double worst_ref = 0.0, worst_16 = 0.0;
        for (const float softcap : {0.0f, kSoftCap}) {
          for (const int32_t window : {0, kWindow}) {
            const Shape s{d, heads, kv_heads, softcap, window};
            // q in +-1, exact in T; k and v in qkv are not read by the decode kernel.
            const int32_t qkv_width = (heads + 2 * kv_heads) * d;
            std::vector<float> q(static_cast<size_t>(kNumSeqs) * heads * d);
            std::vector<uint16_t> qkv(static_cast<size_t>(kNumSeqs) * qkv_width, 0);
            std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
            for (int32_t t = 0; t < kNumSeqs; ++t) {
              for (int32_t i = 0; i < heads * d; ++i) {
                const uint16_t b = bits_of(unit(rng_));
                qkv[static_cast<size_t>(t) * qkv_width + i] = b;
                q[static_cast<size_t>(t) * heads * d + i] = value_of(b);
              }
            }
            const DevicePtr qkv_dev = device_upload(qkv);
            const auto* qkv_t = static_cast<const T*>(qkv_dev.get());
            const std::vector<double> want = reference(s, batch, q, k, v, scale);

            // Planned over the keys a sequence attends, as GpuBackend plans them.
            const int32_t span = window > 0 ? std::min(batch.step.max_decode_context, window)
                                            : batch.step.max_decode_context;
            const gpu::DecodeSplits planned =
                gpu::plan_decode_splits(kNumSeqs, kv_heads, span, multiprocessors_);
            EXPECT_GT(planned.num_splits, 1) << describe(s);
            for (const gpu::DecodeSplits& splits : {planned, gpu::DecodeSplits{}}) {
              const std::string what = str_cat(describe(s), " splits ", splits.num_splits);
              const std::vector<float> fp8 = run<T>(s, splits, [&](T* out, float* acc, float* ml) {
                return gpu::attention_decode(qkv_t, pools, kBlockSize, batch.step, heads,
                                             kv_heads, d, scale, softcap, window, splits, acc, ml,
                                             out, stream_);
              });
              const std::vector<float> sixteen =
                  run<T>(s, splits, [&](T* out, float* acc, float* ml) {
                    return gpu::attention_decode(qkv_t, k_cache, v_cache, kBlockSize, batch.step,
                                                 heads, kv_heads, d, scale, softcap, window,
                                                 splits, acc, ml, out, stream_);
                  });
              const double e_ref = worst_row_error(fp8, want, d);
              EXPECT_LT(e_ref, tol.reference) << what;
              worst_ref = std::max(worst_ref, e_ref);
              if (exact) {
                size_t mismatches = 0, first = 0;
                for (size_t i = 0; i < fp8.size(); ++i) {
                  // NaN (a poisoned element) never compares equal.
                  if (!(fp8[i] == sixteen[i]) && mismatches++ == 0) first = i;
                }
                EXPECT_EQ(mismatches, 0u) << what << ": first at " << first << ", " << fp8[first]
                                          << " against " << sixteen[first];
              } else {
                const double e_16 = worst_row_error(fp8, sixteen, d);
                EXPECT_LT(e_16, tol.sixteen_bit) << what;
                worst_16 = std::max(worst_16, e_16);
              }
            }
          }
        }
        char versus_16[32] = "bit for bit";
        if (!exact) std::snprintf(versus_16, sizeof(versus_16), "%.2e", worst_16);
        std::printf("[ metric ] kv_fp8_decode %s k_scale %g v_scale %g d=%d heads=%d/%d "
                    "worst row error: reference %.2e, 16-bit cache %s\n",
                    name_of(GetParam()).c_str(), k_scale, v_scale, d, heads, kv_heads, worst_ref,
                    versus_16);
      }
    }
  }

  gpuStream_t stream_ = nullptr;
  int multiprocessors_ = 1;
  std::mt19937 rng_{2024};
};

INSTANTIATE_TEST_SUITE_P(Types, GpuKvFp8DecodeTest,
                         ::testing::Values(Param{false, Fp8Encoding::kE4M3FN},
                                           Param{true, Fp8Encoding::kE4M3FN},
                                           Param{false, Fp8Encoding::kE4M3FNUZ},
                                           Param{true, Fp8Encoding::kE4M3FNUZ}),
                         param_name);

// Scales a checkpoint's calibration could give: the values rounded to T for the 16-bit cache.
TEST_P(GpuKvFp8DecodeTest, MatchesReferenceAndSixteenBitCache) {
  if (f16()) {
    check_shapes<gpu_f16>(0.05f, 0.01f, /*exact=*/false);
  } else {
    check_shapes<gpu_bf16>(0.05f, 0.01f, /*exact=*/false);
  }
}

// Powers of two: every dequantized value a normal bf16 / fp16 number (the smallest nonzero code,
// 2^-9 or 2^-10, times 2^-4 is 2^-14 at least), and the folded scales (k_scale into the scores',
// v_scale into the accumulators) exact, so the FP8 kernel rounds nothing the 16-bit kernel does
// not: a wrong fold or a misplaced code shows as a mismatch.
TEST_P(GpuKvFp8DecodeTest, PowerOfTwoScalesMatchSixteenBitCacheBitForBit) {
  if (f16()) {
    check_shapes<gpu_f16>(0.0625f, 0.25f, /*exact=*/true);
  } else {
    check_shapes<gpu_bf16>(0.0625f, 0.25f, /*exact=*/true);
  }
}

// e5m2 codes are not widened (fp8_widen.h covers e4m3 only): refused before anything touches the
// device, so this runs without a GPU too.
TEST(GpuKvFp8Decode, RejectsE5M2) {
  gpu::DeviceStep step;
  step.num_decode_seqs = 1;
  gpu::Fp8KvPools pools;
  pools.encoding = Fp8Encoding::kE5M2;
  EXPECT_EQ(gpu::attention_decode<gpu_bf16>(nullptr, pools, kBlockSize, step, 8, 2, 128, 1.0f,
                                            0.0f, 0, gpu::DecodeSplits{}, nullptr, nullptr,
                                            nullptr, nullptr),
            gpuErrorInvalidValue);
  EXPECT_EQ(gpu::attention_decode<gpu_f16>(nullptr, pools, kBlockSize, step, 8, 2, 128, 1.0f,
                                           0.0f, 0, gpu::DecodeSplits{}, nullptr, nullptr, nullptr,
                                           nullptr),
            gpuErrorInvalidValue);
}

}  // namespace
}  // namespace tessera
