// tessera bench kernels: times tessera's own attention kernels on the GPU, on the shapes the
// reference scripts (shared anchors: bench_attn.py, bw.py; tests/bench/bench_attn_dims.py for
// other head dims) measure, and prints a table and JSON. Per head dim of --head-dim (default 128):
//   prefill: FlashAttention-2-style kernel, bf16, causal and not, the ROCm Triton table's
//            (B, HQ, HK, NQ, NK) rows; TFLOP/s with bench_attn.py's FLOP count.
//   decode:  split-KV paged kernel, Llama-3-8B heads (32 query, 8 KV), batch 1/16/64,
//            context 1k..32k; GB/s (K and V read once, q read, out written) and its share of
//            the device-to-device copy bandwidth measured in the same process.
//   features (--only features): causal prefill and decode with Gemma 2's soft-cap (50) and a
//            4096-key sliding window, each beside the plain kernel on the same shape: a window's
//            gain is the key tiles it skips; TFLOP/s counts the keys each query sees.
// Medians of event-timed runs after warm-up, as triton.testing.do_bench (bench_attn.py's timer):
// 25 ms of warm-up, at least 100 ms (and --reps runs) timed; inputs random (never zeros), made on
// the device.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/status_macros.h"

#include "tools/cli_args.h"
#include "tools/command_support.h"
#include "tools/commands.h"
#include "tools/text_table.h"

#if defined(TESSERA_WITH_GPU)
#include "kernels/gpu_backend.h"
#include "kernels/gpu_ops.h"
#endif

namespace tessera::cli {

namespace {

constexpr char kUsage[] =
    "usage: tessera bench kernels [--device N] [--json PATH] [--reps N]\n"
    "                             [--only prefill|decode|features] [--head-dim D[,D...]]\n"
    "  Times the GPU attention kernels (prefill: TFLOP/s; decode: GB/s vs copy bandwidth).\n"
    "  --reps N: at least N timed runs per shape (default 20; runs fill at least 100 ms)\n"
    "  --head-dim: head dims to time (64, 128, 256; default 128)\n"
    "  --only features: soft-capped and windowed prefill and decode beside the plain kernels\n";

int fail(const absl::Status& s) {
  std::fprintf(stderr, "tessera bench kernels: %s\n", std::string(s.message()).c_str());
  return 1;
}

#if defined(TESSERA_WITH_GPU)

constexpr int kBlockSize = 16;

// Median milliseconds of runs of `fn` on `stream`, timed as the anchors' timer
// (triton.testing.do_bench) times: after `warmup` runs, five more estimate one run's time; then at
// least kWarmupMs of untimed runs (the clocks settle: a fixed few runs of a short kernel measured
// the ramp, 10% apart between calls), and at least `reps` timed runs, more to fill kTimedMs (at
// most kMaxReps).
absl::StatusOr<double> median_ms(gpuStream_t stream, int warmup, int reps,
                                 const std::function<gpuError_t()>& fn) {
  constexpr double kWarmupMs = 25.0, kTimedMs = 100.0;
  // The cap only bounds the events a ~5 us decode launch would need (20000 of them: 100 ms).
  constexpr int kEstimateRuns = 5, kMaxReps = 20000;
  for (int i = 0; i < warmup; ++i) GPU_CHECK(fn());
  // Destroyed on every return, the failing ones too.
  struct Events {
    std::vector<gpuEvent_t> ev;
    ~Events() {
      for (gpuEvent_t e : ev) (void)gpuEventDestroy(e);
    }
  } events;
  std::vector<gpuEvent_t>& ev = events.ev;
  for (int i = 0; i < 2; ++i) GPU_CHECK(gpuEventCreate(&ev.emplace_back()));
  GPU_CHECK(gpuEventRecord(ev[0], stream));
  for (int i = 0; i < kEstimateRuns; ++i) GPU_CHECK(fn());
  GPU_CHECK(gpuEventRecord(ev[1], stream));
  GPU_CHECK(gpuStreamSynchronize(stream));
  float estimate_total = 0;
  GPU_CHECK(gpuEventElapsedTime(&estimate_total, ev[0], ev[1]));
  const double estimate = std::max(1e-4, static_cast<double>(estimate_total) / kEstimateRuns);
  const int settle = static_cast<int>(std::ceil(kWarmupMs / estimate));
  for (int i = 0; i < settle; ++i) GPU_CHECK(fn());
  reps = std::clamp(static_cast<int>(std::ceil(kTimedMs / estimate)), reps, std::max(reps, kMaxReps));
  ev.reserve(2 * reps);
  for (int i = 2; i < 2 * reps; ++i) GPU_CHECK(gpuEventCreate(&ev.emplace_back()));
  for (int i = 0; i < reps; ++i) {
    GPU_CHECK(gpuEventRecord(ev[2 * i], stream));
    GPU_CHECK(fn());
    GPU_CHECK(gpuEventRecord(ev[2 * i + 1], stream));
  }
  GPU_CHECK(gpuStreamSynchronize(stream));
  std::vector<double> ms(reps);
  for (int i = 0; i < reps; ++i) {
    float t = 0;
    GPU_CHECK(gpuEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
    ms[i] = t;
  }
  std::sort(ms.begin(), ms.end());
  return ms[reps / 2];
}

// B sequences, each with `new_tokens` queries over `context` keys in its own run of blocks.
StepBatch make_step(int batch, int new_tokens, int context) {
  StepBatch b;
  const int blocks = (context + kBlockSize - 1) / kBlockSize;
  b.max_blocks = blocks;
  b.query_start.push_back(0);
  for (int s = 0; s < batch; ++s) {
    for (int i = 0; i < new_tokens; ++i) {
      b.token_ids.push_back(0);
      b.positions.push_back(std::max(0, context - new_tokens + i));
      b.slot_mapping.push_back(-1);  // the cache is filled directly; nothing is written
    }
    b.query_start.push_back(b.query_start.back() + new_tokens);
    b.context_len.push_back(context);
    for (int j = 0; j < blocks; ++j) b.block_tables.push_back(s * blocks + j);
  }
  return b;
}

struct Buffers {
  DeviceBuffer qkv, k, v, out;
};

absl::StatusOr<Buffers> make_buffers(GpuBackend& gpu, int batch, int new_tokens, int context,
                                     int hq, int hk, int head_dim, uint64_t seed) {
  const int64_t blocks = static_cast<int64_t>(batch) * ((context + kBlockSize - 1) / kBlockSize);
  const int64_t qkv = static_cast<int64_t>(batch) * new_tokens * (hq + 2 * hk) * head_dim;
  const int64_t kv = blocks * kBlockSize * hk * head_dim;
  const int64_t out = static_cast<int64_t>(batch) * new_tokens * hq * head_dim;
  Buffers b;
  TESSERA_ASSIGN_OR_RETURN(b.qkv, gpu.allocate(qkv * 2));
  TESSERA_ASSIGN_OR_RETURN(b.k, gpu.allocate(kv * 2));
  TESSERA_ASSIGN_OR_RETURN(b.v, gpu.allocate(kv * 2));
  TESSERA_ASSIGN_OR_RETURN(b.out, gpu.allocate(out * 2));
  auto bf = [](DeviceBuffer& d) { return static_cast<gpu_bf16*>(d.data()); };
  GPU_CHECK(gpu::fill_uniform(bf(b.qkv), qkv, seed, -1.0f, 1.0f, gpu.stream()));
  GPU_CHECK(gpu::fill_uniform(bf(b.k), kv, seed + 1, -1.0f, 1.0f, gpu.stream()));
  GPU_CHECK(gpu::fill_uniform(bf(b.v), kv, seed + 2, -1.0f, 1.0f, gpu.stream()));
  return b;
}

absl::StatusOr<double> copy_bandwidth(GpuBackend& gpu, int reps) {
  const size_t bytes = size_t{1} << 30;
  TESSERA_ASSIGN_OR_RETURN(DeviceBuffer a, gpu.allocate(bytes));
  TESSERA_ASSIGN_OR_RETURN(DeviceBuffer b, gpu.allocate(bytes));
  GPU_CHECK(gpu::fill_uniform(static_cast<gpu_bf16*>(a.data()), bytes / 2, 7, -1, 1, gpu.stream()));
  TESSERA_ASSIGN_OR_RETURN(double ms, median_ms(gpu.stream(), 3, reps, [&] {
    return gpuMemcpyAsync(b.data(), a.data(), bytes, gpuMemcpyDeviceToDevice, gpu.stream());
  }));
  return 2.0 * bytes / (ms * 1e-3) / 1e9;  // bytes read + written, GB/s
}

struct PrefillShape {
  int b, hq, hk, nq, nk;
};

gpu_bf16* bf(DeviceBuffer& d) { return static_cast<gpu_bf16*>(d.data()); }

// The prefill table of one head dim.
absl::Status run_prefill(GpuBackend& gpu, int reps, int d, nlohmann::json& rows) {
  const std::vector<PrefillShape> shapes = {
      {16, 16, 16, 1024, 1024}, {8, 16, 16, 2048, 2048},  {4, 16, 16, 4096, 4096},
      {2, 16, 16, 8192, 8192},  {1, 16, 16, 16384, 16384}, {2, 48, 48, 1024, 1024},
      {2, 48, 48, 2048, 1024},  {2, 48, 48, 4096, 8192},  {2, 48, 48, 8192, 4096},
      {2, 48, 48, 16384, 8192}, {8, 32, 8, 2048, 2048},   {1, 32, 8, 8192, 8192}};
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  TextTable table({{"B"}, {"HQ"}, {"HK"}, {"NQ"}, {"NK"}, {"causal"}, {"ms", true}, {"TFLOP/s", true}});
  for (int causal = 0; causal <= 1; ++causal) {
    for (const PrefillShape& p : shapes) {
      if (causal && p.nq != p.nk) continue;
      TESSERA_ASSIGN_OR_RETURN(Buffers buffers, make_buffers(gpu, p.b, p.nq, p.nk, p.hq, p.hk, d, 42));
      gpu.begin_step(make_step(p.b, p.nq, p.nk));
      const gpu::DeviceStep step = gpu.device_step();
      TESSERA_ASSIGN_OR_RETURN(double ms, median_ms(gpu.stream(), 3, reps, [&] {
        return gpu::attention_prefill(bf(buffers.qkv), bf(buffers.k), bf(buffers.v), kBlockSize,
                                      step, p.hq, p.hk, d, scale, causal != 0, 0.0f, 0,
                                      bf(buffers.out), gpu.stream());
      }));
      const double flop = 4.0 * p.b * p.hq * static_cast<double>(p.nq) * p.nk * d *
                          (causal ? 0.5 : 1.0);
      const double tflops = flop / (ms * 1e-3) / 1e12;
      table.add_row({std::to_string(p.b), std::to_string(p.hq), std::to_string(p.hk),
                     std::to_string(p.nq), std::to_string(p.nk), std::to_string(causal),
                     absl::StrFormat("%.3f", ms), absl::StrFormat("%.1f", tflops)});
      rows.push_back({{"head_dim", d}, {"b", p.b}, {"hq", p.hq}, {"hk", p.hk}, {"nq", p.nq},
                      {"nk", p.nk}, {"causal", causal != 0}, {"ms", ms}, {"tflops", tflops}});
    }
  }
  std::printf("prefill attention (d=%d, bf16, paged K/V, block %d)\n%s\n", d, kBlockSize,
              table.render().c_str());
  return absl::OkStatus();
}

// One split-KV decode of `batch` sequences over 32 query / 8 KV heads, timed: the split plan the
// backend makes for `span` keys (the window, when one is set), its workspace, the median ms.
struct DecodeTiming {
  int splits = 0;
  double ms = 0;
};
absl::StatusOr<DecodeTiming> time_decode(GpuBackend& gpu, Buffers& buffers,
                                         const gpu::DeviceStep& step, int batch, int span, int d,
                                         float softcap, int window, int reps) {
  constexpr int kHq = 32, kHk = 8;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  const gpu::DecodeSplits splits = gpu::plan_decode_splits(batch, kHk, span, gpu.multiprocessors());
  const size_t parts = static_cast<size_t>(batch) * kHq * splits.num_splits;
  TESSERA_ASSIGN_OR_RETURN(DeviceBuffer work, gpu.allocate(parts * (d + 2) * sizeof(float)));
  float* part = static_cast<float*>(work.data());
  TESSERA_ASSIGN_OR_RETURN(double ms, median_ms(gpu.stream(), 5, reps, [&] {
    return gpu::attention_decode(bf(buffers.qkv), bf(buffers.k), bf(buffers.v), kBlockSize, step,
                                 kHq, kHk, d, scale, softcap, window, splits, part,
                                 part + parts * d, bf(buffers.out), gpu.stream());
  }));
  return DecodeTiming{splits.num_splits, ms};
}

// The decode table of one head dim; `copy` is the device's copy bandwidth (GB/s).
absl::Status run_decode(GpuBackend& gpu, int reps, int d, double copy, nlohmann::json& rows) {
  constexpr int kHq = 32, kHk = 8;
  TextTable table({{"batch"}, {"context"}, {"splits", true}, {"us", true}, {"GB/s", true},
                   {"% copy", true}});
  for (int batch : {1, 16, 64}) {
    for (int context : {1024, 2048, 4096, 8192, 16384, 32768}) {
      TESSERA_ASSIGN_OR_RETURN(Buffers buffers, make_buffers(gpu, batch, 1, context, kHq, kHk, d, 43));
      gpu.begin_step(make_step(batch, 1, context));
      TESSERA_ASSIGN_OR_RETURN(DecodeTiming t, time_decode(gpu, buffers, gpu.device_step(), batch,
                                                          context, d, 0.0f, 0, reps));
      const double ms = t.ms;
      const double bytes = 2.0 * batch * static_cast<double>(context) * kHk * d * 2 +
                           2.0 * batch * kHq * d * 2;
      const double gbs = bytes / (ms * 1e-3) / 1e9;
      table.add_row({std::to_string(batch), std::to_string(context),
                     std::to_string(t.splits), absl::StrFormat("%.1f", ms * 1e3),
                     absl::StrFormat("%.0f", gbs), absl::StrFormat("%.1f", 100.0 * gbs / copy)});
      rows.push_back({{"head_dim", d}, {"batch", batch}, {"context", context},
                      {"splits", t.splits}, {"ms", ms}, {"gb_s", gbs},
                      {"fraction_of_copy", gbs / copy}});
    }
  }
  std::printf("decode attention (32 query / 8 KV heads, d=%d, bf16, paged, block %d)\n%s\n", d,
              kBlockSize, table.render().c_str());
  return absl::OkStatus();
}

// Soft-capped and windowed attention of one head dim beside the plain kernels on the same shapes:
// causal prefill (1 x 16 query / 8 KV heads, Gemma 2 9B's) and decode (32 / 8 heads, 32k keys).
absl::Status run_features(GpuBackend& gpu, int reps, int d, double copy, nlohmann::json& rows) {
  constexpr float kCap = 50.0f;
  constexpr int kWindow = 4096;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  struct Variant {
    const char* name;
    float softcap;
    int window;
  };
  const Variant variants[] = {{"plain", 0.0f, 0}, {"softcap 50", kCap, 0},
                              {"window 4096", 0.0f, kWindow}, {"both", kCap, kWindow}};
  TextTable table({{"kernel"}, {"shape"}, {"variant"}, {"ms", true}, {"vs plain", true},
                   {"TFLOP/s or GB/s", true}});
  for (const int n : {4096, 16384}) {
    constexpr int kB = 1, kHq = 16, kHk = 8;
    TESSERA_ASSIGN_OR_RETURN(Buffers buffers, make_buffers(gpu, kB, n, n, kHq, kHk, d, 44));
    gpu.begin_step(make_step(kB, n, n));
    const gpu::DeviceStep step = gpu.device_step();
    double plain_ms = 0.0;
    for (const Variant& v : variants) {
      TESSERA_ASSIGN_OR_RETURN(double ms, median_ms(gpu.stream(), 3, reps, [&] {
        return gpu::attention_prefill(bf(buffers.qkv), bf(buffers.k), bf(buffers.v), kBlockSize,
                                      step, kHq, kHk, d, scale, true, v.softcap, v.window,
                                      bf(buffers.out), gpu.stream());
      }));
      if (v.window == 0 && v.softcap == 0.0f) plain_ms = ms;
      // Keys each query sees: p + 1, at most the window.
      double keys = 0.0;
      for (int p = 0; p < n; ++p) keys += v.window > 0 ? std::min(p + 1, v.window) : p + 1;
      const double tflops = 4.0 * kB * kHq * keys * d / (ms * 1e-3) / 1e12;
      const std::string shape = absl::StrFormat("1x16/8 causal %d", n);
      table.add_row({"prefill", shape, v.name, absl::StrFormat("%.3f", ms),
                     absl::StrFormat("%.2f", plain_ms / ms), absl::StrFormat("%.1f", tflops)});
      rows.push_back({{"head_dim", d}, {"kernel", "prefill"}, {"n", n}, {"variant", v.name},
                      {"softcap", v.softcap}, {"window", v.window}, {"ms", ms},
                      {"speedup_vs_plain", plain_ms / ms}, {"tflops", tflops}});
    }
  }
  for (const int batch : {1, 16}) {
    constexpr int kHq = 32, kHk = 8, kContext = 32768;
    TESSERA_ASSIGN_OR_RETURN(Buffers buffers, make_buffers(gpu, batch, 1, kContext, kHq, kHk, d, 45));
    gpu.begin_step(make_step(batch, 1, kContext));
    const gpu::DeviceStep step = gpu.device_step();
    double plain_ms = 0.0;
    for (const Variant& v : variants) {
      const int span = v.window > 0 ? std::min(kContext, v.window) : kContext;
      TESSERA_ASSIGN_OR_RETURN(DecodeTiming t, time_decode(gpu, buffers, step, batch, span, d,
                                                          v.softcap, v.window, reps));
      const double ms = t.ms;
      if (v.window == 0 && v.softcap == 0.0f) plain_ms = ms;
      const double bytes = 2.0 * batch * static_cast<double>(span) * kHk * d * 2;
      const double gbs = bytes / (ms * 1e-3) / 1e9;
      table.add_row({"decode", absl::StrFormat("batch %d, 32/8, 32k keys", batch), v.name,
                     absl::StrFormat("%.4f", ms), absl::StrFormat("%.2f", plain_ms / ms),
                     absl::StrFormat("%.0f (%.0f%% copy)", gbs, 100.0 * gbs / copy)});
      rows.push_back({{"head_dim", d}, {"kernel", "decode"}, {"batch", batch},
                      {"context", kContext}, {"variant", v.name}, {"softcap", v.softcap},
                      {"window", v.window}, {"ms", ms}, {"speedup_vs_plain", plain_ms / ms},
                      {"gb_s", gbs}});
    }
  }
  std::printf("soft-capped and windowed attention (d=%d, bf16, paged, block %d)\n%s\n", d,
              kBlockSize, table.render().c_str());
  return absl::OkStatus();
}

int run(int device, const std::string& json_path, int reps, const std::string& only,
        const std::vector<int>& head_dims) {
  auto created = GpuBackend::create(device);
  if (!created.ok()) return fail(created.status());
  GpuBackend& gpu = **created;
  nlohmann::json report = {{"device", gpu.name()}, {"head_dims", head_dims}, {"block_size", kBlockSize}};

  auto copy = copy_bandwidth(gpu, reps);
  if (!copy.ok()) return fail(copy.status());
  std::printf("%s: device-to-device copy %.0f GB/s\n\n", gpu.name().c_str(), *copy);
  report["copy_gb_s"] = *copy;
  nlohmann::json prefill = nlohmann::json::array(), decode = nlohmann::json::array(),
                 features = nlohmann::json::array();
  for (const int d : head_dims) {
    if (only.empty() || only == "prefill") {
      if (absl::Status s = run_prefill(gpu, reps, d, prefill); !s.ok()) return fail(s);
    }
    if (only.empty() || only == "decode") {
      if (absl::Status s = run_decode(gpu, reps, d, *copy, decode); !s.ok()) return fail(s);
    }
    if (only == "features") {
      if (absl::Status s = run_features(gpu, reps, d, *copy, features); !s.ok()) return fail(s);
    }
  }
  if (!prefill.empty()) report["prefill"] = prefill;
  if (!decode.empty()) report["decode"] = decode;
  if (!features.empty()) report["features"] = features;
  if (absl::Status s = gpu.synchronize(); !s.ok()) return fail(s);
  if (!json_path.empty()) std::ofstream(json_path) << report.dump(2) << "\n";
  return 0;
}

#endif  // TESSERA_WITH_GPU

}  // namespace

int bench_kernels_command(int argc, char** argv) {
  auto args = Args::parse(argc, argv, {"device", "json", "reps", "only", "head-dim"}, {"help"});
  if (!args.ok()) return fail(args.status());
  if (args->has("help")) return print_usage(kUsage);
  auto device = args->get_int("device", 0);
  if (!device.ok()) return fail(device.status());
  auto reps = args->get_int("reps", 20);
  if (!reps.ok()) return fail(reps.status());
  if (*reps < 1) return fail(absl::InvalidArgumentError("--reps must be at least 1"));
  const std::string only = args->get("only");
  if (!only.empty() && only != "prefill" && only != "decode" && only != "features") {
    return fail(absl::InvalidArgumentError("--only: \"" + only +
                                           "\" is not prefill, decode or features"));
  }
  std::vector<int> head_dims;
  for (absl::string_view part : absl::StrSplit(args->get("head-dim", "128"), ',')) {
    int d = 0;
    if (!absl::SimpleAtoi(part, &d) || (d != 64 && d != 128 && d != 256)) {
      return fail(absl::InvalidArgumentError("--head-dim: \"" + std::string(part) +
                                             "\" is not 64, 128 or 256"));
    }
    head_dims.push_back(d);
  }
#if defined(TESSERA_WITH_GPU)
  return run(static_cast<int>(*device), args->get("json"), static_cast<int>(*reps), only, head_dims);
#else
  return fail(absl::FailedPreconditionError(
      "this tessera was built without a GPU backend (TESSERA_GPU=off); nothing to time"));
#endif
}

}  // namespace tessera::cli
