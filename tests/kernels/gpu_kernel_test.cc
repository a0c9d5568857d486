// GpuBackend against CpuBackend, op by op over shape sweeps, then a whole random-weight Llama
// through LlamaModel on both, in each GPU compute dtype (bf16 and fp16). Inputs are random (never
// zeros) and exactly representable in the GPU's dtype, so that both backends see the same values;
// GPU outputs are poisoned (NaN) before each op so that an unwritten element cannot pass. Errors
// are relative L2 norms, thresholds per dtype. Decode attention also runs many times back to back
// on alternating inputs (launches overlapping where the device allows) against the same inputs run
// with the stream drained, bit for bit. Every test skips when no GPU is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/gpu_backend.h"
#include "tests/kernels/device_alloc.h"
#include "tests/kernels/suite_gpu_backend.h"
#include "runtime/kv_cache/kv_cache.h"
#include "base/fp8.h"
#include "base/half.h"
#include "runtime/model/decoder_model.h"
#include "runtime/runner/step_runner.h"
#include "base/str_cat.h"

namespace tessera {
namespace {

// The Llama family over the step runner, as ModelInstance assembles them.
struct LoadedLlama {
  std::unique_ptr<StepRunner> runner;
  DecoderModel* family = nullptr;  // owned by runner
};
absl::StatusOr<LoadedLlama> load_llama(const WeightSource& weights, std::vector<LayerSegment> segments,
                                       ForwardLimits limits, ExecutionOptions execution = {}) {
  absl::StatusOr<std::unique_ptr<DecoderModel>> family = DecoderModel::load(weights, segments);
  if (!family.ok()) return family.status();
  LoadedLlama loaded;
  loaded.family = family->get();
  absl::StatusOr<std::unique_ptr<StepRunner>> runner =
      StepRunner::create(*std::move(family), std::move(segments), limits, std::move(execution));
  if (!runner.ok()) return runner.status();
  loaded.runner = *std::move(runner);
  return loaded;
}

// Error thresholds of one compute dtype. bf16 keeps 8 significant bits (one rounding is up to
// 2^-9 relative), fp16 11 (2^-12): the fp16 thresholds are the bf16 ones over 8, except the end
// to end ones. The model's logits error over 5 (the CPU with every activation rounded to the
// dtype puts this model at 2.8e-2 in bf16 and 3.1e-3 in fp16, max |error| 0.26 and 0.028);
// the greedy tie over 2 (the smallest top-2 margin of the CPU's fp16-weight run is 0.0195,
// within reach of fp16's largest errors).
struct Tolerances {
  double op;          // relative: elementwise ops, norms, GEMMs with 16-bit output
  double attention;   // relative: attention outputs
  double f32_out;     // relative: GEMMs with fp32 output (the logits)
  double logits;      // relative: a whole model's logits, end to end
  float greedy_tie;   // a greedy token may differ from the CPU's only below this top-2 margin
};

Tolerances tolerances(DType dtype) {
  if (dtype == DType::kF16) return {1.25e-3, 2.5e-3, 2.5e-4, 1e-2, 0.025f};
  return {1e-2, 2e-2, 2e-3, 5e-2, 0.05f};
}

// x rounded to the GPU's 16-bit `dtype` (to nearest even); fp32 stays as it is.
float round_to(DType dtype, float x) {
  if (dtype == DType::kBF16) return bf16_to_float(float_to_bf16(x));
  if (dtype == DType::kF16) return half_to_float(float_to_half(x));
  return x;
}

// The dtypes' names in test names ("Linear/f16").
std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) {
  return info.param == DType::kF16 ? "f16" : "bf16";
}

// Relative L2 error of `got` against `want`; infinity when any value is not finite (a poisoned
// element survived) or the sizes differ.
double rel_err(const std::vector<float>& want, const std::vector<float>& got) {
  if (want.size() != got.size()) return std::numeric_limits<double>::infinity();
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i]) || !std::isfinite(want[i])) {
      return std::numeric_limits<double>::infinity();
    }
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return den == 0.0 ? std::sqrt(num) : std::sqrt(num / den);
}

// One tensor on each backend: fp32 on the CPU, `gpu_dtype` on the GPU.
struct Pair {
  DeviceBuffer cpu_buf, gpu_buf;
  Tensor c, g;
};

struct AttnCase;
struct AttnInputs;

// Parameter: the GPU backend's compute dtype.
class GpuKernelTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (GpuBackend::device_count() == 0) GTEST_SKIP() << "no GPU visible";
    GpuBackend* backend = suite_gpu_backend<GpuKernelTest>(GetParam());
    ASSERT_NE(backend, nullptr);
    gpu_ = backend;
    dtype_ = GetParam();
    tol_ = tolerances(dtype_);
  }

  AttnInputs attention_inputs(const AttnCase& c, float k_max);

  // A tensor of the compute dtype on the GPU.
  Pair make(std::initializer_list<int64_t> dims) { return make(dims, dtype_); }
  Pair make(std::initializer_list<int64_t> dims, DType gpu_dtype) {
    Pair p;
    p.c = Tensor(nullptr, DType::kF32, dims);
    p.g = Tensor(nullptr, gpu_dtype, dims);
    auto cb = cpu_.allocate(p.c.nbytes());
    auto gb = gpu_->allocate(p.g.nbytes());
    EXPECT_TRUE(cb.ok() && gb.ok());
    p.c.data = cb->data();
    p.g.data = gb->data();
    p.cpu_buf = *std::move(cb);
    p.gpu_buf = *std::move(gb);
    return p;
  }

  // Random values in +-[lo, hi) (never zero), rounded to the GPU side's dtype.
  void fill(Pair& p, float hi = 1.0f, float lo = 0.05f) {
    std::uniform_real_distribution<float> mag(lo, hi);
    std::bernoulli_distribution sign(0.5);
    std::vector<float> v(p.c.numel());
    for (float& x : v) x = round_to(p.g.dtype, sign(rng_) ? mag(rng_) : -mag(rng_));
    set(p, v);
  }
  void set(Pair& p, const std::vector<float>& v) {
    std::memcpy(p.c.data, v.data(), v.size() * sizeof(float));
    gpu_->upload_f32(v, p.g);
  }
  void poison(Pair& p) {
    std::vector<float> nan(p.c.numel(), std::numeric_limits<float>::quiet_NaN());
    set(p, nan);
  }
  std::vector<float> cpu_values(const Pair& p) {
    const float* f = p.c.as<float>();
    return std::vector<float>(f, f + p.c.numel());
  }
  std::vector<float> gpu_values(const Pair& p) {
    std::vector<float> out(p.g.numel());
    if (p.g.dtype == DType::kF32) {
      gpu_->copy_to_host(out.data(), p.g.data, p.g.nbytes());
    } else {
      std::vector<uint16_t> raw(p.g.numel());
      gpu_->copy_to_host(raw.data(), p.g.data, p.g.nbytes());
      for (size_t i = 0; i < raw.size(); ++i) {
        out[i] = p.g.dtype == DType::kF16 ? half_to_float(raw[i]) : bf16_to_float(raw[i]);
      }
    }
    return out;
  }
  const char* dtype_label() const { return dtype_ == DType::kF16 ? "f16" : "bf16"; }
  double err(const Pair& p) {
    EXPECT_TRUE(gpu_->synchronize().ok());
    return rel_err(cpu_values(p), gpu_values(p));
  }

  GpuBackend* gpu_ = nullptr;
  DType dtype_ = DType::kBF16;
  Tolerances tol_;
  CpuBackend cpu_{2};
  std::mt19937 rng_{1234};
};

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuKernelTest, ::testing::Values(DType::kBF16, DType::kF16),
                         dtype_param_name);

// A step of several sequences, each {tokens already cached, new tokens}, over shuffled blocks.
StepBatch make_batch(const std::vector<std::pair<int32_t, int32_t>>& seqs, int32_t block_size,
                     int32_t num_blocks, int32_t vocab, std::mt19937& rng) {
  std::vector<int32_t> blocks(num_blocks);
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  StepBatch b;
  int32_t max_blocks = 0;
  for (auto [before, added] : seqs) max_blocks = std::max(max_blocks, (before + added + block_size - 1) / block_size);
  b.max_blocks = max_blocks;
  b.query_start.push_back(0);
  size_t next_block = 0;
  std::uniform_int_distribution<int32_t> tok(0, vocab - 1);
  for (auto [before, added] : seqs) {
    const int32_t ctx = before + added;
    const int32_t n_blocks = (ctx + block_size - 1) / block_size;
    std::vector<int32_t> table(max_blocks, -1);
    for (int32_t i = 0; i < n_blocks; ++i) table[i] = blocks.at(next_block++);
    for (int32_t i = 0; i < added; ++i) {
      const int32_t pos = before + i;
      b.token_ids.push_back(tok(rng));
      b.positions.push_back(pos);
      b.slot_mapping.push_back(table[pos / block_size] * block_size + pos % block_size);
    }
    b.block_tables.insert(b.block_tables.end(), table.begin(), table.end());
    b.context_len.push_back(ctx);
    b.query_start.push_back(b.query_start.back() + added);
    b.logits_rows.push_back(b.query_start.back() - 1);
  }
  return b;
}

std::vector<float> inv_freq(int32_t head_dim, float theta = 10000.0f) {
  std::vector<float> f(head_dim / 2);
  for (int32_t i = 0; i < head_dim / 2; ++i) {
    f[i] = 1.0f / std::pow(theta, 2.0f * static_cast<float>(i) / static_cast<float>(head_dim));
  }
  return f;
}

TEST_P(GpuKernelTest, Embedding) {
  for (int64_t hidden : {576, 4096, 1000}) {
    const int64_t vocab = 1000;
    Pair table = make({vocab, hidden}), out = make({37, hidden});
    fill(table);
    poison(out);
    StepBatch b = make_batch({{0, 20}, {5, 17}}, 16, 8, static_cast<int32_t>(vocab), rng_);
    b.token_ids[0] = 0;
    b.token_ids[1] = static_cast<int32_t>(vocab - 1);
    cpu_.begin_step(b);
    gpu_->begin_step(b);
    cpu_.embedding(table.c, 0, 1.0f, out.c);
    gpu_->embedding(table.g, 0, 1.0f, out.g);
    EXPECT_EQ(err(out), 0.0) << "hidden " << hidden;
    // A tensor-parallel rank's slice of the vocabulary: other ranks' tokens give zeros.
    cpu_.embedding(table.c, 300, 1.0f, out.c);
    gpu_->embedding(table.g, 300, 1.0f, out.g);
    EXPECT_EQ(err(out), 0.0) << "hidden " << hidden << " from id 300";
    // Gemma's sqrt(hidden) scale: one rounding of the product.
    const float scale = std::sqrt(static_cast<float>(hidden));
    cpu_.embedding(table.c, 0, scale, out.c);
    gpu_->embedding(table.g, 0, scale, out.g);
    EXPECT_LT(err(out), tol_.op) << "hidden " << hidden << " scaled";
  }
}

TEST_P(GpuKernelTest, RmsNorm) {
  for (auto [n, hidden] : std::vector<std::pair<int64_t, int64_t>>{{1, 576}, {7, 1000}, {64, 4096}, {3, 8192}}) {
    Pair x = make({n, hidden}), w = make({hidden}), out = make({n, hidden});
    fill(x, 3.0f);
    fill(w, 1.5f, 0.5f);
    poison(out);
    for (const float offset : {0.0f, 1.0f}) {  // 1: Gemma's weights stored minus one
      poison(out);
      cpu_.rms_norm(x.c, w.c, NormSpec{1e-5f, offset}, out.c);
      gpu_->rms_norm(x.g, w.g, NormSpec{1e-5f, offset}, out.g);
      const double e = err(out);
      EXPECT_LT(e, tol_.op) << n << "x" << hidden << " offset " << offset;
      std::printf("[ metric ] rms_norm %s %ldx%ld offset %.0f rel_err %.2e\n", dtype_label(),
                  long(n), long(hidden), offset, e);
    }
  }
}

TEST_P(GpuKernelTest, AddRmsNorm) {
  for (auto [n, hidden] : std::vector<std::pair<int64_t, int64_t>>{{1, 576}, {13, 1000}, {64, 4096}}) {
    Pair r = make({n, hidden}), x = make({n, hidden}), w = make({hidden}), out = make({n, hidden});
    fill(r, 4.0f);
    fill(x, 2.0f);
    fill(w, 1.5f, 0.5f);
    poison(out);
    cpu_.add_rms_norm(r.c, x.c, w.c, NormSpec{1e-5f}, out.c);
    gpu_->add_rms_norm(r.g, x.g, w.g, NormSpec{1e-5f}, out.g);
    const double e_out = err(out), e_res = err(r);
    EXPECT_LT(e_out, tol_.op) << n << "x" << hidden;
    EXPECT_LT(e_res, tol_.op) << n << "x" << hidden;
    std::printf("[ metric ] add_rms_norm %s %ldx%ld rel_err out %.2e residual %.2e\n",
                dtype_label(), long(n), long(hidden), e_out, e_res);
  }
}

TEST_P(GpuKernelTest, GatedActivation) {
  for (const Activation act : {Activation::kSilu, Activation::kGeluTanh}) {
    for (auto [n, inter] : std::vector<std::pair<int64_t, int64_t>>{{1, 1536}, {37, 2048}, {5, 1000}}) {
      Pair gu = make({n, 2 * inter}), out = make({n, inter});
      fill(gu, 4.0f);
      poison(out);
      cpu_.gated_activation(gu.c, act, out.c);
      gpu_->gated_activation(gu.g, act, out.g);
      const double e = err(out);
      EXPECT_LT(e, tol_.op) << activation_name(act) << " " << n << "x" << inter;
      std::printf("[ metric ] gated_activation %s %s %ldx%ld rel_err %.2e\n", dtype_label(),
                  std::string(activation_name(act)).c_str(), long(n), long(inter), e);
    }
  }
}

TEST_P(GpuKernelTest, SoftCap) {
  Pair x = make({3, 1000}, DType::kF32);
  fill(x, 200.0f);  // well past the cap: the tanh saturates
  cpu_.soft_cap(x.c, 30.0f);
  gpu_->soft_cap(x.g, 30.0f);
  EXPECT_LT(err(x), 1e-6);
}

TEST_P(GpuKernelTest, GatherLogitRows) {
  const int64_t hidden = 576;
  StepBatch b = make_batch({{0, 20}, {3, 1}, {40, 9}, {0, 7}}, 16, 16, 100, rng_);
  Pair x = make({b.num_tokens(), hidden});
  Pair out = make({static_cast<int64_t>(b.logits_rows.size()), hidden});
  fill(x);
  poison(out);
  cpu_.begin_step(b);
  gpu_->begin_step(b);
  cpu_.gather_logit_rows(x.c, out.c);
  gpu_->gather_logit_rows(x.g, out.g);
  EXPECT_EQ(err(out), 0.0);
}

TEST_P(GpuKernelTest, Linear) {
  struct Case { int64_t m, n, k; bool f32_out; };
  const std::vector<Case> cases = {
      {1, 576, 576, false},    {7, 1000, 576, false},   {37, 1536, 576, false},
      {130, 1152, 960, false}, {64, 4096, 4096, false}, {1, 49152, 576, true},
      {5, 32000, 1024, true},  {3, 1000, 100, true}};
  for (const Case& c : cases) {
    Pair x = make({c.m, c.k}), w = make({c.n, c.k});
    Pair out = make({c.m, c.n}, c.f32_out ? DType::kF32 : dtype_);
    fill(x);
    fill(w, 1.0f / std::sqrt(static_cast<float>(c.k)) * 2.0f, 0.01f / std::sqrt(static_cast<float>(c.k)));
    poison(out);
    cpu_.linear(x.c, w.c, out.c);
    gpu_->linear(x.g, w.g, out.g);
    const double e = err(out);
    EXPECT_LT(e, c.f32_out ? tol_.f32_out : tol_.op) << c.m << "x" << c.n << "x" << c.k;
    std::printf("[ metric ] linear %s m=%ld n=%ld k=%ld out=%s rel_err %.2e\n", dtype_label(),
                long(c.m), long(c.n), long(c.k), c.f32_out ? "f32" : dtype_label(), e);
  }
}

struct AttnCase {
  int32_t head_dim, num_heads, num_kv_heads;
  std::vector<std::pair<int32_t, int32_t>> seqs;  // {cached before, new}
  const char* what;
};

std::vector<AttnCase> attention_cases() {
  // Mixed: fresh prefill, a chunk after cached context, decodes at page boundaries (15, 16, 31,
  // 32 cached), a one-token sequence, a chunk crossing pages.
  const std::vector<std::pair<int32_t, int32_t>> mixed = {{0, 37}, {50, 23}, {128, 1}, {0, 1},
                                                          {15, 1}, {16, 1}, {31, 33}, {32, 1}};
  // Decode: split-KV plans of 1 to many splits (4000 keys), contexts that are not multiples of
  // a split or a page.
  const std::vector<std::pair<int32_t, int32_t>> decode = {{1000, 1}, {517, 1}, {1, 1}, {255, 1},
                                                           {3999, 1}};
  // Prefill: several 128-query tiles (300), a chunk after 200 cached tokens, a 3-token prompt,
  // and a chunk of several query tiles after 100 cached tokens (key tiles offset from the query
  // tiles; on H100 each CTA takes two query tiles at up to 1024 queries).
  const std::vector<std::pair<int32_t, int32_t>> prefill = {{0, 300}, {200, 77}, {0, 3}, {0, 129},
                                                            {100, 400}};
  // One sequence decoding alone over a long context: the most splits (over 32 with 4 KV heads),
  // so the combine runs more than one pass of its batched loads.
  const std::vector<std::pair<int32_t, int32_t>> decode_alone = {{8000, 1}};
  // Longer prefill: over 1024 queries (H100: one query tile per CTA), chunked and not.
  const std::vector<std::pair<int32_t, int32_t>> long_prefill = {{0, 1100}, {300, 1030}, {0, 5}};
  std::vector<AttnCase> cases;
  for (int32_t d : {64, 128}) {
    for (auto [h, kv] : std::vector<std::pair<int32_t, int32_t>>{{8, 8}, {16, 4}, {32, 4}, {24, 8}}) {
      cases.push_back({d, h, kv, mixed, "mixed"});
      cases.push_back({d, h, kv, decode, "decode"});
      cases.push_back({d, h, kv, decode_alone, "decode-alone"});
      cases.push_back({d, h, kv, prefill, "prefill"});
      cases.push_back({d, h, kv, long_prefill, "long-prefill"});
    }
  }
  // d = 256 (Gemma 2/3; on H100 its own wgmma prefill kernel: 128-query tiles over 64-key tiles)
  // at GQA groups 1, 2 and 8: query and key counts that are not multiples of the tiles, chunks
  // after cached context, more than one key tile per query tile and stage reuse (long prefill).
  for (auto [h, kv] : std::vector<std::pair<int32_t, int32_t>>{{8, 8}, {16, 8}, {16, 2}}) {
    cases.push_back({256, h, kv, mixed, "mixed"});
    cases.push_back({256, h, kv, prefill, "prefill"});
    cases.push_back({256, h, kv, long_prefill, "long-prefill"});
  }
  // Head dims and GQA groups the fast kernels leave to the generic kernel.
  cases.push_back({80, 8, 8, mixed, "generic-d80"});
  cases.push_back({64, 32, 2, mixed, "generic-group16"});
  return cases;
}

// The batch of an attention case over a paged cache, random qkv (|x| < 2), k (|x| < k_max) and v,
// and the step begun on both backends.
struct AttnInputs {
  AttentionShape shape;
  StepBatch batch;
  Pair qkv, k, v;
};

AttnInputs GpuKernelTest::attention_inputs(const AttnCase& c, float k_max) {
  constexpr int32_t kBlockSize = 16, kNumBlocks = 512;
  AttnInputs in;
  in.shape = AttentionShape{c.num_heads, c.num_kv_heads, c.head_dim};
  in.batch = make_batch(c.seqs, kBlockSize, kNumBlocks, 1000, rng_);
  in.qkv = make({in.batch.num_tokens(), in.shape.qkv_width()});
  in.k = make({kNumBlocks, kBlockSize, c.num_kv_heads, c.head_dim});
  in.v = make({kNumBlocks, kBlockSize, c.num_kv_heads, c.head_dim});
  fill(in.qkv, 2.0f);
  fill(in.k, k_max);
  fill(in.v);
  cpu_.begin_step(in.batch);
  gpu_->begin_step(in.batch);
  return in;
}

TEST_P(GpuKernelTest, RopeAndCache) {
  for (const RopeStyle style : {RopeStyle::kRotateHalf, RopeStyle::kInterleaved}) {
    const char* style_name = style == RopeStyle::kInterleaved ? "interleaved" : "rotate_half";
    for (const AttnCase& c : attention_cases()) {
      AttnInputs in = attention_inputs(c, 1.0f);
      AttentionShape shape = in.shape;
      shape.rope_style = style;
      Pair &qkv = in.qkv, &k = in.k, &v = in.v;
      Pair freq = make({c.head_dim / 2}, DType::kF32);
      set(freq, inv_freq(c.head_dim));
      cpu_.rope_and_cache(qkv.c, freq.c, shape, {}, KvLayerView{k.c, v.c});
      gpu_->rope_and_cache(qkv.g, freq.g, shape, {}, KvLayerView{k.g, v.g});
      const double eq = err(qkv), ek = err(k), ev = err(v);
      EXPECT_LT(eq, tol_.op) << style_name << " " << c.what << " d" << c.head_dim << " h" << c.num_heads << "/" << c.num_kv_heads;
      EXPECT_LT(ek, tol_.op) << style_name << " " << c.what << " d" << c.head_dim << " h" << c.num_heads << "/" << c.num_kv_heads;
      EXPECT_EQ(ev, 0.0) << c.what << " d" << c.head_dim;  // v is copied, not rotated
      std::printf("[ metric ] rope_and_cache %s %s %s d=%d heads=%d/%d rel_err qkv %.2e k %.2e v %.2e\n",
                  dtype_label(), style_name, c.what, c.head_dim, c.num_heads, c.num_kv_heads, eq, ek, ev);
    }
  }
}

// The prologue of rope_and_cache: q/k/v bias (Qwen2), then q and k head norms (Qwen3, Gemma 3,
// with Gemma's weight offset), on the head dims the families use, and 160 and 192, whose heads
// (three warps' worth of pairs) do not divide the kernel's block.
TEST_P(GpuKernelTest, RopeAndCachePrologue) {
  for (const int32_t d : {64, 128, 160, 192, 256}) {
    const AttnCase c{d, 8, 2, {{0, 9}, {17, 1}, {3, 5}}, "prologue"};
    AttnInputs in = attention_inputs(c, 1.0f);
    Pair freq = make({d / 2}, DType::kF32);
    set(freq, inv_freq(d));
    Pair bias = make({in.shape.qkv_width()}), q_norm = make({d}), k_norm = make({d});
    fill(bias, 0.5f);
    fill(q_norm, 1.5f, 0.5f);
    fill(k_norm, 1.5f, 0.5f);
    for (const float offset : {0.0f, 1.0f}) {
      AttnInputs fresh = attention_inputs(c, 1.0f);
      const QkvPrologue pc{&bias.c, &q_norm.c, &k_norm.c, NormSpec{1e-6f, offset}};
      const QkvPrologue pg{&bias.g, &q_norm.g, &k_norm.g, NormSpec{1e-6f, offset}};
      cpu_.rope_and_cache(fresh.qkv.c, freq.c, fresh.shape, pc, KvLayerView{fresh.k.c, fresh.v.c});
      gpu_->rope_and_cache(fresh.qkv.g, freq.g, fresh.shape, pg, KvLayerView{fresh.k.g, fresh.v.g});
      const double eq = err(fresh.qkv), ek = err(fresh.k), ev = err(fresh.v);
      EXPECT_LT(eq, tol_.op) << "d" << d << " offset " << offset;
      EXPECT_LT(ek, tol_.op) << "d" << d << " offset " << offset;
      EXPECT_LT(ev, tol_.op) << "d" << d << " offset " << offset;
      std::printf("[ metric ] rope_prologue %s d=%d offset %.0f rel_err qkv %.2e k %.2e v %.2e\n",
                  dtype_label(), d, offset, eq, ek, ev);
    }
  }
}

// Soft-capping and sliding windows (Gemma 2/3, Mistral, Qwen2), with and without each other, on
// head dims 64, 128 and 256 (the fast kernels on CUDA: wgmma / mma.sync prefill, split-KV
// decode) and 96 (the generic kernel), GQA groups 2 and 8, over three batches: mixed prefill +
// decode longer than a 32-key window; prefills of several query tiles (one a chunk after cached
// context) under a 200-key window, whose later query tiles skip whole key tiles; and decodes of
// up to 4096 keys under a 1000-key window (several splits over the window, one sequence shorter
// than it). The plain spec (no cap, no window) runs too: d = 256 takes the fast kernels now.
TEST_P(GpuKernelTest, AttentionSoftCapAndWindow) {
#if defined(TESSERA_CUDA)
  for (const int32_t d : {64, 128, 256}) {
    EXPECT_TRUE(gpu::prefill_kernel_supported(d)) << d;
    EXPECT_TRUE(gpu::decode_kernel_supported(d, 8)) << d;
  }
#endif
  struct Batch {
    const char* what;
    std::vector<std::pair<int32_t, int32_t>> seqs;
    int32_t window;
  };
  const std::vector<Batch> batches = {
      {"mixed", {{0, 70}, {100, 1}, {30, 12}, {600, 1}}, 32},
      {"prefill", {{0, 700}, {300, 260}, {0, 3}}, 200},
      {"decode", {{3000, 1}, {517, 1}, {1, 1}, {4095, 1}}, 1000}};
  struct Spec {
    bool cap, window;
  };
  for (const int32_t d : {64, 96, 128, 256}) {
    for (const auto& [h, kv] : std::vector<std::pair<int32_t, int32_t>>{{8, 4}, {16, 2}}) {
      for (const Batch& batch : batches) {
        for (const Spec spec : {Spec{false, false}, Spec{true, false}, Spec{false, true}, Spec{true, true}}) {
          const AttnCase c{d, h, kv, batch.seqs, batch.what};
          AttnInputs in = attention_inputs(c, 2.0f);
          Pair out = make({in.batch.num_tokens(), static_cast<int64_t>(h) * d});
          poison(out);
          // A cap of 2 bites on these scores (|scale q.k| up to ~3); Gemma 2's 50 barely would.
          const float softcap = spec.cap ? 2.0f : 0.0f;
          const int32_t window = spec.window ? batch.window : 0;
          const AttentionSpec as{1.0f / std::sqrt(static_cast<float>(d)), softcap, window};
          cpu_.attention(in.qkv.c, KvLayerView{in.k.c, in.v.c}, in.shape, as, out.c);
          gpu_->attention(in.qkv.g, KvLayerView{in.k.g, in.v.g}, in.shape, as, out.g);
          const double e = err(out);
          EXPECT_LT(e, tol_.attention) << batch.what << " d" << d << " heads " << h << "/" << kv
                                       << " softcap " << softcap << " window " << window;
          std::printf("[ metric ] attention_capped %s %s d=%d heads=%d/%d softcap %.0f window %d rel_err %.2e\n",
                      dtype_label(), batch.what, d, h, kv, softcap, window, e);
        }
      }
    }
  }
}

TEST_P(GpuKernelTest, Attention) {
  // The decode-alone case takes the combine through more than one pass of its batched loads (8
  // loads x 4 rows = 32 splits a pass at d=128) where the plan splits that much: on GPUs of 64+
  // multiprocessors (H100: 63 splits with 4 KV heads). Checked, so the case cannot quietly stop
  // covering it.
  if (gpu_->multiprocessors() >= 64) {
    EXPECT_GT(gpu::plan_decode_splits(1, 4, 8001, gpu_->multiprocessors()).num_splits, 32);
  }
  for (const AttnCase& c : attention_cases()) {
    AttnInputs in = attention_inputs(c, 2.0f);
    const AttentionShape shape = in.shape;
    Pair &qkv = in.qkv, &k = in.k, &v = in.v;
    const StepBatch& b = in.batch;
    Pair out = make({b.num_tokens(), static_cast<int64_t>(c.num_heads) * c.head_dim});
    poison(out);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    cpu_.attention(qkv.c, KvLayerView{k.c, v.c}, shape, AttentionSpec{scale}, out.c);
    gpu_->attention(qkv.g, KvLayerView{k.g, v.g}, shape, AttentionSpec{scale}, out.g);
    const double e = err(out);
    EXPECT_LT(e, tol_.attention) << c.what << " d" << c.head_dim << " h" << c.num_heads << "/" << c.num_kv_heads;
    std::printf("[ metric ] attention %s %s d=%d heads=%d/%d tokens=%d rel_err %.2e\n",
                dtype_label(), c.what, c.head_dim, c.num_heads, c.num_kv_heads, b.num_tokens(), e);
  }
}

// An FP8 KV cache (kv_cache_dtype: fp8): a backend of its own, since prepare_kv_cache turns every
// attention of a backend to FP8 caches. Skips on GPUs without FP8.
class GpuFp8KvTest : public GpuKernelTest {
 protected:
  void SetUp() override {
    if (GpuBackend::device_count() == 0) GTEST_SKIP() << "no GPU visible";
    GpuBackend* backend = suite_gpu_backend<GpuFp8KvTest>(GetParam());
    ASSERT_NE(backend, nullptr);
    if (!backend->supports(Quantization::kFp8).ok()) GTEST_SKIP() << "no FP8 on this GPU";
    gpu_ = backend;
    dtype_ = GetParam();
    tol_ = tolerances(dtype_);
  }

  // e4m3fn codes of a [num_blocks, block_size, kv heads, head_dim] pool on the GPU.
  struct Codes {
    DevicePtr k, v;
    KvLayerView view;
  };
  Codes upload_codes(const std::vector<uint8_t>& k, const std::vector<uint8_t>& v,
                     const Tensor& shape_of, float k_scale, float v_scale) {
    Codes c{device_upload(k), device_upload(v), {}};
    const std::initializer_list<int64_t> dims = {shape_of.dim(0), shape_of.dim(1), shape_of.dim(2),
                                                 shape_of.dim(3)};
    c.view = KvLayerView{Tensor(c.k.get(), DType::kF8_E4M3, dims),
                         Tensor(c.v.get(), DType::kF8_E4M3, dims), k_scale, v_scale};
    return c;
  }
  std::vector<uint8_t> download(const DevicePtr& p, size_t bytes) {
    std::vector<uint8_t> out(bytes);
    EXPECT_TRUE(gpu_->synchronize().ok());
    EXPECT_EQ(gpuMemcpy(out.data(), p.get(), bytes, gpuMemcpyDeviceToHost), gpuSuccess);
    return out;
  }
  // The longest context of `c`'s sequences: what the cache is prepared for, so that a step whose
  // prefills do not fit the widened copy together runs in parts.
  static int32_t max_context(const AttnCase& c) {
    int32_t most = 1;
    for (auto [before, added] : c.seqs) most = std::max(most, before + added);
    return most;
  }
};

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuFp8KvTest, ::testing::Values(DType::kBF16, DType::kF16),
                         dtype_param_name);

// RoPE + cache write into FP8 codes: each code is the host encoder's of the CPU's fp32 k or v over
// the layer's scale, but where the GPU's fp32 RoPE of the same 16-bit inputs rounds across a code
// boundary (then the next code); the calibration amax is the largest |k| and |v| written.
TEST_P(GpuFp8KvTest, RopeAndCacheWritesCodesAndAmax) {
  for (const AttnCase& c : attention_cases()) {
    if (std::string_view(c.what) != "mixed") continue;
    ASSERT_TRUE(gpu_->prepare_kv_cache(DType::kF8_E4M3, AttentionShape{c.num_heads, c.num_kv_heads,
                                                                      c.head_dim},
                                       16, max_context(c))
                    .ok());
    AttnInputs in = attention_inputs(c, 1.0f);
    Pair freq = make({c.head_dim / 2}, DType::kF32);
    set(freq, inv_freq(c.head_dim));
    const size_t n = static_cast<size_t>(in.k.c.numel());
    const float k_scale = 2.0f / 448.0f, v_scale = 1.0f / 448.0f;
    Codes codes = upload_codes(std::vector<uint8_t>(n, 0), std::vector<uint8_t>(n, 0), in.k.c,
                               k_scale, v_scale);
    DevicePtr amax = device_upload(std::vector<float>{0.0f, 0.0f});
    codes.view.amax = static_cast<float*>(amax.get());
    cpu_.rope_and_cache(in.qkv.c, freq.c, in.shape, {}, KvLayerView{in.k.c, in.v.c});
    gpu_->rope_and_cache(in.qkv.g, freq.g, in.shape, {}, codes.view);
    const std::vector<uint8_t> gk = download(codes.k, n), gv = download(codes.v, n);
    float amax_host[2];
    ASSERT_EQ(gpuMemcpy(amax_host, amax.get(), sizeof(amax_host), gpuMemcpyDeviceToHost), gpuSuccess);
    int64_t written = 0, exact = 0, off_by_one = 0, wrong = 0;
    float want_amax[2] = {0.0f, 0.0f};
    const int64_t row = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;
    for (const int32_t slot : in.batch.slot_mapping) {
      for (int64_t i = 0; i < row; ++i) {
        const size_t e = static_cast<size_t>(slot * row + i);
        for (const bool is_v : {false, true}) {
          const float x = (is_v ? in.v.c : in.k.c).as<float>()[e];
          want_amax[is_v] = std::max(want_amax[is_v], std::fabs(x));
          const uint8_t want = float_to_fp8_e4m3fn(x / (is_v ? v_scale : k_scale));
          const uint8_t got = (is_v ? gv : gk)[e];
          ++written;
          if (got == want) {
            ++exact;
          } else if (std::abs(static_cast<int>(got & 0x7f) - static_cast<int>(want & 0x7f)) == 1 &&
                     (got & 0x80) == (want & 0x80)) {
            ++off_by_one;
          } else {
            ++wrong;
          }
        }
      }
    }
    EXPECT_EQ(wrong, 0) << c.what << " d" << c.head_dim;
    EXPECT_GT(static_cast<double>(exact), 0.99 * static_cast<double>(written)) << c.what;
    for (int i = 0; i < 2; ++i) {
      EXPECT_NEAR(amax_host[i], want_amax[i], 1e-2 * want_amax[i]) << (i ? "v" : "k") << " amax";
    }
    std::printf("[ metric ] rope_and_cache fp8 %s d=%d heads=%d/%d codes %lld: exact %lld, next "
                "code %lld\n",
                dtype_label(), c.head_dim, c.num_heads, c.num_kv_heads,
                static_cast<long long>(written), static_cast<long long>(exact),
                static_cast<long long>(off_by_one));
  }
}

// Attention over FP8 codes (decode reading them directly, prefill through the widened 16-bit
// copy, in parts where the prefills' contexts do not fit it together) against the CPU's fp32
// attention over the codes' values (code x scale): every batch of attention_cases() at each head
// dim with one GQA group of 4 (d = 256: 8), the other groups being the 16-bit kernels' own (the
// CPU reference takes most of the time: ~80 s a dtype over every case).
TEST_P(GpuFp8KvTest, AttentionMatchesTheCpuOverTheCodesValues) {
  for (const AttnCase& c : attention_cases()) {
    const bool one_group = c.head_dim == 256 ? c.num_heads == 16 && c.num_kv_heads == 2
                                             : c.num_heads == 16 && c.num_kv_heads == 4;
    if (!one_group) continue;
    const AttentionShape shape{c.num_heads, c.num_kv_heads, c.head_dim};
    ASSERT_TRUE(gpu_->prepare_kv_cache(DType::kF8_E4M3, shape, 16, max_context(c)).ok());
    AttnInputs in = attention_inputs(c, 2.0f);
    const size_t n = static_cast<size_t>(in.k.c.numel());
    const float k_scale = 2.5f / 448.0f, v_scale = 1.25f / 448.0f;
    std::vector<uint8_t> k(n), v(n);
    std::vector<float> kf(n), vf(n);
    for (size_t i = 0; i < n; ++i) {
      k[i] = float_to_fp8_e4m3fn(in.k.c.as<float>()[i] / k_scale);
      v[i] = float_to_fp8_e4m3fn(in.v.c.as<float>()[i] / v_scale);
      kf[i] = fp8_e4m3fn_to_float(k[i]) * k_scale;
      vf[i] = fp8_e4m3fn_to_float(v[i]) * v_scale;
    }
    set(in.k, kf);
    set(in.v, vf);
    Codes codes = upload_codes(k, v, in.k.c, k_scale, v_scale);
    Pair out = make({in.batch.num_tokens(), static_cast<int64_t>(c.num_heads) * c.head_dim});
    poison(out);
    for (const float softcap : {0.0f, 2.0f}) {
      const AttentionSpec spec{1.0f / std::sqrt(static_cast<float>(c.head_dim)), softcap,
                               softcap > 0.0f ? 100 : 0};
      cpu_.attention(in.qkv.c, KvLayerView{in.k.c, in.v.c}, shape, spec, out.c);
      gpu_->attention(in.qkv.g, codes.view, shape, spec, out.g);
      const double e = err(out);
      EXPECT_LT(e, tol_.attention) << c.what << " d" << c.head_dim << " h" << c.num_heads << "/"
                                   << c.num_kv_heads << " softcap " << softcap;
      std::printf("[ metric ] attention fp8 kv %s %s d=%d heads=%d/%d softcap %.0f rel_err %.2e\n",
                  dtype_label(), c.what, c.head_dim, c.num_heads, c.num_kv_heads, softcap, e);
    }
  }
}

// What the backend refuses: an FP8 cache for a head dim the decode kernel lacks, and attention
// over a cache of another shape than the one prepared (the widened copy is sized for it).
TEST_P(GpuFp8KvTest, RefusesShapesItWasNotPreparedFor) {
  const absl::Status d96 =
      gpu_->prepare_kv_cache(DType::kF8_E4M3, AttentionShape{8, 2, 96}, 16, 1024);
  EXPECT_FALSE(d96.ok());
  EXPECT_NE(std::string(d96.message()).find("head_dim 96"), std::string::npos) << d96;
  const AttnCase c{128, 8, 2, {{0, 20}, {40, 1}}, "small"};
  ASSERT_TRUE(gpu_->prepare_kv_cache(DType::kF8_E4M3, AttentionShape{8, 2, 64}, 16, 64).ok());
  AttnInputs in = attention_inputs(c, 1.0f);
  const size_t n = static_cast<size_t>(in.k.c.numel());
  Codes codes = upload_codes(std::vector<uint8_t>(n, 0), std::vector<uint8_t>(n, 0), in.k.c,
                             1.0f, 1.0f);
  Pair out = make({in.batch.num_tokens(), 8 * 128});
  gpu_->attention(in.qkv.g, codes.view, in.shape, AttentionSpec{0.1f}, out.g);
  const absl::Status s = gpu_->synchronize();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("not the one prepared"), std::string::npos) << s;
}

// Decode attention launched again and again with nothing in between, on two inputs in turn:
// where launches overlap (kernels/launch.h) each launch's split kernel rewrites the partials the
// previous launch's combine is reading, and each combine reads what its split kernel has just
// written -- both safe only through their waits, and a read of the other input's partials would
// show. Every launch must give, bit for bit, what the same input gives with the stream drained.
// The plans: 60+ splits of one 8000-key sequence (H100), and the decode batch's 1-to-many.
TEST_P(GpuKernelTest, DecodeAttentionBackToBackRepeatsExactly) {
  constexpr int kRepeats = 24;
  for (const AttnCase& c : attention_cases()) {
    if (std::string_view(c.what) != "decode-alone" && std::string_view(c.what) != "decode") continue;
    AttnInputs in = attention_inputs(c, 2.0f);
    const std::string what = std::string(c.what) + " d" + std::to_string(c.head_dim) + " h" +
                             std::to_string(c.num_heads) + "/" + std::to_string(c.num_kv_heads);
    const StepBatch& b = in.batch;
    Pair other_qkv = make({b.num_tokens(), in.shape.qkv_width()});
    fill(other_qkv, 2.0f);
    const Tensor inputs[2] = {in.qkv.g, other_qkv.g};
    auto out_tensor = [&] {
      Pair out = make({b.num_tokens(), static_cast<int64_t>(c.num_heads) * c.head_dim});
      poison(out);
      return out;
    };
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    std::vector<float> drained[2];
    for (int i = 0; i < 2; ++i) {
      Pair out = out_tensor();
      gpu_->attention(inputs[i], KvLayerView{in.k.g, in.v.g}, in.shape, AttentionSpec{scale}, out.g);
      ASSERT_TRUE(gpu_->synchronize().ok());
      drained[i] = gpu_values(out);
      ASSERT_TRUE(std::none_of(drained[i].begin(), drained[i].end(), [](float f) { return std::isnan(f); }))
          << what;
    }
    ASSERT_NE(drained[0], drained[1]) << what << ": the two inputs cannot tell their results apart";
    std::vector<Pair> outs;
    for (int i = 0; i < kRepeats; ++i) outs.push_back(out_tensor());
    for (int i = 0; i < kRepeats; ++i) {
      gpu_->attention(inputs[i % 2], KvLayerView{in.k.g, in.v.g}, in.shape, AttentionSpec{scale}, outs[i].g);
    }
    ASSERT_TRUE(gpu_->synchronize().ok());
    for (int i = 0; i < kRepeats; ++i) {
      EXPECT_EQ(gpu_values(outs[i]), drained[i % 2]) << "launch " << i << " of " << what;
    }
  }
}

TEST_P(GpuKernelTest, ErrorsAreStatuses) {
  auto huge = gpu_->allocate(size_t{1} << 50);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(huge.status().ToString().find("bytes free"), std::string::npos) << huge.status().ToString();
  std::printf("[ metric ] oom message: %s\n", huge.status().ToString().c_str());
  // A dtype mismatch is recorded and surfaces at synchronize, once.
  Pair x = make({2, 64}, DType::kF32), w = make({64}), out = make({2, 64});
  gpu_->rms_norm(x.g, w.g, NormSpec{1e-5f}, out.g);
  const absl::Status s = gpu_->synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_TRUE(gpu_->synchronize().ok());
}

// --- end to end: a random-weight Llama on both backends ---------------------------------------

class RandomLlama final : public WeightSource {
 public:
  // Weights exactly representable in `dtype` (the GPU's), so that both backends hold the same.
  explicit RandomLlama(DType dtype) : dtype_(dtype) {
    ModelConfig& c = config_;
    c.architecture = "llama";
    c.name = "random-llama";
    c.vocab_size = 512;
    c.hidden_size = 256;
    c.intermediate_size = 640;
    c.num_layers = 3;
    c.num_heads = 4;
    c.num_kv_heads = 2;
    c.head_dim = 64;
    c.max_position_embeddings = 1024;
    c.rms_norm_eps = 1e-5f;
    c.rope_theta = 10000.0f;
    c.tie_word_embeddings = false;
    const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
    const int64_t in = c.intermediate_size;
    add("model.embed_tokens.weight", {c.vocab_size, h}, 1.0f, false);
    add("model.norm.weight", {h}, 0.0f, true);
    add("lm_head.weight", {c.vocab_size, h}, 3.0f / std::sqrt(float(h)), false);
    for (int64_t i = 0; i < c.num_layers; ++i) {
      auto n = [&](const char* s) { return str_cat("model.layers.", i, ".", s); };
      add(n("input_layernorm.weight"), {h}, 0.0f, true);
      add(n("post_attention_layernorm.weight"), {h}, 0.0f, true);
      add(n("self_attn.q_proj.weight"), {q, h}, 2.0f / std::sqrt(float(h)), false);
      add(n("self_attn.k_proj.weight"), {kv, h}, 2.0f / std::sqrt(float(h)), false);
      add(n("self_attn.v_proj.weight"), {kv, h}, 1.0f / std::sqrt(float(h)), false);
      add(n("self_attn.o_proj.weight"), {h, q}, 1.0f / std::sqrt(float(q)), false);
      add(n("mlp.gate_proj.weight"), {in, h}, 1.0f / std::sqrt(float(h)), false);
      add(n("mlp.up_proj.weight"), {in, h}, 1.0f / std::sqrt(float(h)), false);
      add(n("mlp.down_proj.weight"), {h, in}, 1.0f / std::sqrt(float(in)), false);
    }
  }

  const ModelConfig& config() const override { return config_; }
  const std::string& path() const override { return path_; }
  std::vector<TensorInfo> tensors() const override {
    std::vector<TensorInfo> out;
    for (const auto& [name, t] : tensors_) out.push_back(t.info);
    return out;
  }
  bool has(std::string_view name) const override { return tensors_.count(std::string(name)) > 0; }
  absl::StatusOr<RawTensor> raw(std::string_view name) const override {
    auto it = tensors_.find(std::string(name));
    if (it == tensors_.end()) return absl::NotFoundError(str_cat("no tensor ", name));
    RawTensor r;
    r.info = it->second.info;
    r.data = reinterpret_cast<const uint8_t*>(it->second.values.data());
    r.nbytes = it->second.values.size() * sizeof(float);
    return r;
  }
  absl::Status read_f32(std::string_view name, std::span<const int64_t> shape,
                        std::span<float> out) const override {
    auto it = tensors_.find(std::string(name));
    if (it == tensors_.end()) return absl::NotFoundError(str_cat("no tensor ", name));
    const auto& t = it->second;
    if (!std::equal(shape.begin(), shape.end(), t.info.shape.begin(), t.info.shape.end()) ||
        out.size() != t.values.size()) {
      return absl::InvalidArgumentError(str_cat("shape mismatch for ", name));
    }
    std::copy(t.values.begin(), t.values.end(), out.begin());
    return absl::OkStatus();
  }

 private:
  struct Stored {
    TensorInfo info;
    std::vector<float> values;
  };
  // Uniform values of standard deviation `std` (norm weights: 1 +- 0.2), rounded to dtype_.
  void add(const std::string& name, std::vector<int64_t> shape, float std, bool norm) {
    Stored s;
    s.info = TensorInfo{name, DType::kF32, shape};
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    s.values.resize(n);
    const float a = norm ? 0.2f : std * std::sqrt(3.0f);
    std::uniform_real_distribution<float> u(-a, a);
    for (float& x : s.values) x = round_to(dtype_, norm ? 1.0f + u(rng_) : u(rng_));
    tensors_.emplace(name, std::move(s));
  }

  DType dtype_;
  ModelConfig config_;
  std::string path_ = "<random llama>";
  std::map<std::string, Stored> tensors_;
  std::mt19937 rng_{42};
};

TEST_P(GpuKernelTest, LlamaEndToEndMatchesCpu) {
  RandomLlama weights(dtype_);
  const ForwardLimits limits{64, 4};
  const int32_t layers = static_cast<int32_t>(weights.config().num_layers);
  auto cpu_model = load_llama(weights, {LayerSegment{&cpu_, 0, layers}}, limits);
  ASSERT_TRUE(cpu_model.ok()) << cpu_model.status().ToString();
  auto gpu_model = load_llama(weights, {LayerSegment{gpu_, 0, layers}}, limits);
  ASSERT_TRUE(gpu_model.ok()) << gpu_model.status().ToString();
  const int32_t block_size = 16, num_blocks = 32;
  auto cpu_cache = KvCache::create(cpu_, cpu_model->family->kv_cache_shape(num_blocks, block_size));
  auto gpu_cache = KvCache::create(*gpu_, gpu_model->family->kv_cache_shape(num_blocks, block_size));
  ASSERT_TRUE(cpu_cache.ok() && gpu_cache.ok());
  const int64_t vocab = weights.config().vocab_size;

  // Two sequences, prompts of 21 and 9 tokens, prefilled together, then 16 decode steps of both
  // in one batch. Both backends are fed the CPU's greedy tokens (teacher forcing), so that one
  // near-tie cannot derail the rest of the comparison.
  std::vector<std::vector<int32_t>> tokens(2);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab) - 1);
  for (int i = 0; i < 21; ++i) tokens[0].push_back(tok(rng_));
  for (int i = 0; i < 9; ++i) tokens[1].push_back(tok(rng_));
  // Block tables: sequence 0 on odd blocks from the top, sequence 1 on even ones.
  auto slot = [&](int s, int32_t pos) {
    const int32_t block = s == 0 ? num_blocks - 1 - 2 * (pos / block_size) : 2 * (pos / block_size);
    return block * block_size + pos % block_size;
  };
  const int32_t max_blocks = 4;
  std::vector<int32_t> cached(2, 0);
  double worst = 0.0;
  int mismatches = 0, near_ties = 0;
  for (int step = 0; step <= 16; ++step) {
    StepBatch b;
    b.max_blocks = max_blocks;
    b.query_start.push_back(0);
    for (int s = 0; s < 2; ++s) {
      const int32_t total = static_cast<int32_t>(tokens[s].size());
      for (int32_t p = cached[s]; p < total; ++p) {
        b.token_ids.push_back(tokens[s][p]);
        b.positions.push_back(p);
        b.slot_mapping.push_back(slot(s, p));
      }
      b.query_start.push_back(b.num_tokens());
      b.context_len.push_back(total);
      b.logits_rows.push_back(b.num_tokens() - 1);
      for (int32_t j = 0; j < max_blocks; ++j) {
        b.block_tables.push_back(j * block_size < total ? slot(s, j * block_size) / block_size : -1);
      }
      cached[s] = total;
    }
    std::vector<float> lc(2 * vocab), lg(2 * vocab, std::numeric_limits<float>::quiet_NaN());
    ASSERT_TRUE(cpu_model->runner->forward(b, **cpu_cache, lc).ok());
    const absl::Status gs = gpu_model->runner->forward(b, **gpu_cache, lg);
    ASSERT_TRUE(gs.ok()) << gs.ToString();
    for (int s = 0; s < 2; ++s) {
      std::vector<float> c(lc.begin() + s * vocab, lc.begin() + (s + 1) * vocab);
      std::vector<float> g(lg.begin() + s * vocab, lg.begin() + (s + 1) * vocab);
      const double e = rel_err(c, g);
      worst = std::max(worst, e);
      EXPECT_LT(e, tol_.logits) << "step " << step << " seq " << s;
      const auto cpu_best = std::max_element(c.begin(), c.end()) - c.begin();
      const auto gpu_best = std::max_element(g.begin(), g.end()) - g.begin();
      std::vector<float> sorted = c;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      const float margin = sorted[0] - sorted[1];
      if (cpu_best != gpu_best) {
        ++mismatches;
        if (margin < tol_.greedy_tie) ++near_ties;
        EXPECT_LT(margin, tol_.greedy_tie)
            << "greedy token differs at step " << step << " seq " << s
            << " although the CPU's top-2 margin is " << margin;
      }
      tokens[s].push_back(static_cast<int32_t>(cpu_best));
    }
  }
  std::printf("[ metric ] llama_e2e %s layers=3 hidden=256 gqa=2 steps=17 seqs=2 "
              "worst_logits_rel_err %.2e greedy_mismatches %d (near ties %d) of 34\n",
              dtype_label(), worst, mismatches, near_ties);
}

TEST_P(GpuKernelTest, DecodeGraphsMatchDirectSteps) {
  // The same weights twice on this GPU: one model launches every op, the other replays decode
  // steps as graphs. Decode steps cycle over three sets of sequences (buckets 8, 4 and 1), so each
  // graph runs directly once, is recorded, then replayed with new positions, slots and tables.
  RandomLlama weights(dtype_);
  const ForwardLimits limits{256, 8};
  const int32_t layers = static_cast<int32_t>(weights.config().num_layers);
  ExecutionOptions direct_options;
  direct_options.decode_graphs = DecodeGraphs::kOff;
  auto direct = load_llama(weights, {LayerSegment{gpu_, 0, layers}}, limits, direct_options);
  auto graphed = load_llama(weights, {LayerSegment{gpu_, 0, layers}}, limits, ExecutionOptions{});
  ASSERT_TRUE(direct.ok() && graphed.ok());
  EXPECT_EQ(direct->runner->largest_graph_bucket(), 0);
  ASSERT_EQ(graphed->runner->largest_graph_bucket(), 8);
  const int32_t block_size = 16, blocks_per_seq = 8, seqs = 6;
  auto direct_cache = KvCache::create(*gpu_, direct->family->kv_cache_shape(seqs * blocks_per_seq, block_size));
  auto graphed_cache = KvCache::create(*gpu_, graphed->family->kv_cache_shape(seqs * blocks_per_seq, block_size));
  ASSERT_TRUE(direct_cache.ok() && graphed_cache.ok());
  const int64_t vocab = weights.config().vocab_size;

  std::vector<std::vector<int32_t>> tokens(seqs);
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(vocab) - 1);
  const int32_t prompt_len[seqs] = {7, 19, 33, 4, 12, 25};
  for (int s = 0; s < seqs; ++s) {
    for (int i = 0; i < prompt_len[s]; ++i) tokens[s].push_back(tok(rng_));
  }
  std::vector<int32_t> cached(seqs, 0);
  // Sequence s owns blocks [8s, 8s + 8), in reverse order so that tables are not the identity.
  auto block_of = [&](int s, int32_t j) { return s * blocks_per_seq + blocks_per_seq - 1 - j; };
  auto step_of = [&](const std::vector<int>& active) {
    StepBatch b;
    b.max_blocks = blocks_per_seq;
    b.query_start.push_back(0);
    for (int s : active) {
      const int32_t total = static_cast<int32_t>(tokens[s].size());
      for (int32_t p = cached[s]; p < total; ++p) {
        b.token_ids.push_back(tokens[s][p]);
        b.positions.push_back(p);
        b.slot_mapping.push_back(block_of(s, p / block_size) * block_size + p % block_size);
      }
      b.query_start.push_back(b.num_tokens());
      b.context_len.push_back(total);
      b.logits_rows.push_back(b.num_tokens() - 1);
      for (int32_t j = 0; j < blocks_per_seq; ++j) {
        b.block_tables.push_back(j * block_size < total ? block_of(s, j) : -1);
      }
      cached[s] = total;
    }
    return b;
  };
  const std::vector<int> all = {0, 1, 2, 3, 4, 5}, some = {0, 2, 4}, one = {1};
  const std::vector<std::vector<int>> schedule = {all, all, some, one, all, some, one, all,
                                                  some, one, all, some, one, all, one};
  const uint64_t recorded_before = gpu_->graphs_recorded(), replays_before = gpu_->graph_replays();
  double worst = 0.0;
  for (size_t step = 0; step < schedule.size(); ++step) {
    const std::vector<int>& active = schedule[step];
    const StepBatch b = step_of(active);  // step 0: every prompt (prefill, no graph)
    const size_t n = active.size();
    std::vector<float> ld(n * vocab), lg(n * vocab, std::numeric_limits<float>::quiet_NaN());
    ASSERT_TRUE(direct->runner->forward(b, **direct_cache, ld).ok());
    const absl::Status gs = graphed->runner->forward(b, **graphed_cache, lg);
    ASSERT_TRUE(gs.ok()) << gs.ToString();
    for (size_t r = 0; r < n; ++r) {
      std::vector<float> d(ld.begin() + r * vocab, ld.begin() + (r + 1) * vocab);
      std::vector<float> g(lg.begin() + r * vocab, lg.begin() + (r + 1) * vocab);
      const double e = rel_err(d, g);
      worst = std::max(worst, e);
      // The same kernels over padded rows: only a GEMM algorithm chosen for another row count
      // may round differently.
      EXPECT_LT(e, tol_.op) << "step " << step << " sequence " << active[r];
      const int32_t best = static_cast<int32_t>(std::max_element(d.begin(), d.end()) - d.begin());
      tokens[active[r]].push_back(best);
    }
  }
  const uint64_t recorded = gpu_->graphs_recorded() - recorded_before;
  const uint64_t replays = gpu_->graph_replays() - replays_before;
  // Three keys (buckets 8, 4, 1 under one context class): each recorded on its second run.
  EXPECT_EQ(recorded, 3u);
  EXPECT_GE(replays, 6u);
  std::printf("[ metric ] decode_graphs %s steps=%zu recorded=%llu replays=%llu "
              "worst_logits_rel_err %.2e\n",
              dtype_label(), schedule.size(), static_cast<unsigned long long>(recorded),
              static_cast<unsigned long long>(replays), worst);
}

}  // namespace
}  // namespace tessera
