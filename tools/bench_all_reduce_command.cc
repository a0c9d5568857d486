// tessera bench all-reduce: the tensor-parallel all-reduce over GPUs of this host, through NCCL and
// through the one-shot peer-memory kernel (kernels/gpu_communicator.h), per message size: a
// decode step's hidden rows (bf16 rows of 4096 or 8192) up to prefill sizes. The group is made as
// the daemon makes it (auto: the one-shot kept below the size where it stops beating NCCL,
// measured at creation); each size is then timed through both paths, one host thread per rank,
// and the all-reduce followed by the residual add and RMSNorm of a layer both ways (NCCL then the
// norm kernel, and the fused one-shot): groups of 8 ops back to back between device events after
// a warm-up, the median group, the slowest rank's. Prints a table, writes JSON.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "base/dtype.h"
#include "runtime/backend_factory.h"
#include "runtime/placement/device_map.h"
#include "runtime/placement/memory_size.h"
#include "tools/cli_args.h"
#include "tools/command_support.h"
#include "tools/commands.h"
#include "tools/text_table.h"

#if defined(TESSERA_WITH_GPU)
#include "kernels/gpu_backend.h"
#include "kernels/gpu_communicator.h"
#endif

namespace tessera::cli {

namespace {

constexpr char kUsage[] =
    "usage: tessera bench all-reduce [--devices 0,1,...] [--json PATH] [--sizes 4KiB,64KiB,1MiB,...]\n"
    "                                [--dtype bf16|fp16|fp32] [--iterations N]\n"
    "  Times the tensor-parallel all-reduce per message size (bytes; K and M suffixes are KiB\n"
    "  and MiB): NCCL, the one-shot peer-memory kernel, and which one the daemon would use.\n"
    "  --devices defaults to every visible GPU; TESSERA_ALL_REDUCE and TESSERA_NCCL_LIBRARY "
    "apply.\n";

// A decode step's rows of 4096 and 8192 bf16 (1 .. 256 rows), then prefill-sized messages.
constexpr char kDefaultSizes[] =
    "4KiB,8KiB,16KiB,32KiB,64KiB,128KiB,256KiB,512KiB,1MiB,2MiB,4MiB,16MiB,64MiB";

constexpr char kCommand[] = "bench all-reduce";
int fail(const absl::Status& s) { return report_error(kCommand, s); }
int usage_error(const absl::Status& s) { return report_error(kCommand, s, kExitUsage); }

// Byte counts as the memory keys take them (parse_memory_size: "4KiB", "1MiB", "65536").
absl::StatusOr<std::vector<size_t>> parse_sizes(const std::string& text) {
  std::vector<size_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    absl::StatusOr<uint64_t> bytes = parse_memory_size(std::string_view(part.data(), part.size()), "--sizes");
    if (!bytes.ok()) return bytes.status();
    if (*bytes == 0) return absl::InvalidArgumentError("--sizes: a message of 0 bytes");
    out.push_back(static_cast<size_t>(*bytes));
  }
  return out;
}

#if defined(TESSERA_WITH_GPU)

// "16" when bytes are a whole number of rows of `width` 16-bit elements, else "".
std::string rows_of(size_t bytes, size_t width) {
  return bytes % (2 * width) == 0 ? std::to_string(bytes / (2 * width)) : "";
}

int run(std::vector<int32_t> devices, const std::string& json_path, const std::vector<size_t>& sizes,
        DType dtype, int iterations) {
  if (devices.empty()) {
    for (int d = 0; d < GpuBackend::device_count(); ++d) devices.push_back(d);
  }
  if (devices.size() < 2) {
    return fail(absl::FailedPreconditionError(absl::StrFormat(
        "an all-reduce needs 2 GPUs or more; %d %s", devices.size(),
        devices.size() == static_cast<size_t>(GpuBackend::device_count()) ? "visible" : "listed")));
  }
  std::vector<std::unique_ptr<GpuBackend>> owned;
  std::vector<GpuBackend*> ranks;
  for (int d : devices) {
    auto b = GpuBackend::create(d, dtype == DType::kF16 ? DType::kF16 : DType::kBF16);
    if (!b.ok()) return fail(b.status());
    ranks.push_back(b->get());
    owned.push_back(*std::move(b));
  }
  auto comms = create_gpu_communicators(ranks);
  if (!comms.ok()) return fail(comms.status());
  std::vector<Communicator*> group;
  for (auto& c : *comms) group.push_back(c.get());
  const std::string described = group[0]->describe();
  const size_t limit = one_shot_limit(*group[0]);
  const size_t fused = fused_limit(*group[0]);
  auto timings = time_all_reduce(group, sizes, dtype, iterations);
  if (!timings.ok()) return fail(timings.status());

  std::string names;
  for (GpuBackend* b : ranks) names += (names.empty() ? "" : ", ") + b->name();
  std::printf("%zu ranks: %s\nall-reduce: %s\n%s, median of %d groups of 8 ops per size, slowest rank\n\n",
              ranks.size(), names.c_str(), described.c_str(),
              std::string(dtype_name(dtype)).c_str(), iterations);
  TextTable table({{"bytes", true},
                   {"size", true},
                   {"rows x4096", true},
                   {"rows x8192", true},
                   {"NCCL us", true},
                   {"one-shot us", true},
                   {"NCCL / one-shot", true},
                   {"chosen"},
                   {"NCCL + norm us", true},
                   {"fused us", true},
                   {"fused chosen"}});
  nlohmann::json rows = nlohmann::json::array();
  for (const AllReduceTiming& t : *timings) {
    const bool has_one_shot = t.one_shot_us >= 0, has_fused = t.fused_us >= 0;
    const std::string chosen = limit > 0 && t.bytes <= limit ? "one-shot" : "nccl";
    const bool fused_chosen = fused > 0 && t.bytes <= fused;
    auto cell = [](double us) { return us >= 0 ? absl::StrFormat("%.1f", us) : std::string("-"); };
    table.add_row({std::to_string(t.bytes), format_memory_size(t.bytes), rows_of(t.bytes, 4096),
                   rows_of(t.bytes, 8192), cell(t.nccl_us), cell(t.one_shot_us),
                   has_one_shot ? absl::StrFormat("%.2f", t.nccl_us / t.one_shot_us) : "-",
                   chosen, cell(t.nccl_norm_us), cell(t.fused_us), fused_chosen ? "yes" : "no"});
    nlohmann::json row = {{"bytes", t.bytes}, {"nccl_us", t.nccl_us}, {"chosen", chosen},
                          {"fused_chosen", fused_chosen}};
    if (has_one_shot) row["one_shot_us"] = t.one_shot_us;
    if (t.nccl_norm_us >= 0) row["nccl_norm_us"] = t.nccl_norm_us;
    if (has_fused) row["fused_us"] = t.fused_us;
    rows.push_back(row);
  }
  std::printf("%s\n", table.render().c_str());
  for (GpuBackend* b : ranks) {
    if (absl::Status s = b->synchronize(); !s.ok()) return fail(s);
  }
  if (!json_path.empty()) {
    nlohmann::json report = {{"devices", names},
                             {"ranks", ranks.size()},
                             {"all_reduce", described},
                             {"one_shot_limit_bytes", limit},
                             {"fused_limit_bytes", fused},
                             {"dtype", std::string(dtype_name(dtype))},
                             {"iterations", iterations},
                             {"sizes", rows}};
    std::ofstream(json_path) << report.dump(2) << "\n";
  }
  return 0;
}

#endif  // TESSERA_WITH_GPU

}  // namespace

int bench_all_reduce_command(int argc, char** argv) {
  auto args =
      Args::parse(argc, argv, {"devices", "json", "sizes", "dtype", "iterations"}, {"help"});
  if (!args.ok()) return usage_error(args.status());
  if (args->has("help")) return print_usage(kUsage);
  std::vector<int32_t> devices;
  if (args->has("devices")) {
    auto d = parse_devices(args->get("devices"));
    if (!d.ok()) return usage_error(d.status());
    devices = *d;
  }
  auto sizes = parse_sizes(args->get("sizes", kDefaultSizes));
  if (!sizes.ok()) return usage_error(sizes.status());
  // The compute dtypes as --dtype names them elsewhere, and fp32 (the logit gathers').
  const std::string dtype_text = args->get("dtype", "bf16");
  DType dtype = DType::kF32;
  if (dtype_text != "f32" && dtype_text != "fp32" && dtype_text != "float32") {
    auto parsed = parse_gpu_dtype(dtype_text);
    if (!parsed.ok()) {
      return usage_error(absl::InvalidArgumentError(
          absl::StrCat("--", parsed.status().message(), ", or fp32")));
    }
    dtype = *parsed;
  }
  auto iterations = args->get_int("iterations", 200);
  if (!iterations.ok()) return usage_error(iterations.status());
  if (*iterations < 1) return usage_error(absl::InvalidArgumentError("--iterations: at least 1"));
#if defined(TESSERA_WITH_GPU)
  return run(devices, args->get("json"), *sizes, dtype, static_cast<int>(*iterations));
#else
  (void)devices;
  (void)dtype;
  return fail(absl::FailedPreconditionError(
      "this tessera was built without a GPU backend (TESSERA_GPU=off); nothing to time"));
#endif
}

}  // namespace tessera::cli
