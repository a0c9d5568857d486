// The GPU communicator (kernels/gpu_communicator.h) over every visible GPU (at most 8), one host
// thread per rank as the runner drives them: all_reduce_sum in bf16, fp16 and fp32 through each
// path (NCCL forced, one-shot forced) against a host fp64 sum, at odd, unaligned and large sizes
// (the one-shot's chunking past its staging buffer), every rank's result the same bits;
// gather_columns with a padded last part, in chunks of rows; both recorded into each rank's decode
// graph (GpuBackend::run_graph) and replayed with new inputs; all_reduce_add_rms_norm fused and
// not; a group of one rank. Skips with fewer
// than 2 GPUs or no NCCL (the single-rank and parsing tests need one GPU or none).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "base/half.h"
#include "kernels/gpu.h"
#include "kernels/gpu_backend.h"
#include "kernels/gpu_communicator.h"

namespace tessera {
namespace {

// The suite's backends, one per visible GPU (up to 8), made once for the process.
std::vector<GpuBackend*>& backends() {
  static std::vector<GpuBackend*>* all = [] {
    // NVLink multicast (NVLS) stays off wherever these tests run, unless the caller chose.
    setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
    auto* v = new std::vector<GpuBackend*>();
    const int n = std::min(GpuBackend::device_count(), 8);
    for (int d = 0; d < n; ++d) {
      auto b = GpuBackend::create(d);
      if (!b.ok()) {
        std::fprintf(stderr, "GpuBackend::create(%d): %s\n", d, b.status().ToString().c_str());
        break;
      }
      v->push_back(b->release());
    }
    return v;
  }();
  return *all;
}

// Runs fn(rank) on one thread per rank, concurrently.
void on_every_rank(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) threads.emplace_back(fn, r);
  for (std::thread& t : threads) t.join();
}

// A group over every backend, or why not (the test skips on `skip`).
struct MadeGroup {
  std::vector<std::unique_ptr<Communicator>> comms;
  std::string skip;
};
MadeGroup make_group(std::optional<AllReduceMode> mode, size_t gather_scratch_bytes = 0) {
  MadeGroup g;
  if (backends().size() < 2) {
    g.skip = "fewer than 2 GPUs";
    return g;
  }
  GpuCommunicatorOptions options;
  options.all_reduce = mode;
  if (gather_scratch_bytes > 0) options.gather_scratch_bytes = gather_scratch_bytes;
  auto made = create_gpu_communicators(backends(), options);
  // What this host may lack skips (no NCCL/RCCL library or too old a one, no peer access for
  // a forced one-shot: FAILED_PRECONDITION); any other failure to make the group is a failure.
  if (!made.ok()) {
    EXPECT_EQ(made.status().code(), absl::StatusCode::kFailedPrecondition) << made.status();
    g.skip = std::string(made.status().message());
    return g;
  }
  g.comms = *std::move(made);
  return g;
}

size_t dtype_bytes(DType t) {
  return element_size(t);
}

// Random values exactly representable in `t`, as their stored bits and as doubles.
void random_values(DType t, size_t n, uint32_t seed, std::vector<uint8_t>& bits,
                   std::vector<double>& values) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  bits.resize(n * dtype_bytes(t));
  values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float f = u(rng);
    if (t == DType::kF32) {
      std::memcpy(bits.data() + 4 * i, &f, 4);
      values[i] = f;
    } else {
      const uint16_t h = t == DType::kBF16 ? float_to_bf16(f) : float_to_half(f);
      std::memcpy(bits.data() + 2 * i, &h, 2);
      values[i] = t == DType::kBF16 ? bf16_to_float(h) : half_to_float(h);
    }
  }
}

double value_at(DType t, const std::vector<uint8_t>& bits, size_t i) {
  if (t == DType::kF32) {
    float f;
    std::memcpy(&f, bits.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, bits.data() + 2 * i, 2);
  return t == DType::kBF16 ? bf16_to_float(h) : half_to_float(h);
}

double epsilon(DType t) {
  return t == DType::kBF16  ? std::ldexp(1.0, -8)
         : t == DType::kF16 ? std::ldexp(1.0, -11)
                            : std::ldexp(1.0, -23);
}

// One all-reduce of n elements (at element offset `offset` into the buffers: 1 makes them
// unaligned) on every rank from its own thread; checks the sum against fp64 (each rank's
// rounding: at most one per rank's addition, of at most eps * sum |x|) and every rank's bits
// against rank 0's.
void check_all_reduce(std::vector<std::unique_ptr<Communicator>>& comms, DType t, size_t n,
                      size_t offset, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << dtype_name(t) << " n=" << n << " offset=" << offset);
  const int world = static_cast<int>(comms.size());
  const size_t eb = dtype_bytes(t);
  std::vector<std::vector<uint8_t>> in(world), out(world);
  std::vector<std::vector<double>> values(world);
  std::vector<DeviceBuffer> buffers;
  for (int r = 0; r < world; ++r) {
    random_values(t, n, seed + 977 * r, in[r], values[r]);
    auto buf = backends()[r]->allocate((n + offset) * eb);
    ASSERT_TRUE(buf.ok()) << buf.status();
    buffers.push_back(*std::move(buf));
  }
  on_every_rank(world, [&](int r) {
    GpuBackend& b = *backends()[r];
    b.make_current();
    char* data = static_cast<char*>(buffers[r].data()) + offset * eb;
    (void)gpuMemcpyAsync(data, in[r].data(), n * eb, gpuMemcpyHostToDevice, b.stream());
    comms[r]->all_reduce_sum(Tensor(data, t, {static_cast<int64_t>(n)}));
    out[r].resize(n * eb);
    b.copy_to_host(out[r].data(), data, n * eb);
  });
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(backends()[r]->synchronize().ok());
    const absl::Status s = comms[r]->take_error();
    ASSERT_TRUE(s.ok()) << s;
  }
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    double ref = 0, abs_sum = 0;
    for (int r = 0; r < world; ++r) {
      ref += values[r][i];
      abs_sum += std::abs(values[r][i]);
    }
    const double got = value_at(t, out[0], i);
    if (!(std::abs(got - ref) <= world * epsilon(t) * abs_sum + 1e-30) && bad++ < 5) {
      ADD_FAILURE() << "element " << i << ": " << got << ", fp64 " << ref;
    }
  }
  EXPECT_EQ(bad, 0u);
  for (int r = 1; r < world; ++r) {
    EXPECT_EQ(std::memcmp(out[r].data(), out[0].data(), n * eb), 0) << "rank " << r << " differs";
  }
}

class GpuCommunicatorPathTest : public testing::TestWithParam<AllReduceMode> {};

TEST_P(GpuCommunicatorPathTest, AllReduceMatchesFp64OnEveryRank) {
  MadeGroup g = make_group(GetParam());
  if (!g.skip.empty()) GTEST_SKIP() << g.skip;
  std::printf("%zu ranks: %s\n", g.comms.size(), g.comms[0]->describe().c_str());
  uint32_t seed = 1;
  for (DType t : {DType::kBF16, DType::kF16, DType::kF32}) {
    // Odd and small; a decode step's rows; past the one-shot's 2 MiB staging (chunks); unaligned.
    for (size_t n : {size_t{1}, size_t{7}, size_t{1001}, size_t{4096 * 3 + 5}, size_t{8 * 8192},
                     size_t{(1 << 20) + 4099}}) {
      check_all_reduce(g.comms, t, n, 0, seed++);
    }
    check_all_reduce(g.comms, t, 4097, 1, seed++);
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, GpuCommunicatorPathTest,
                         testing::Values(AllReduceMode::kNccl, AllReduceMode::kOneShot),
                         [](const testing::TestParamInfo<AllReduceMode>& p) {
                           return p.param == AllReduceMode::kNccl ? "Nccl" : "OneShot";
                         });

TEST(GpuCommunicatorTest, AutoChoosesAndReducesEverySize) {
  MadeGroup g = make_group(AllReduceMode::kAuto);
  if (!g.skip.empty()) GTEST_SKIP() << g.skip;
  const std::string d = g.comms[0]->describe();
  std::printf("%zu ranks, auto: %s (one-shot up to %zu bytes)\n", g.comms.size(), d.c_str(),
              one_shot_limit(*g.comms[0]));
  EXPECT_NE(d.find("ccl "), std::string::npos) << d;  // "nccl 2.x" or "rccl 2.x"
  for (auto& c : g.comms) EXPECT_EQ(c->describe(), d);
  check_all_reduce(g.comms, DType::kBF16, 4096, 0, 7);
  check_all_reduce(g.comms, DType::kBF16, 64 * 4096, 0, 8);
}

// Rank r's part [rows, part_cols] as full's columns [r * part_cols, ...), the last one clipped.
void expect_gathered(const std::vector<std::vector<float>>& parts, const std::vector<float>& full,
                     int64_t rows, int64_t part_cols, int64_t full_cols) {
  size_t bad = 0;
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t c = 0; c < full_cols; ++c) {
      const float want = parts[c / part_cols][i * part_cols + c % part_cols];
      const float got = full[i * full_cols + c];
      if (std::memcmp(&want, &got, 4) != 0 && bad++ < 5) {
        ADD_FAILURE() << "row " << i << " column " << c << ": " << got << ", want " << want;
      }
    }
  }
  EXPECT_EQ(bad, 0u);
}

// The scratch holds two rows of the other ranks' parts: five rows go in three chunks.
TEST(GpuCommunicatorTest, GatherColumnsWithPaddedLastPart) {
  const int64_t rows = 5, full_cols = 1001;
  const int world = static_cast<int>(backends().size());
  const int64_t part_cols = world > 0 ? (full_cols + world - 1) / world : 1;
  MadeGroup g = make_group(std::nullopt, 2 * (world - 1) * part_cols * sizeof(float));
  if (!g.skip.empty()) GTEST_SKIP() << g.skip;
  std::vector<std::vector<float>> parts(world);
  std::vector<DeviceBuffer> part_buf(world);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-5.0f, 5.0f);
  for (int r = 0; r < world; ++r) {
    for (int64_t i = 0; i < rows * part_cols; ++i) parts[r].push_back(u(rng));
    part_buf[r] = *backends()[r]->allocate(parts[r].size() * 4);
  }
  DeviceBuffer full_buf = *backends()[0]->allocate(rows * full_cols * 4);
  std::vector<float> full(rows * full_cols, std::nanf(""));
  on_every_rank(world, [&](int r) {
    GpuBackend& b = *backends()[r];
    b.make_current();
    (void)gpuMemcpyAsync(part_buf[r].data(), parts[r].data(), parts[r].size() * 4,
                         gpuMemcpyHostToDevice, b.stream());
    if (r == 0) {
      (void)gpuMemcpyAsync(full_buf.data(), full.data(), full.size() * 4, gpuMemcpyHostToDevice,
                           b.stream());
    }
    const Tensor part = part_buf[r].view(DType::kF32, {rows, part_cols});
    g.comms[r]->gather_columns(part,
                               r == 0 ? full_buf.view(DType::kF32, {rows, full_cols}) : Tensor());
    if (r == 0) b.copy_to_host(full.data(), full_buf.data(), full.size() * 4);
  });
  for (int r = 0; r < world; ++r) {
    ASSERT_TRUE(backends()[r]->synchronize().ok());
    const absl::Status s = g.comms[r]->take_error();
    ASSERT_TRUE(s.ok()) << s;
  }
  expect_gathered(parts, full, rows, part_cols, full_cols);
}

// A decode step's collectives -- a small all-reduce (the one-shot's size under auto), a large one
// (NCCL's), a gather -- recorded into each rank's graph and replayed with new inputs.
class GpuCommunicatorGraphTest : public testing::TestWithParam<AllReduceMode> {};

TEST_P(GpuCommunicatorGraphTest, RecordedStepsReplayWithNewInputs) {
  MadeGroup g = make_group(GetParam());
  if (!g.skip.empty()) GTEST_SKIP() << g.skip;
  const int world = static_cast<int>(g.comms.size());
  std::printf("%d ranks: %s\n", world, g.comms[0]->describe().c_str());
  const size_t small_n = 4 * 4096, large_n = 512 * 4096;  // bf16: 32 KiB and 4 MiB
  const int64_t rows = 4, full_cols = 999, part_cols = (full_cols + world - 1) / world;
  struct Rank {
    DeviceBuffer small, large, part, full;
    std::vector<uint8_t> small_in, large_in, small_out, large_out;
    std::vector<double> small_v, large_v;
    std::vector<float> part_in, full_out;
  };
  std::vector<Rank> ranks(world);
  for (int r = 0; r < world; ++r) {
    GpuBackend& b = *backends()[r];
    ranks[r].small = *b.allocate(small_n * 2);
    ranks[r].large = *b.allocate(large_n * 2);
    ranks[r].part = *b.allocate(rows * part_cols * 4);
    if (r == 0) ranks[r].full = *b.allocate(rows * full_cols * 4);
  }
  const uint64_t recorded_before = backends()[0]->graphs_recorded();
  const uint64_t replays_before = backends()[0]->graph_replays();
  constexpr int kSteps = 6;
  for (int step = 0; step < kSteps; ++step) {
    SCOPED_TRACE(testing::Message() << "step " << step);
    std::vector<std::vector<float>> parts(world);
    for (int r = 0; r < world; ++r) {
      Rank& k = ranks[r];
      random_values(DType::kBF16, small_n, 100 * step + r, k.small_in, k.small_v);
      random_values(DType::kBF16, large_n, 100 * step + r + 50, k.large_in, k.large_v);
      std::mt19937 rng(1000 * step + r);
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      k.part_in.resize(rows * part_cols);
      for (float& v : k.part_in) v = u(rng);
      parts[r] = k.part_in;
    }
    on_every_rank(world, [&](int r) {
      GpuBackend& b = *backends()[r];
      Rank& k = ranks[r];
      b.make_current();
      (void)gpuMemcpyAsync(k.small.data(), k.small_in.data(), small_n * 2, gpuMemcpyHostToDevice,
                           b.stream());
      (void)gpuMemcpyAsync(k.large.data(), k.large_in.data(), large_n * 2, gpuMemcpyHostToDevice,
                           b.stream());
      (void)gpuMemcpyAsync(k.part.data(), k.part_in.data(), k.part_in.size() * 4,
                           gpuMemcpyHostToDevice, b.stream());
      if (r == 0) (void)gpuMemsetAsync(k.full.data(), 0xff, rows * full_cols * 4, b.stream());
      const Tensor small = k.small.view(DType::kBF16, {static_cast<int64_t>(small_n)});
      const Tensor large = k.large.view(DType::kBF16, {static_cast<int64_t>(large_n)});
      const Tensor part = k.part.view(DType::kF32, {rows, part_cols});
      const Tensor full = r == 0 ? k.full.view(DType::kF32, {rows, full_cols}) : Tensor();
      const absl::Status s = b.run_graph(42, [&] {
        g.comms[r]->all_reduce_sum(small);
        g.comms[r]->all_reduce_sum(large);
        g.comms[r]->gather_columns(part, full);
      });
      EXPECT_TRUE(s.ok()) << s;
      k.small_out.resize(small_n * 2);
      k.large_out.resize(large_n * 2);
      b.copy_to_host(k.small_out.data(), k.small.data(), small_n * 2);
      b.copy_to_host(k.large_out.data(), k.large.data(), large_n * 2);
      if (r == 0) {
        k.full_out.resize(rows * full_cols);
        b.copy_to_host(k.full_out.data(), k.full.data(), k.full_out.size() * 4);
      }
    });
    for (int r = 0; r < world; ++r) {
      ASSERT_TRUE(backends()[r]->synchronize().ok());
      const absl::Status s = g.comms[r]->take_error();
      ASSERT_TRUE(s.ok()) << s;
    }
    for (auto [n, in_of, out_of] : {std::tuple{small_n, &Rank::small_v, &Rank::small_out},
                                    std::tuple{large_n, &Rank::large_v, &Rank::large_out}}) {
      size_t bad = 0;
      for (size_t i = 0; i < n; ++i) {
        double ref = 0, abs_sum = 0;
        for (int r = 0; r < world; ++r) {
          ref += (ranks[r].*in_of)[i];
          abs_sum += std::abs((ranks[r].*in_of)[i]);
        }
        const double got = value_at(DType::kBF16, ranks[0].*out_of, i);
        if (!(std::abs(got - ref) <= world * epsilon(DType::kBF16) * abs_sum) && bad++ < 3) {
          ADD_FAILURE() << "n=" << n << " element " << i << ": " << got << ", fp64 " << ref;
        }
      }
      EXPECT_EQ(bad, 0u);
      for (int r = 1; r < world; ++r) {
        EXPECT_EQ(ranks[r].*out_of, ranks[0].*out_of) << "rank " << r << " differs, n=" << n;
      }
    }
    expect_gathered(parts, ranks[0].full_out, rows, part_cols, full_cols);
  }
  // Step 0 runs directly, step 1 records, the rest replay.
  EXPECT_EQ(backends()[0]->graphs_recorded() - recorded_before, 1u);
  EXPECT_EQ(backends()[0]->graph_replays() - replays_before, uint64_t{kSteps - 2});
  // The recordings go before the communicators: NCCL's destroy waits for the graphs that hold
  // its collectives (ModelInstance does the same).
  for (int r = 0; r < world; ++r) backends()[r]->release_graphs();
}

INSTANTIATE_TEST_SUITE_P(Paths, GpuCommunicatorGraphTest,
                         testing::Values(AllReduceMode::kAuto, AllReduceMode::kNccl,
                                         AllReduceMode::kOneShot),
                         [](const testing::TestParamInfo<AllReduceMode>& p) {
                           return p.param == AllReduceMode::kAuto   ? "Auto"
                                  : p.param == AllReduceMode::kNccl ? "Nccl"
                                                                    : "OneShot";
                         });

// all_reduce_add_rms_norm as the model calls it: the fused op where the communicator takes it
// (forced one-shot: always), else all_reduce_sum and the backend's add_rms_norm (forced NCCL:
// never fused). Against the host: the sum over the ranks in rank order rounded to the dtype,
// added to the residual and rounded (the residual bit for bit on the one-shot), the norm within
// an ulp (its sum of squares is added in another order); every rank's bits the same; x left as
// it was by the fused op; plain all-reduces just before and after it (reusing its staging under
// other element-to-block mappings) still right. Steps 0 direct, 1 recorded into a graph, the
// rest replayed with new inputs.
class GpuCommunicatorFusedNormTest : public testing::TestWithParam<AllReduceMode> {};

TEST_P(GpuCommunicatorFusedNormTest, MatchesTheHostOnEveryRank) {
  MadeGroup g = make_group(GetParam());
  if (!g.skip.empty()) GTEST_SKIP() << g.skip;
  const bool one_shot = GetParam() == AllReduceMode::kOneShot;
  const int world = static_cast<int>(g.comms.size());
  uint32_t seed = 500;
  // The unfused path's add_rms_norm is the backend's, in its compute dtype; the fused kernel
  // takes either.
  std::vector<DType> dtypes = {backends()[0]->compute_dtype()};
  if (one_shot) dtypes = {DType::kBF16, DType::kF16};
  for (DType t : dtypes) {
    for (auto [rows, cols, offset] : {std::tuple{int64_t{1}, int64_t{4096}, 0.0f},
                                      std::tuple{int64_t{5}, int64_t{2048}, 1.0f},
                                      std::tuple{int64_t{64}, int64_t{8192}, 0.0f}}) {
      SCOPED_TRACE(testing::Message() << dtype_name(t) << " " << rows << "x" << cols);
      const size_t n = static_cast<size_t>(rows * cols), eb = dtype_bytes(t);
      const NormSpec norm{1e-5f, offset};
      // Plain all-reduces just before and after the fused op, as a layer's neighbours are: the
      // same staging halves under other element-to-block mappings.
      constexpr size_t kBefore = 3001, kAfter = 3 * 4096;
      struct Rank {
        DeviceBuffer x, residual, w, out, before, after;
        std::vector<uint8_t> x_in, x_out, residual_out, out_out, before_in, after_in, before_out,
            after_out;
        std::vector<double> x_v, before_v, after_v;
        bool fused = false;
      };
      std::vector<Rank> ranks(world);
      for (int r = 0; r < world; ++r) {
        GpuBackend& b = *backends()[r];
        for (DeviceBuffer* d : {&ranks[r].x, &ranks[r].residual, &ranks[r].out}) {
          *d = *b.allocate(n * eb);
        }
        ranks[r].w = *b.allocate(cols * eb);
        ranks[r].before = *b.allocate(kBefore * eb);
        ranks[r].after = *b.allocate(kAfter * eb);
      }
      constexpr int kSteps = 4;
      for (int step = 0; step < kSteps; ++step) {
        SCOPED_TRACE(testing::Message() << "step " << step);
        // The residual stream and the norm's weight are the same on every rank, as in a model.
        std::vector<uint8_t> residual_in, w_in;
        std::vector<double> residual_v, w_v;
        random_values(t, n, seed++, residual_in, residual_v);
        random_values(t, static_cast<size_t>(cols), seed++, w_in, w_v);
        for (int r = 0; r < world; ++r) {
          random_values(t, n, seed++, ranks[r].x_in, ranks[r].x_v);
          random_values(t, kBefore, seed++, ranks[r].before_in, ranks[r].before_v);
          random_values(t, kAfter, seed++, ranks[r].after_in, ranks[r].after_v);
        }
        on_every_rank(world, [&](int r) {
          GpuBackend& b = *backends()[r];
          Rank& k = ranks[r];
          b.make_current();
          (void)gpuMemcpyAsync(k.x.data(), k.x_in.data(), n * eb, gpuMemcpyHostToDevice,
                               b.stream());
          (void)gpuMemcpyAsync(k.residual.data(), residual_in.data(), n * eb,
                               gpuMemcpyHostToDevice, b.stream());
          (void)gpuMemcpyAsync(k.w.data(), w_in.data(), cols * eb, gpuMemcpyHostToDevice,
                               b.stream());
          (void)gpuMemcpyAsync(k.before.data(), k.before_in.data(), kBefore * eb,
                               gpuMemcpyHostToDevice, b.stream());
          (void)gpuMemcpyAsync(k.after.data(), k.after_in.data(), kAfter * eb,
                               gpuMemcpyHostToDevice, b.stream());
          const Tensor x = k.x.view(t, {rows, cols}), residual = k.residual.view(t, {rows, cols});
          const Tensor w = k.w.view(t, {cols}), out = k.out.view(t, {rows, cols});
          const absl::Status s = b.run_graph(43, [&] {
            g.comms[r]->all_reduce_sum(k.before.view(t, {static_cast<int64_t>(kBefore)}));
            k.fused = g.comms[r]->all_reduce_add_rms_norm(x, residual, w, norm, out);
            if (!k.fused) {
              g.comms[r]->all_reduce_sum(x);
              b.add_rms_norm(residual, x, w, norm, out);
            }
            g.comms[r]->all_reduce_sum(k.after.view(t, {static_cast<int64_t>(kAfter)}));
          });
          EXPECT_TRUE(s.ok()) << s;
          for (auto [host, dev, count] :
               {std::tuple{&k.x_out, &k.x, n}, std::tuple{&k.residual_out, &k.residual, n},
                std::tuple{&k.out_out, &k.out, n}, std::tuple{&k.before_out, &k.before, kBefore},
                std::tuple{&k.after_out, &k.after, kAfter}}) {
            host->resize(count * eb);
            b.copy_to_host(host->data(), dev->data(), count * eb);
          }
        });
        for (int r = 0; r < world; ++r) {
          const absl::Status synced = backends()[r]->synchronize();
          ASSERT_TRUE(synced.ok()) << synced;
          const absl::Status s = g.comms[r]->take_error();
          ASSERT_TRUE(s.ok()) << s;
          EXPECT_EQ(ranks[r].fused, one_shot) << "rank " << r;
        }
        size_t bad = 0;
        for (int64_t row = 0; row < rows; ++row) {
          std::vector<double> stream(cols);
          double sum_sq = 0;
          for (int64_t c = 0; c < cols; ++c) {
            const size_t i = static_cast<size_t>(row * cols + c);
            float acc = static_cast<float>(ranks[0].x_v[i]);
            double abs_sum = std::abs(ranks[0].x_v[i]);
            for (int r = 1; r < world; ++r) {
              acc += static_cast<float>(ranks[r].x_v[i]);
              abs_sum += std::abs(ranks[r].x_v[i]);
            }
            auto round_to_t = [&](float f) {
              return t == DType::kBF16 ? bf16_to_float(float_to_bf16(f))
                                       : half_to_float(float_to_half(f));
            };
            const float sum_t = round_to_t(acc);
            stream[c] = round_to_t(static_cast<float>(residual_v[i]) + sum_t);
            const double got = value_at(t, ranks[0].residual_out, i);
            const double tol = one_shot ? 0.0
                                        : world * epsilon(t) * abs_sum +
                                              epsilon(t) * std::abs(stream[c]);
            if (!(std::abs(got - stream[c]) <= tol) && bad++ < 5) {
              ADD_FAILURE() << "residual row " << row << " col " << c << ": " << got << ", want "
                            << stream[c];
            }
            sum_sq += value_at(t, ranks[0].residual_out, i) * value_at(t, ranks[0].residual_out, i);
          }
          const double inv_rms = 1.0 / std::sqrt(sum_sq / static_cast<double>(cols) + norm.eps);
          for (int64_t c = 0; c < cols; ++c) {
            const size_t i = static_cast<size_t>(row * cols + c);
            const double want =
                value_at(t, ranks[0].residual_out, i) * inv_rms * (offset + w_v[c]);
            const double got = value_at(t, ranks[0].out_out, i);
            if (!(std::abs(got - want) <= 2 * epsilon(t) * std::abs(want) + 1e-6) && bad++ < 5) {
              ADD_FAILURE() << "out row " << row << " col " << c << ": " << got << ", want "
                            << want;
            }
          }
        }
        for (auto [count, in_of, out_of] :
             {std::tuple{kBefore, &Rank::before_v, &Rank::before_out},
              std::tuple{kAfter, &Rank::after_v, &Rank::after_out}}) {
          for (size_t i = 0; i < count; ++i) {
            double ref = 0, abs_sum = 0;
            for (int r = 0; r < world; ++r) {
              ref += (ranks[r].*in_of)[i];
              abs_sum += std::abs((ranks[r].*in_of)[i]);
            }
            const double got = value_at(t, ranks[0].*out_of, i);
            if (!(std::abs(got - ref) <= world * epsilon(t) * abs_sum) && bad++ < 5) {
              ADD_FAILURE() << "plain all-reduce of " << count << ", element " << i << ": " << got
                            << ", fp64 " << ref;
            }
          }
          for (int r = 1; r < world; ++r) {
            EXPECT_EQ(ranks[r].*out_of, ranks[0].*out_of) << "rank " << r << ", n=" << count;
          }
        }
        EXPECT_EQ(bad, 0u);
        for (int r = 0; r < world; ++r) {
          EXPECT_EQ(ranks[r].residual_out, ranks[0].residual_out) << "rank " << r;
          EXPECT_EQ(ranks[r].out_out, ranks[0].out_out) << "rank " << r;
          if (one_shot) EXPECT_EQ(ranks[r].x_out, ranks[r].x_in) << "rank " << r << ": x changed";
        }
      }
      for (int r = 0; r < world; ++r) backends()[r]->release_graphs();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, GpuCommunicatorFusedNormTest,
                         testing::Values(AllReduceMode::kNccl, AllReduceMode::kOneShot),
                         [](const testing::TestParamInfo<AllReduceMode>& p) {
                           return p.param == AllReduceMode::kNccl ? "Nccl" : "OneShot";
                         });

TEST(GpuCommunicatorTest, SingleRankCopiesNothingAndNeedsNoLibrary) {
  if (backends().empty()) GTEST_SKIP() << "no GPU visible";
  GpuBackend& b = *backends()[0];
  // Whatever TESSERA_NCCL_LIBRARY says, one rank never opens it.
  setenv("TESSERA_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  GpuBackend* one[] = {&b};
  auto made = create_gpu_communicators(one);
  unsetenv("TESSERA_NCCL_LIBRARY");
  ASSERT_TRUE(made.ok()) << made.status();
  Communicator& c = *(*made)[0];
  EXPECT_EQ(c.size(), 1);
  EXPECT_EQ(c.describe(), "single rank");
  std::vector<float> host(6 * 10);
  for (size_t i = 0; i < host.size(); ++i) host[i] = 0.5f * i - 3;
  DeviceBuffer x = *b.allocate(host.size() * 4);
  DeviceBuffer full = *b.allocate(6 * 9 * 4);
  b.make_current();
  (void)gpuMemcpy(x.data(), host.data(), host.size() * 4, gpuMemcpyHostToDevice);
  c.all_reduce_sum(x.view(DType::kF32, {60}));
  c.gather_columns(x.view(DType::kF32, {6, 10}), x.view(DType::kF32, {6, 10}));    // in place
  c.gather_columns(x.view(DType::kF32, {6, 10}), full.view(DType::kF32, {6, 9}));  // clipped
  std::vector<float> got(60), got_full(54);
  b.copy_to_host(got.data(), x.data(), 240);
  b.copy_to_host(got_full.data(), full.data(), 216);
  ASSERT_TRUE(b.synchronize().ok());
  ASSERT_TRUE(c.take_error().ok());
  EXPECT_EQ(got, host);
  expect_gathered({host}, got_full, 6, 10, 9);
}

TEST(GpuCommunicatorTest, MissingLibraryNamesWhatWasTried) {
  if (backends().size() < 2) GTEST_SKIP() << "fewer than 2 GPUs";
  setenv("TESSERA_NCCL_LIBRARY", "/nonexistent/libnccl.so.2", 1);
  auto made = create_gpu_communicators(backends());
  unsetenv("TESSERA_NCCL_LIBRARY");
  ASSERT_FALSE(made.ok());
  const std::string m(made.status().message());
  EXPECT_NE(m.find("/nonexistent/libnccl.so.2"), std::string::npos) << m;
  EXPECT_NE(m.find("TESSERA_NCCL_LIBRARY"), std::string::npos) << m;
}

TEST(GpuCommunicatorTest, AllReduceModeParsesAndTheEnvironmentIsChecked) {
  EXPECT_EQ(*parse_all_reduce_mode("auto"), AllReduceMode::kAuto);
  EXPECT_EQ(*parse_all_reduce_mode("nccl"), AllReduceMode::kNccl);
  EXPECT_EQ(*parse_all_reduce_mode("one_shot"), AllReduceMode::kOneShot);
  EXPECT_FALSE(parse_all_reduce_mode("fast").ok());
  if (backends().empty()) GTEST_SKIP() << "no GPU visible";
  setenv("TESSERA_ALL_REDUCE", "fast", 1);
  GpuBackend* one[] = {backends()[0]};
  auto made = create_gpu_communicators(one);
  unsetenv("TESSERA_ALL_REDUCE");
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.status().message().find("TESSERA_ALL_REDUCE"), std::string::npos);
}

}  // namespace
}  // namespace tessera
