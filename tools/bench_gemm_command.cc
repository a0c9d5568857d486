// tessera bench gemm: the GEMMs of a Llama-3-8B layer and its lm_head (qkv 6144x4096, o 4096x4096,
// gate_up 28672x4096, down 4096x14336, lm_head 128256x4096 with fp32 logits) at each token count
// M, through the GPU backend's TunableGemm: the library's Default, and the fastest candidate
// (library heuristic, enumerated, tessera's own small-M kernels) found by a plain best-of search
// local to this benchmark -- each candidate timed briefly, the fastest few checked against
// Default (elementwise, the tuner's bf16 tolerance) and timed again. Reports ms, TFLOP/s, GB/s
// (w, x and out each moved once) and the share of the device-to-device copy bandwidth measured
// in the same process; prints a table and writes JSON. Timings are event-timed means over operand
// sets rotated past the L2 cache, median of three. Beside each GEMM, a kernel that only reads the
// same number of bytes (gpu::stream_read), timed the same way: the ceiling of a weight stream of
// that size, launch and ramp included. `--tensor-parallel N` times one rank's share of each GEMM
// under N-way tensor parallelism instead (qkv, gate_up and lm_head: N / ranks rows of the weight;
// o and down: K / ranks columns). `--dtype fp8` times the same shapes as scaled FP8 GEMMs (e4m3fn on
// CUDA, e4m3fnuz on ROCm; per-tensor scales, bf16 output -- lm_head's too), operands quantized
// from the bf16 ones; tests/bench/bench_scaled_mm.py times PyTorch's torch._scaled_mm beside it.
// `--dtype fp8-rowwise` times them with a scale per token and per output feature, as
// `quantization: fp8` runs them, tessera's FP8-weight kernels among the candidates at M <= 16.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <utility>
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
#include "absl/functional/function_ref.h"
#include "kernels/gemm/gpu_gemm.h"
#include "kernels/gemm/stream_read.h"
#include "kernels/gpu_backend.h"
#include "kernels/gpu_ops.h"
#include "runtime/tuning/tuning_config.h"
#endif

namespace tessera::cli {

namespace {

constexpr char kUsage[] =
    "usage: tessera bench gemm [--device N] [--json PATH] [--m 1,8,32,128,512,2048,8192]\n"
    "                         [--tensor-parallel N] [--dtype bf16|fp8|fp8-rowwise]\n"
    "  Times the Llama-3-8B GEMMs: the library default and the best tuned candidate;\n"
    "  with --tensor-parallel, one rank's share of each under N-way tensor parallelism;\n"
    "  with --dtype fp8, as scaled FP8 GEMMs (per-tensor scales, bf16 out); fp8-rowwise:\n"
    "  a scale per token and per output feature (what quantization: fp8 runs).\n";

int fail(const absl::Status& s) {
  std::fprintf(stderr, "tessera bench gemm: %s\n", std::string(s.message()).c_str());
  return 1;
}

absl::StatusOr<std::vector<int64_t>> parse_m_list(const std::string& text) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1) {
      return absl::InvalidArgumentError("--m: \"" + text +
                                        "\" is not a comma-separated list of positive integers");
    }
    out.push_back(v);
  }
  return out;
}

#if defined(TESSERA_WITH_GPU)

struct LinearShape {
  const char* name;
  int64_t n, k;
  GemmDType out;
  bool split_k;  // row-parallel under tensor parallelism (the input's columns are split)
};
constexpr LinearShape kShapes[] = {{"qkv", 6144, 4096, GemmDType::kBF16, false},
                                   {"o", 4096, 4096, GemmDType::kBF16, true},
                                   {"gate_up", 28672, 4096, GemmDType::kBF16, false},
                                   {"down", 4096, 14336, GemmDType::kBF16, true},
                                   {"lm_head", 128256, 4096, GemmDType::kF32, false}};
constexpr int kFinalists = 3;         // fastest candidates checked and timed again
constexpr double kRoughMs = 2.0;      // device time of one candidate's first timing
constexpr double kFinalMs = 60.0;     // device time of each final timing

// A start and a stop event, destroyed on every return (the failing ones too).
struct TimingEvents {
  gpuEvent_t start = nullptr, stop = nullptr;
  ~TimingEvents() {
    if (start != nullptr) (void)gpuEventDestroy(start);
    if (stop != nullptr) (void)gpuEventDestroy(stop);
  }
};

absl::StatusOr<double> copy_bandwidth(GpuBackend& gpu) {
  const size_t bytes = size_t{1} << 30;
  TESSERA_ASSIGN_OR_RETURN(DeviceBuffer a, gpu.allocate(bytes));
  TESSERA_ASSIGN_OR_RETURN(DeviceBuffer b, gpu.allocate(bytes));
  GPU_CHECK(gpu::fill_uniform(static_cast<gpu_bf16*>(a.data()), bytes / 2, 7, -1, 1, gpu.stream()));
  TimingEvents ev;
  GPU_CHECK(gpuEventCreate(&ev.start));
  GPU_CHECK(gpuEventCreate(&ev.stop));
  std::vector<float> ms;
  for (int i = 0; i < 12; ++i) {
    GPU_CHECK(gpuEventRecord(ev.start, gpu.stream()));
    GPU_CHECK(gpuMemcpyAsync(b.data(), a.data(), bytes, gpuMemcpyDeviceToDevice, gpu.stream()));
    GPU_CHECK(gpuEventRecord(ev.stop, gpu.stream()));
    GPU_CHECK(gpuEventSynchronize(ev.stop));
    if (i < 2) continue;  // warm-up
    GPU_CHECK(gpuEventElapsedTime(&ms.emplace_back(), ev.start, ev.stop));
  }
  std::sort(ms.begin(), ms.end());
  return 2.0 * bytes / (ms[ms.size() / 2] * 1e-3) / 1e9;  // bytes read + written, GB/s
}

// The median of three means of about `budget_ms` each; `mean_ms(n)` times n calls and returns their
// mean. `estimate_ms` (one call's rough time) sets n.
absl::StatusOr<double> median_of_three(absl::FunctionRef<absl::StatusOr<double>(int64_t)> mean_ms,
                                       double estimate_ms, double budget_ms) {
  const int64_t iterations =
      std::clamp<int64_t>(static_cast<int64_t>(budget_ms / std::max(estimate_ms, 1e-3)), 1, 1000);
  std::vector<double> ms;
  for (int r = 0; r < 3; ++r) {
    TESSERA_ASSIGN_OR_RETURN(ms.emplace_back(), mean_ms(iterations));
  }
  std::sort(ms.begin(), ms.end());
  return ms[1];
}

// gpu::stream_read of `bytes` from `copies` buffers in turn, timed as timed_ms times a candidate:
// median of three event-timed means of about kFinalMs each.
absl::StatusOr<double> read_ms(GpuBackend& gpu, size_t bytes, int copies) {
  std::vector<DeviceBuffer> buffers;
  for (int c = 0; c < copies; ++c) {
    TESSERA_ASSIGN_OR_RETURN(buffers.emplace_back(), gpu.allocate(bytes));
    GPU_CHECK(gpu::fill_uniform(static_cast<gpu_bf16*>(buffers.back().data()),
                                static_cast<int64_t>(bytes / 2), 11 + c, -1, 1, gpu.stream()));
  }
  TESSERA_ASSIGN_OR_RETURN(DeviceBuffer sink, gpu.allocate(sizeof(uint32_t)));
  TimingEvents ev;
  GPU_CHECK(gpuEventCreate(&ev.start));
  GPU_CHECK(gpuEventCreate(&ev.stop));
  auto mean_ms = [&](int64_t iterations) -> absl::StatusOr<double> {
    GPU_CHECK(gpuEventRecord(ev.start, gpu.stream()));
    for (int64_t i = 0; i < iterations; ++i) {
      GPU_CHECK(gpu::stream_read(buffers[i % copies].data(), bytes, gpu.multiprocessors(),
                                 static_cast<uint32_t*>(sink.data()), gpu.stream()));
    }
    GPU_CHECK(gpuEventRecord(ev.stop, gpu.stream()));
    GPU_CHECK(gpuEventSynchronize(ev.stop));
    float ms = 0.0f;
    GPU_CHECK(gpuEventElapsedTime(&ms, ev.start, ev.stop));
    return static_cast<double>(ms) / static_cast<double>(iterations);
  };
  TESSERA_RETURN_IF_ERROR(mean_ms(1).status());  // warm-up
  TESSERA_ASSIGN_OR_RETURN(const double estimate, mean_ms(1));
  return median_of_three(mean_ms, estimate, kFinalMs);
}

// Median of three event-timed means of about `budget_ms` each.
absl::StatusOr<double> timed_ms(TunableGemm& t, const std::string& name, double estimate_ms,
                                double budget_ms) {
  return median_of_three([&](int64_t iterations) { return t.time_ms(name, iterations); },
                         estimate_ms, budget_ms);
}

bool within(const std::vector<float>& ref, const std::vector<float>& got,
            const NumericsTolerance& tol) {
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!(std::abs(static_cast<double>(got[i]) - ref[i]) <= tol.atol + tol.rtol * std::abs(ref[i]))) {
      return false;
    }
  }
  return ref.size() == got.size();
}

std::string origin_of(const std::string& name) {
  if (name == "Default") return "default";
  return name.rfind("tessera_", 0) == 0 ? "own" : "library";
}

struct Result {
  double default_ms = 0, best_ms = 0, own_ms = 0;
  std::string best, own;
  // Every own kernel's first (rough) timing: which variants come close, in the JSON.
  std::vector<std::pair<std::string, double>> own_rough;
  size_t candidates = 0;
  int rejected = 0;
};

// The plain best-of search described at the top of the file, on the prepared signature.
absl::StatusOr<Result> tune(TunableGemm& t, const GemmSignature& sig) {
  Result r;
  TESSERA_ASSIGN_OR_RETURN(const std::vector<std::string> names, t.candidates(sig));
  r.candidates = names.size();
  TESSERA_RETURN_IF_ERROR(t.run("Default", 0));
  TESSERA_ASSIGN_OR_RETURN(const double default_rough, t.time_ms("Default", 1));
  std::vector<std::pair<double, std::string>> rough;
  for (const std::string& name : names) {
    // A warm-up run keeps module loading out of short timings; a failing candidate drops out.
    if (default_rough < 1.0 && !t.run(name, 0).ok()) continue;
    auto ms = t.time_ms(name, std::clamp<int64_t>(static_cast<int64_t>(kRoughMs / default_rough), 1, 50));
    if (ms.ok()) rough.emplace_back(*ms, name);
  }
  std::sort(rough.begin(), rough.end());
  for (const auto& [ms, name] : rough) {
    if (origin_of(name) == "own") r.own_rough.emplace_back(name, ms);
  }
  TESSERA_RETURN_IF_ERROR(t.run("Default", 0));
  TESSERA_ASSIGN_OR_RETURN(const std::vector<float> ref, t.output(0));
  const NumericsTolerance tol = TuningConfig{}.tolerance(sig.dtype);
  auto checked = [&](const std::string& name) -> absl::StatusOr<bool> {
    TESSERA_RETURN_IF_ERROR(t.run(name, 0));
    TESSERA_ASSIGN_OR_RETURN(const std::vector<float> got, t.output(0));
    return within(ref, got, tol);
  };
  TESSERA_ASSIGN_OR_RETURN(r.default_ms, timed_ms(t, "Default", default_rough, kFinalMs));
  r.best = "Default";
  r.best_ms = r.default_ms;
  int finalists = 0;
  for (const auto& [ms, name] : rough) {
    if (finalists == kFinalists) break;
    if (name == "Default") continue;
    TESSERA_ASSIGN_OR_RETURN(const bool ok, checked(name));
    if (!ok) {
      ++r.rejected;
      continue;
    }
    ++finalists;
    TESSERA_ASSIGN_OR_RETURN(const double final_ms, timed_ms(t, name, ms, kFinalMs));
    if (final_ms < r.best_ms) {
      r.best_ms = final_ms;
      r.best = name;
    }
  }
  // The fastest own kernel on its own line, when there is one (decode shapes).
  for (const auto& [ms, name] : rough) {
    if (origin_of(name) != "own") continue;
    TESSERA_ASSIGN_OR_RETURN(const bool ok, checked(name));
    if (!ok) {
      ++r.rejected;
      continue;
    }
    r.own = name;
    TESSERA_ASSIGN_OR_RETURN(r.own_ms, timed_ms(t, name, ms, kFinalMs));
    break;
  }
  return r;
}

int run(int device, const std::string& json_path, const std::vector<int64_t>& ms, int64_t ranks,
        bool fp8, bool rowwise) {
  auto created = GpuBackend::create(device);
  if (!created.ok()) return fail(created.status());
  GpuBackend& gpu = **created;
  TunableGemm& tunable = *gpu.tunable_gemm();
  auto copy = copy_bandwidth(gpu);
  if (!copy.ok()) return fail(copy.status());
  std::printf("%s: device-to-device copy %.0f GB/s, L2 %zu MiB\n\n", gpu.name().c_str(), *copy,
              tunable.cache_bytes() >> 20);
  const GemmDType in_dtype = fp8 ? gpu::fp8_gemm_dtype() : GemmDType::kBF16;
  nlohmann::json report = {{"device", gpu.name()},
                           {"copy_gb_s", *copy},
                           {"tensor_parallel", ranks},
                           {"dtype", gemm_dtype_name(in_dtype)},
                           {"rowwise", rowwise}};
  for (const auto& [key, value] : tunable.validators()) report["validators"][key] = value;

  TextTable table({{"gemm"}, {"M", true}, {"cands", true}, {"default ms", true},
                   {"default GB/s", true}, {"best ms", true}, {"TFLOP/s", true}, {"GB/s", true},
                   {"% copy", true}, {"x default", true}, {"best"}, {"own % copy", true},
                   {"read % copy", true}});
  nlohmann::json rows = nlohmann::json::array();
  for (LinearShape s : kShapes) {
    (s.split_k ? s.k : s.n) /= ranks;
    for (int64_t m : ms) {
      // FP8 GEMMs write bf16 (lm_head's logits too: no FP8 GEMM writes fp32 here).
      const GemmDType out = fp8 ? GemmDType::kBF16 : s.out;
      const GemmSignature sig = GemmSignature::for_linear(m, s.n, s.k, in_dtype, out, rowwise);
      const size_t operand = tunable.operand_bytes(sig);
      const int copies = static_cast<int>(
          std::clamp<size_t>(2 * tunable.cache_bytes() / operand + 1, 1, 16));
      if (absl::Status st = tunable.prepare(sig, copies); !st.ok()) return fail(st);
      auto r = tune(tunable, sig);
      tunable.release();
      if (!r.ok()) return fail(r.status());
      // The operand bytes rounded down to whole 16-byte vectors (stream_read's unit).
      auto read = read_ms(gpu, operand / 16 * 16, copies);
      if (!read.ok()) return fail(read.status());
      const double bytes = static_cast<double>(operand);
      auto gbs = [&](double t) { return bytes / (t * 1e-3) / 1e9; };
      const double tflops = 2.0 * m * s.n * s.k / (r->best_ms * 1e-3) / 1e12;
      table.add_row({s.name, std::to_string(m), std::to_string(r->candidates),
                     absl::StrFormat("%.4f", r->default_ms), absl::StrFormat("%.0f", gbs(r->default_ms)),
                     absl::StrFormat("%.4f", r->best_ms), absl::StrFormat("%.1f", tflops),
                     absl::StrFormat("%.0f", gbs(r->best_ms)),
                     absl::StrFormat("%.1f", 100.0 * gbs(r->best_ms) / *copy),
                     absl::StrFormat("%.2f", r->default_ms / r->best_ms), r->best,
                     r->own.empty() ? "" : absl::StrFormat("%.1f", 100.0 * gbs(r->own_ms) / *copy),
                     absl::StrFormat("%.1f", 100.0 * gbs(*read) / *copy)});
      nlohmann::json row = {{"gemm", s.name}, {"m", m}, {"n", s.n}, {"k", s.k},
                            {"dtype", gemm_dtype_name(in_dtype)},
                            {"out", out == GemmDType::kF32 ? "f32" : "bf16"},
                            {"candidates", r->candidates}, {"rejected", r->rejected},
                            {"default_ms", r->default_ms}, {"best_ms", r->best_ms},
                            {"best", r->best}, {"best_origin", origin_of(r->best)},
                            {"tflops", tflops}, {"gb_s", gbs(r->best_ms)},
                            {"fraction_of_copy", gbs(r->best_ms) / *copy},
                            {"default_gb_s", gbs(r->default_ms)}, {"read_ms", *read},
                            {"read_fraction_of_copy", gbs(*read) / *copy}};
      if (!r->own.empty()) {
        row["own"] = r->own;
        row["own_ms"] = r->own_ms;
        row["own_fraction_of_copy"] = gbs(r->own_ms) / *copy;
        for (const auto& [name, ms] : r->own_rough) row["own_rough_ms"][name] = ms;
      }
      rows.push_back(row);
      std::fprintf(stderr, "%s M=%ld: default %.4f ms, best %.4f ms (%s)\n", s.name, long(m),
                   r->default_ms, r->best_ms, r->best.c_str());
    }
  }
  report["gemms"] = rows;
  std::printf("GEMMs of the Llama-3-8B shape (%s), M tokens%s\n%s\n",
              fp8 ? absl::StrFormat("%s, %s scales, bf16 out", gemm_dtype_name(in_dtype),
                                    rowwise ? "row-wise" : "per-tensor")
                        .c_str()
                  : "bf16; lm_head fp32 out",
              ranks > 1 ? absl::StrFormat(", one rank's share at tensor parallel %d", ranks).c_str()
                        : "",
              table.render().c_str());
  if (absl::Status s = gpu.synchronize(); !s.ok()) return fail(s);
  if (!json_path.empty()) std::ofstream(json_path) << report.dump(2) << "\n";
  return 0;
}

#endif  // TESSERA_WITH_GPU

}  // namespace

int bench_gemm_command(int argc, char** argv) {
  auto args =
      Args::parse(argc, argv, {"device", "json", "m", "tensor-parallel", "dtype"}, {"help"});
  if (!args.ok()) return fail(args.status());
  if (args->has("help")) return print_usage(kUsage);
  auto device = args->get_int("device", 0);
  if (!device.ok()) return fail(device.status());
  auto ms = parse_m_list(args->get("m", "1,8,32,128,512,2048,8192"));
  if (!ms.ok()) return fail(ms.status());
  auto ranks = args->get_int("tensor-parallel", 1);
  if (!ranks.ok()) return fail(ranks.status());
  // Every split shape divides evenly (4096, 6144, 14336, 28672 and 128256 by 1, 2, 4 and 8).
  if (*ranks != 1 && *ranks != 2 && *ranks != 4 && *ranks != 8) {
    return fail(absl::InvalidArgumentError(
        absl::StrFormat("--tensor-parallel: %d; 1, 2, 4 or 8 expected", *ranks)));
  }
  const std::string dtype = args->get("dtype", "bf16");
  if (dtype != "bf16" && dtype != "fp8" && dtype != "fp8-rowwise") {
    return fail(absl::InvalidArgumentError("--dtype: \"" + dtype +
                                           "\"; bf16, fp8 or fp8-rowwise expected"));
  }
#if defined(TESSERA_WITH_GPU)
  return run(static_cast<int>(*device), args->get("json"), *ms, *ranks, dtype != "bf16",
             dtype == "fp8-rowwise");
#else
  return fail(absl::FailedPreconditionError(
      "this tessera was built without a GPU backend (TESSERA_GPU=off); nothing to time"));
#endif
}

}  // namespace tessera::cli
