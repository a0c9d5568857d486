// The GPU GEMM solutions (kernels/gemm): tessera's small-M kernels against an fp64 CPU reference;
// the candidate lists (Default, the library's heuristic and enumerated algorithms, the own
// kernels); every candidate against Default under the tuner's numerics tolerance; names that
// rebuild the algorithm they name; a perturbed candidate rejected by the numerics check; and
// GpuBackend::linear dispatching through a GemmSolutionSource; chains of small-M GEMMs launched
// back to back (overlapping where the device allows) against the same chains drained after every
// launch; the read-only reference kernel of the benchmark; each in both compute dtypes (bf16,
// fp16; fp16 under the tuner's fp16 tolerance, 10x tighter than bf16's) -- and, without a GPU,
// the signatures that name the two dtypes' GEMMs. Inputs are random, outputs poisoned (NaN)
// before each run. Every test that needs a GPU skips when none is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/gemm/gpu_gemm.h"
#include "kernels/gemm/stream_read.h"
#include "kernels/gpu_backend.h"
#include "kernels/launch.h"
#include "tests/kernels/suite_gpu_backend.h"
#include "base/half.h"
#include "runtime/tuning/tuning_config.h"

namespace tessera {
namespace {

using gpu::CandidateOrigin;
using gpu::GemmShape;

// The shapes' names in the signatures: PyTorch TunableOp's op names, fp16 GEMMs as Half.
TEST(GemmShapeSignature, NamesEachDtypeAsPyTorchDoes) {
  struct Case {
    GemmShape shape;
    const char* key;
  };
  for (const Case& c : {
           Case{{1, 4096, 4096, GemmDType::kBF16, GemmDType::kBF16},
                "GemmTunableOp_BFloat16_TN,tn_4096_1_4096_ld_4096_4096_4096"},
           Case{{1, 4096, 4096, GemmDType::kF16, GemmDType::kF16},
                "GemmTunableOp_Half_TN,tn_4096_1_4096_ld_4096_4096_4096"},
           Case{{8, 128256, 4096, GemmDType::kBF16, GemmDType::kF32},
                "GemmTunableOp_BFloat16_TN_F32out,tn_128256_8_4096_ld_4096_4096_128256"},
           Case{{8, 128256, 4096, GemmDType::kF16, GemmDType::kF32},
                "GemmTunableOp_Half_TN_F32out,tn_128256_8_4096_ld_4096_4096_128256"},
       }) {
    const GemmSignature sig = gpu::signature_of(c.shape);
    EXPECT_EQ(sig.key(), c.key);
    absl::StatusOr<GemmShape> back = gpu::shape_of(sig);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, c.shape) << c.key;
  }
  // Half and BFloat16 of one shape are different GEMMs (a results file keeps both).
  EXPECT_NE(gpu::signature_of({1, 64, 64, GemmDType::kF16, GemmDType::kF16}),
            gpu::signature_of({1, 64, 64, GemmDType::kBF16, GemmDType::kBF16}));
  // float inputs, and a 16-bit output of the other 16-bit type, are no linear layer of the GPU's.
  for (const GemmSignature& sig :
       {GemmSignature::for_linear(1, 64, 64, GemmDType::kF32, GemmDType::kF32),
        GemmSignature::for_linear(1, 64, 64, GemmDType::kF16, GemmDType::kBF16)}) {
    absl::StatusOr<GemmShape> shape = gpu::shape_of(sig);
    EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument) << sig;
  }
}

// The tuner's check: every element within atol + rtol * |ref| of the reference (NaN fails).
bool numerics_ok(const std::vector<float>& ref, const std::vector<float>& got,
                 const NumericsTolerance& tol) {
  if (ref.size() != got.size()) return false;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double r = ref[i];
    if (!(std::abs(static_cast<double>(got[i]) - r) <= tol.atol + tol.rtol * std::abs(r))) {
      return false;
    }
  }
  return true;
}

// The candidates of `sig` that fail the numerics check against Default on `gemm`.
std::vector<std::string> rejected_candidates(TunableGemm& gemm, const GemmSignature& sig) {
  const NumericsTolerance tol = TuningConfig{}.tolerance(sig.dtype);
  std::vector<std::string> rejected;
  auto names = gemm.candidates(sig);
  EXPECT_TRUE(names.ok()) << names.status();
  if (!names.ok()) return rejected;
  EXPECT_TRUE(gemm.prepare(sig, 1).ok());
  EXPECT_TRUE(gemm.run("Default", 0).ok());
  auto ref = gemm.output(0);
  EXPECT_TRUE(ref.ok()) << ref.status();
  for (const std::string& name : *names) {
    if (name == "Default") continue;
    absl::Status ran = gemm.run(name, 0);
    EXPECT_TRUE(ran.ok()) << name << ": " << ran;
    auto got = gemm.output(0);
    if (!ran.ok() || !got.ok() || !numerics_ok(*ref, *got, tol)) rejected.push_back(name);
  }
  gemm.release();
  return rejected;
}

// Wraps a TunableGemm; the output of `victim` gets one element moved by 5% (+0.05), the size of
// error a broken algorithm (a lost split-K partial, a wrong tail tile) leaves.
class PerturbingTunableGemm final : public TunableGemm {
 public:
  PerturbingTunableGemm(TunableGemm* inner, std::string victim)
      : inner_(inner), victim_(std::move(victim)) {}
  std::vector<std::pair<std::string, std::string>> validators() const override {
    return inner_->validators();
  }
  absl::StatusOr<std::vector<std::string>> candidates(const GemmSignature& sig) override {
    return inner_->candidates(sig);
  }
  size_t operand_bytes(const GemmSignature& sig) const override {
    return inner_->operand_bytes(sig);
  }
  size_t cache_bytes() const override { return inner_->cache_bytes(); }
  absl::Status prepare(const GemmSignature& sig, int copies) override {
    last_run_.assign(copies, "");
    return inner_->prepare(sig, copies);
  }
  absl::Status run(std::string_view solution, int copy) override {
    last_run_.at(copy) = std::string(solution);
    return inner_->run(solution, copy);
  }
  absl::StatusOr<std::vector<float>> output(int copy) override {
    auto values = inner_->output(copy);
    if (values.ok() && last_run_.at(copy) == victim_ && !values->empty()) {
      float& v = (*values)[values->size() / 2];
      v += 0.05f * std::abs(v) + 0.05f;
    }
    return values;
  }
  absl::StatusOr<double> time_ms(std::string_view solution, int64_t iterations) override {
    return inner_->time_ms(solution, iterations);
  }
  void release() override { inner_->release(); }

 private:
  TunableGemm* inner_;
  std::string victim_;
  std::vector<std::string> last_run_;
};

// Answers linear()'s solution questions from a map (none when absent) and counts them.
class FakeSolutionSource final : public GemmSolutionSource {
 public:
  std::optional<std::string> solution_for(const GemmSignature& sig) override {
    ++calls;
    auto it = answers.find(sig);
    std::optional<std::string> answer;
    if (it != answers.end()) answer = it->second;
    // A warmup replacing the solution while this answer is on its way: the version moves after
    // the (now stale) answer was read.
    if (replace_while_answering) {
      replace_while_answering = false;
      answers[sig] = *replace_while_answering_with;
      ++version_number;
    }
    return answer;
  }
  uint64_t version() const override { return version_number; }

  std::map<GemmSignature, std::string> answers;
  uint64_t version_number = 1;
  int calls = 0;
  bool replace_while_answering = false;
  std::optional<std::string> replace_while_answering_with;
};

// Parameter: the compute dtype of the backend and of the GEMMs' inputs.
class GpuGemmTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (GpuBackend::device_count() == 0) GTEST_SKIP() << "no GPU visible";
    dtype_ = GetParam();
    gemm_dtype_ = gemm_dtype_of(dtype_);
    GpuBackend* backend = suite_gpu_backend<GpuGemmTest>(dtype_);
    static gpu::Gemm* gemm = [] {
      std::unique_ptr<gpu::Gemm> g;
      absl::Status s = gpu::Gemm::create(&g);
      if (!s.ok()) std::fprintf(stderr, "Gemm::create: %s\n", s.ToString().c_str());
      return g.release();
    }();
    ASSERT_NE(backend, nullptr);
    ASSERT_NE(gemm, nullptr);
    backend_ = backend;
    gemm_ = gemm;
  }
  void TearDown() override {
    if (backend_ != nullptr) backend_->set_gemm_solutions(nullptr);
  }

  // A GEMM of the test's dtype, with 16-bit or fp32 output.
  GemmShape make_shape(int64_t m, int64_t n, int64_t k, bool f32_out = false) const {
    return GemmShape{m, n, k, gemm_dtype_, f32_out ? GemmDType::kF32 : gemm_dtype_};
  }
  GemmSignature linear_sig(int64_t m, int64_t n, int64_t k, bool f32_out = false) const {
    return gpu::signature_of(make_shape(m, n, k, f32_out));
  }
  // The tuner's numerics tolerance for the test's dtype.
  NumericsTolerance tolerance() const { return TuningConfig{}.tolerance(gemm_dtype_); }

  // 16-bit bits of f in `dtype` (kBF16 or kF16), and back.
  static uint16_t to_bits(GemmDType dtype, float f) {
    return dtype == GemmDType::kF16 ? float_to_half(f) : float_to_bf16(f);
  }
  static float from_bits(GemmDType dtype, uint16_t b) {
    return dtype == GemmDType::kF16 ? half_to_float(b) : bf16_to_float(b);
  }
  // Random values exact in the dtype: x in +-1, w in +-sqrt(3 / k) (outputs O(1), as the tuner's
  // are).
  std::vector<float> random_values(size_t count, float max) {
    std::uniform_real_distribution<float> u(-max, max);
    std::vector<float> v(count);
    for (float& f : v) f = from_bits(gemm_dtype_, to_bits(gemm_dtype_, u(rng_)));
    return v;
  }
  static std::vector<uint16_t> to_16bit(GemmDType dtype, const std::vector<float>& v) {
    std::vector<uint16_t> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) out[i] = to_bits(dtype, v[i]);
    return out;
  }
  // out[m, n] = x[m, k] @ w[n, k]^T in fp64, rounded to the output type.
  static std::vector<float> reference(const GemmShape& s, const std::vector<float>& x,
                                      const std::vector<float>& w) {
    std::vector<float> out(s.m * s.n);
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        double acc = 0.0;
        for (int64_t p = 0; p < s.k; ++p) acc += static_cast<double>(x[i * s.k + p]) * w[j * s.k + p];
        const float f = static_cast<float>(acc);
        out[i * s.n + j] = s.out == GemmDType::kF32 ? f : from_bits(s.out, to_bits(s.out, f));
      }
    }
    return out;
  }

  // Device operands of one shape, inputs uploaded from the host.
  struct Operands {
    GemmShape shape;
    std::vector<float> x, w;
    DeviceBuffer x_dev, w_dev, out_dev;
  };
  Operands make_operands(const GemmShape& shape) {
    Operands o;
    o.shape = shape;
    o.x = random_values(shape.m * shape.k, 1.0f);
    o.w = random_values(shape.n * shape.k, std::sqrt(3.0f / static_cast<float>(shape.k)));
    auto x = backend_->allocate(o.x.size() * 2), w = backend_->allocate(o.w.size() * 2),
         out = backend_->allocate(shape.m * shape.n * shape.out_element_bytes());
    EXPECT_TRUE(x.ok() && w.ok() && out.ok());
    o.x_dev = *std::move(x);
    o.w_dev = *std::move(w);
    o.out_dev = *std::move(out);
    const auto xb = to_16bit(shape.dtype, o.x), wb = to_16bit(shape.dtype, o.w);
    upload(o.x_dev.data(), xb.data(), xb.size() * 2);
    upload(o.w_dev.data(), wb.data(), wb.size() * 2);
    EXPECT_TRUE(backend_->synchronize().ok());  // xb and wb go out of scope
    return o;
  }
  // Host -> device on the backend's stream, so that its kernels see it: a plain gpuMemcpy from
  // pageable memory may return before the data lands, and the backend's stream does not wait for
  // the legacy default stream.
  void upload(void* dst, const void* src, size_t bytes) {
    EXPECT_EQ(gpuMemcpyAsync(dst, src, bytes, gpuMemcpyHostToDevice, backend_->stream()), gpuSuccess);
  }
  void poison(Operands& o) {
    EXPECT_EQ(gpuMemsetAsync(o.out_dev.data(), 0xff,
                             o.shape.m * o.shape.n * o.shape.out_element_bytes(),
                             backend_->stream()),
              gpuSuccess);
  }
  std::vector<float> result(const Operands& o) {
    EXPECT_TRUE(backend_->synchronize().ok());
    const size_t count = o.shape.m * o.shape.n;
    std::vector<float> out(count);
    if (o.shape.out == GemmDType::kF32) {
      backend_->copy_to_host(out.data(), o.out_dev.data(), count * 4);
    } else {
      std::vector<uint16_t> raw(count);
      backend_->copy_to_host(raw.data(), o.out_dev.data(), count * 2);
      for (size_t i = 0; i < count; ++i) out[i] = from_bits(o.shape.out, raw[i]);
    }
    return out;
  }
  std::vector<std::string> names_of(const GemmShape& shape, CandidateOrigin origin) {
    std::vector<std::string> names;
    auto all = gemm_->candidates(shape);
    EXPECT_TRUE(all.ok()) << all.status();
    if (!all.ok()) return names;
    for (const auto& c : *all) {
      if (c.origin == origin) names.push_back(c.name);
    }
    return names;
  }

  GpuBackend* backend_ = nullptr;
  gpu::Gemm* gemm_ = nullptr;
  DType dtype_ = DType::kBF16;
  GemmDType gemm_dtype_ = GemmDType::kBF16;
  std::mt19937 rng_{4321};
};

std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) {
  return info.param == DType::kF16 ? "f16" : "bf16";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuGemmTest, ::testing::Values(DType::kBF16, DType::kF16),
                         dtype_param_name);

// The tests of tessera's own small-M kernels: a suite of their own, so that
// --gtest_filter='*SmallM*' runs them alone.
class GpuSmallMGemmTest : public GpuGemmTest {};

INSTANTIATE_TEST_SUITE_P(Dtypes, GpuSmallMGemmTest, ::testing::Values(DType::kBF16, DType::kF16),
                         dtype_param_name);

TEST_P(GpuSmallMGemmTest, SmallMKernelsMatchCpuReference) {
  // n and k off every tile (16/32 rows, 128/256/1024-wide k steps, 512-wide split ranges).
  const std::vector<std::pair<int64_t, int64_t>> nk = {{77, 264}, {1000, 1000}, {301, 4104}};
  for (int64_t m : {1, 3, 8, 16}) {
    for (auto [n, k] : nk) {
      for (bool f32_out : {false, true}) {
        Operands o = make_operands(make_shape(m, n, k, f32_out));
        const std::vector<float> want = reference(o.shape, o.x, o.w);
        const std::vector<std::string> own = names_of(o.shape, CandidateOrigin::kOwn);
        EXPECT_GE(own.size(), 4u) << "m=" << m << " n=" << n << " k=" << k;
#if defined(TESSERA_CUDA)
        for (const char* name : {"tessera_smallm_line16_splitk1", "tessera_smallm_line16_splitk8"}) {
          EXPECT_NE(std::find(own.begin(), own.end(), name), own.end()) << name;
        }
#endif
        for (const std::string& name : own) {
          auto s = gemm_->resolve(o.shape, name);
          ASSERT_TRUE(s.ok()) << s.status();
          poison(o);
          ASSERT_TRUE(gemm_->run(*s, o.shape, o.x_dev.data(), o.w_dev.data(), o.out_dev.data(),
                                 backend_->stream())
                          .ok());
          EXPECT_TRUE(numerics_ok(want, result(o), tolerance()))
              << name << " " << gemm_dtype_name(o.shape.dtype) << " m=" << m << " n=" << n
              << " k=" << k << " out " << gemm_dtype_name(o.shape.out);
        }
      }
    }
  }
}

// Each kernel's output is the next one's input, with no synchronization between launches: where
// launches overlap (kernels/launch.h, sm_90+) a kernel that read x before its predecessor had
// finished writing it would read the NaNs the other buffer was poisoned with, or a stale product.
// The chain must equal, bit for bit, the same chain with the stream drained after every launch.
TEST_P(GpuSmallMGemmTest, ChainedLaunchesReadWhatThePreviousOneWrote) {
  // On a Hopper GPU the chain must actually overlap, or this test guards nothing.
  gpuDeviceProp prop{};
  ASSERT_EQ(gpuGetDeviceProperties(&prop, 0), gpuSuccess);
  if (prop.major == 9 && std::getenv("TESSERA_OVERLAP_LAUNCHES") == nullptr) {
    EXPECT_TRUE(gpu::overlapped_launches_enabled());
  }
  const GemmShape shape = make_shape(4, 1024, 1024);  // square: each output feeds the next GEMM
  constexpr int kRounds = 12;
  Operands a = make_operands(shape);
  auto b_buffer = backend_->allocate(shape.m * shape.n * 2);
  ASSERT_TRUE(b_buffer.ok());
  const std::vector<uint16_t> start = to_16bit(shape.dtype, a.x);
  for (const std::string& name : names_of(shape, CandidateOrigin::kOwn)) {
    auto solution = gemm_->resolve(shape, name);
    ASSERT_TRUE(solution.ok()) << solution.status();
    auto chain = [&](bool drain_each) {
      upload(a.x_dev.data(), start.data(), start.size() * 2);
      EXPECT_EQ(gpuMemsetAsync(b_buffer->data(), 0xff, start.size() * 2, backend_->stream()),
                gpuSuccess);
      void* from = a.x_dev.data();
      void* to = b_buffer->data();
      for (int i = 0; i < 2 * kRounds; ++i) {
        EXPECT_TRUE(gemm_->run(*solution, shape, from, a.w_dev.data(), to, backend_->stream()).ok());
        if (drain_each) EXPECT_TRUE(backend_->synchronize().ok());
        std::swap(from, to);
      }
      EXPECT_TRUE(backend_->synchronize().ok());
      std::vector<uint16_t> out(start.size());
      backend_->copy_to_host(out.data(), a.x_dev.data(), out.size() * 2);
      return out;
    };
    const std::vector<uint16_t> drained = chain(true), overlapped = chain(false);
    EXPECT_TRUE(std::all_of(drained.begin(), drained.end(), [&](uint16_t v) {
      return std::isfinite(from_bits(shape.dtype, v));
    })) << name;
    EXPECT_EQ(drained, overlapped) << name;
  }
}

// The read-only reference `tessera bench gemm` times beside each GEMM: it must read every 16-byte
// vector it is given (no more), whatever the size against its CTA shares and blocks. A buffer of
// zeros with one vector holding the sink value makes exactly one thread's fold equal it; the
// marked vector goes to the ends, the middle, and either side of the first and last CTA share
// boundaries (stream_read.h: two CTAs per SM, equal shares of whole 2048-vector blocks).
TEST_P(GpuGemmTest, StreamReadReadsEveryVector) {
  const int sms = backend_->multiprocessors();
  auto sink = backend_->allocate(sizeof(uint32_t));
  ASSERT_TRUE(sink.ok());
  const uint32_t marked[4] = {gpu::kStreamReadSinkValue, 0, 0, 0}, zero[4] = {0, 0, 0, 0};
  // One vector; a CTA's block of 2048 vectors and one more; shares of whole blocks with a short
  // last CTA; more vectors than one pass of all CTAs.
  for (int64_t vectors : {int64_t{1}, int64_t{2049}, int64_t{sms} * 2 * 2048 + 777, int64_t{1} << 20}) {
    auto data = backend_->allocate(vectors * 16 + 16);  // one vector past the end, marked
    ASSERT_TRUE(data.ok());
    char* base = static_cast<char*>(data->data());
    ASSERT_EQ(gpuMemsetAsync(base, 0, vectors * 16, backend_->stream()), gpuSuccess);
    upload(base + vectors * 16, marked, 16);
    auto read_once = [&]() {
      EXPECT_EQ(gpuMemsetAsync(sink->data(), 0, sizeof(uint32_t), backend_->stream()), gpuSuccess);
      EXPECT_EQ(gpu::stream_read(base, vectors * 16, sms, static_cast<uint32_t*>(sink->data()),
                                 backend_->stream()),
                gpuSuccess);
      uint32_t got = 0;
      EXPECT_TRUE(backend_->synchronize().ok());
      backend_->copy_to_host(&got, sink->data(), sizeof(got));
      return got;
    };
    EXPECT_EQ(read_once(), 0u) << vectors << " vectors: read past the end";
    constexpr int64_t kBlock = 2048;
    const int64_t blocks = (vectors + kBlock - 1) / kBlock;
    const int64_t ctas = std::min<int64_t>(int64_t{sms} * 2, blocks);
    const int64_t share = (blocks + ctas - 1) / ctas * kBlock;
    std::set<int64_t> marks = {0, vectors / 2, vectors - 1};
    for (int64_t boundary : {share, (ctas - 1) * share}) {
      if (boundary <= 0 || boundary >= vectors) continue;
      marks.insert(boundary - 1);
      marks.insert(boundary);
    }
    for (int64_t at : marks) {
      upload(base + at * 16, marked, 16);
      EXPECT_EQ(read_once(), gpu::kStreamReadSinkValue) << "vector " << at << " of " << vectors;
      upload(base + at * 16, zero, 16);
    }
  }
  uint32_t* out = static_cast<uint32_t*>(sink->data());
  auto data = backend_->allocate(64);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(gpu::stream_read(data->data(), 40, sms, out, backend_->stream()), gpuErrorInvalidValue);
  EXPECT_EQ(gpu::stream_read(static_cast<char*>(data->data()) + 8, 32, sms, out, backend_->stream()),
            gpuErrorInvalidValue);
  EXPECT_EQ(gpu::stream_read(data->data(), 32, 0, out, backend_->stream()), gpuErrorInvalidValue);
}

TEST_P(GpuGemmTest, CandidatesComeFromEverySource) {
  for (const GemmShape& shape : {make_shape(8, 4096, 4096), make_shape(1, 1000, 1000, true)}) {
    const auto start = std::chrono::steady_clock::now();
    auto all = gemm_->candidates(shape);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                                start).count();
    ASSERT_TRUE(all.ok()) << all.status();
    ASSERT_FALSE(all->empty());
    EXPECT_EQ(all->front().name, "Default");
    std::map<CandidateOrigin, int> count;
    std::set<std::string> names;
    for (const auto& c : *all) {
      ++count[c.origin];
      EXPECT_TRUE(names.insert(c.name).second) << "duplicate " << c.name;
    }
    EXPECT_EQ(count[CandidateOrigin::kDefault], 1);
    EXPECT_GT(count[CandidateOrigin::kHeuristic], 0);
    EXPECT_GT(count[CandidateOrigin::kEnumerated], 0);
    EXPECT_GT(count[CandidateOrigin::kOwn], 0);
    std::printf(
        "[ metric ] candidates %s m=%ld n=%ld k=%ld: heuristic %d enumerated %d own %d in %.1f "
        "ms\n",
        std::string(gemm_dtype_name(shape.dtype)).c_str(), long(shape.m), long(shape.n),
        long(shape.k), count[CandidateOrigin::kHeuristic],
        count[CandidateOrigin::kEnumerated], count[CandidateOrigin::kOwn], ms);
  }
  // Past 16 tokens, or with rows not made of 16-byte vectors, the own kernels are not offered.
  EXPECT_TRUE(names_of(make_shape(17, 1024, 1024), CandidateOrigin::kOwn).empty());
  EXPECT_TRUE(names_of(make_shape(4, 1024, 1020), CandidateOrigin::kOwn).empty());
}

TEST_P(GpuGemmTest, EveryCandidateMatchesDefault) {
  TunableGemm* tunable = backend_->tunable_gemm();
  ASSERT_NE(tunable, nullptr);
  for (const GemmSignature& sig :
       {linear_sig(1, 4096, 4096), linear_sig(3, 1000, 1000, true), linear_sig(16, 1536, 576),
        linear_sig(100, 700, 520)}) {
    const std::vector<std::string> rejected = rejected_candidates(*tunable, sig);
    std::string names;
    for (size_t i = 0; i < rejected.size() && i < 8; ++i) names += " " + rejected[i];
    EXPECT_TRUE(rejected.empty()) << sig << ": " << rejected.size() << " rejected:" << names;
  }
}

TEST_P(GpuGemmTest, NamesRebuildTheirAlgorithm) {
  for (const GemmShape& shape : {make_shape(8, 4096, 4096), make_shape(300, 1000, 1000, true)}) {
    auto all = gemm_->candidates(shape);
    ASSERT_TRUE(all.ok()) << all.status();
    int library = 0;
    for (const auto& c : *all) {
      auto s = gemm_->resolve(shape, c.name);
      ASSERT_TRUE(s.ok()) << c.name << ": " << s.status();
      EXPECT_EQ(s->name, c.name);
      if (s->kind != gpu::Gemm::Solution::Kind::kBlasLt) continue;
      ++library;
      auto back = gpu::blaslt_name_of(s->blas);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(*back, c.name);
    }
    EXPECT_GT(library, 0);
  }
  // Names that do not parse, and parse but do not run, are errors naming the solution.
  const GemmShape small = make_shape(8, 1024, 1024);
  for (std::string_view bad : {"lt_algo1_tile", "lt_algo1_tile2_stages3_splitk1_red0_swz0_cust0_inner0_cluster0x",
                               "tessera_smallm_fma_splitk3", "no_such_solution"}) {
    auto s = gemm_->resolve(small, bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find(std::string(bad)), std::string_view::npos) << s.status();
  }
  EXPECT_FALSE(gemm_->resolve(make_shape(40, 1024, 1024), "tessera_smallm_fma_splitk1").ok());
  // The small-M kernels' names are the same in both dtypes (the signature names the dtype).
  EXPECT_TRUE(gemm_->resolve(small, "tessera_smallm_fma_splitk1").ok());
}

TEST_P(GpuGemmTest, NumericsCheckRejectsAPerturbedCandidate) {
  const GemmSignature sig = linear_sig(4, 1000, 1032);
  TunableGemm* tunable = backend_->tunable_gemm();
  ASSERT_NE(tunable, nullptr);
  auto names = tunable->candidates(sig);
  ASSERT_TRUE(names.ok()) << names.status();
  ASSERT_GE(names->size(), 3u);
  const std::string victim = (*names)[names->size() / 2];
  ASSERT_NE(victim, "Default");
  PerturbingTunableGemm perturbed(tunable, victim);
  EXPECT_EQ(rejected_candidates(perturbed, sig), std::vector<std::string>{victim});
}

TEST_P(GpuGemmTest, DeviceNumericsCheckAgreesWithTheHost) {
  // The tuner compares on the device (GpuTunableGemm::compare_output); the host comparison over
  // output() is the reference: the same verdict for every candidate, the same largest error up
  // to fp32 rounding. Prefill and decode sizes, 16-bit and fp32 output.
  TunableGemm* tunable = backend_->tunable_gemm();
  ASSERT_NE(tunable, nullptr);
  const NumericsTolerance tol = tolerance();
  for (const GemmSignature& sig :
       {linear_sig(300, 1000, 1032), linear_sig(4, 1000, 1032, true), linear_sig(16, 1536, 576)}) {
    auto names = tunable->candidates(sig);
    ASSERT_TRUE(names.ok()) << names.status();
    ASSERT_TRUE(tunable->prepare(sig, 1).ok());
    ASSERT_TRUE(tunable->run("Default", 0).ok());
    auto ref = tunable->output(0);
    ASSERT_TRUE(ref.ok()) << ref.status();
    ASSERT_TRUE(tunable->run("Default", 0).ok());
    ASSERT_TRUE(tunable->keep_reference(0).ok());
    // keep_reference poisons the output: nothing ran since, so everything is outside.
    auto poisoned = tunable->compare_output(0, tol.rtol, tol.atol);
    ASSERT_TRUE(poisoned.ok()) << poisoned.status();
    EXPECT_FALSE(poisoned->within);
    EXPECT_TRUE(std::isinf(poisoned->max_error));
    for (size_t i = 0; i < names->size() && i < 24; ++i) {
      const std::string& name = (*names)[i];
      ASSERT_TRUE(tunable->run(name, 0).ok()) << name;
      auto host_values = tunable->output(0);
      ASSERT_TRUE(host_values.ok()) << host_values.status();
      const OutputComparison host = compare_outputs(*host_values, *ref, tol.rtol, tol.atol);
      ASSERT_TRUE(tunable->run(name, 0).ok()) << name;
      auto device = tunable->compare_output(0, tol.rtol, tol.atol);
      ASSERT_TRUE(device.ok()) << device.status();
      EXPECT_EQ(device->within, host.within) << sig << " " << name;
      EXPECT_NEAR(device->max_error, host.max_error, 1e-6 + 1e-5 * host.max_error)
          << sig << " " << name;
      if (name == "Default") {
        EXPECT_EQ(device->max_error, 0.0);
      }
    }
    tunable->release();
  }
}

TEST_P(GpuGemmTest, TimeEachTimesEveryCandidateInOnePass) {
  // Prefill-sized (the untimed call left out for solutions run before) and decode-sized; a name
  // that does not resolve gets its error in its place, the others their times.
  TunableGemm* tunable = backend_->tunable_gemm();
  ASSERT_NE(tunable, nullptr);
  for (const GemmSignature& sig : {linear_sig(512, 1024, 1024), linear_sig(8, 1024, 1024)}) {
    for (int pass = 0; pass < 2; ++pass) {
      auto names = tunable->candidates(sig);
      ASSERT_TRUE(names.ok()) << names.status();
      names->insert(names->begin() + 1, "no_such_solution");
      ASSERT_TRUE(tunable->prepare(sig, 2).ok());
      const auto times = tunable->time_each(*names, 3);
      ASSERT_EQ(times.size(), names->size());
      for (size_t i = 0; i < names->size(); ++i) {
        if (i == 1) {
          EXPECT_FALSE(times[i].ok());
          continue;
        }
        ASSERT_TRUE(times[i].ok()) << sig << " " << (*names)[i] << ": " << times[i].status();
        EXPECT_GT(*times[i], 0.0) << (*names)[i];
        EXPECT_LT(*times[i], 1000.0) << (*names)[i];
      }
      tunable->release();
    }
  }
}

TEST_P(GpuSmallMGemmTest, LinearRunsTheSourcesSolution) {
  FakeSolutionSource source;
  backend_->set_gemm_solutions(&source);
  const GemmShape shape = make_shape(4, 1000, 1032);
  Operands o = make_operands(shape);
  const std::vector<float> want = reference(shape, o.x, o.w);
  const Tensor x(o.x_dev.data(), dtype_, {shape.m, shape.k});
  const Tensor w(o.w_dev.data(), dtype_, {shape.n, shape.k});
  const Tensor out(o.out_dev.data(), dtype_, {shape.m, shape.n});
  // What a solution computes, run directly; linear's output must equal it bit for bit.
  auto output_of = [&](const std::string& name) {
    auto s = gemm_->resolve(shape, name);
    EXPECT_TRUE(s.ok()) << name << ": " << s.status();
    poison(o);
    if (s.ok()) {
      EXPECT_TRUE(gemm_->run(*s, shape, o.x_dev.data(), o.w_dev.data(), o.out_dev.data(),
                             backend_->stream())
                      .ok());
    }
    return result(o);
  };
  // The own kernels are deterministic, so their output identifies them; Default (the library's
  // pick) need not be run to run, so a fallback shows as "not the chosen kernel's output".
  std::vector<float> by_chosen;
  auto check = [&](const char* what, bool chosen_runs, int asks) {
    poison(o);
    const int calls_before = source.calls;
    backend_->linear(x, w, out);
    EXPECT_EQ(source.calls - calls_before, asks) << what << ": times the source was asked";
    const std::vector<float> got = result(o);
    EXPECT_TRUE(numerics_ok(want, got, tolerance())) << what;
    if (chosen_runs) {
      EXPECT_EQ(got, by_chosen) << what << ": not the chosen solution's output";
    } else {
      EXPECT_NE(got, by_chosen) << what << ": the chosen solution ran, not Default";
    }
  };
  const std::vector<std::string> own = names_of(shape, CandidateOrigin::kOwn);
  ASSERT_FALSE(own.empty());
  // A split-K variant where there is one: it also uses the backend's workspace.
  auto split = std::find_if(own.begin(), own.end(),
                            [](const std::string& n) { return n.ends_with("_splitk2"); });
  const std::string chosen = split != own.end() ? *split : own.front();
  source.answers[gpu::signature_of(shape)] = chosen;
  by_chosen = output_of(chosen);
  // Otherwise this shape could not tell which of the two ran.
  ASSERT_NE(by_chosen, output_of("Default")) << chosen << " and Default agree bit for bit";

  check("own kernel", true, 1);
  check("own kernel, cached", true, 0);  // asked once while the version stands
  ++source.version_number;
  check("after a version move", true, 1);
  // The solution replaced while linear() was asking: the stale answer serves that one call, and
  // the next call asks again and runs the replacement.
  source.answers[gpu::signature_of(shape)] = "Default";
  ++source.version_number;
  source.replace_while_answering = true;
  source.replace_while_answering_with = chosen;
  check("answer read before a replacement", false, 1);
  check("after the replacement", true, 1);
  // Unknown, unparseable and rejected names fall back to Default.
  for (const char* bad : {"lt_bogus", "no_such_solution", "lt_algo9999_tile1_stages1_splitk1_red0_swz0_cust0_inner0_cluster0"}) {
    source.answers[gpu::signature_of(shape)] = bad;
    ++source.version_number;
    check(bad, false, 1);
  }
}

}  // namespace
}  // namespace tessera
