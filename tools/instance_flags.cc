#include "tools/instance_flags.h"

#include "runtime/backend/quantization.h"
#include "runtime/placement/device_map.h"

namespace tessera::cli {

const std::set<std::string>& instance_flags() {
  static const std::set<std::string> flags = {
      "threads",    "backend",    "gpu-device",           "dtype",         "devices",
      "device-map", "max-memory", "tensor-parallel-size", "micro-batches", "decode-graphs",
      "quantization", "quantization-keep", "kv-cache-dtype"};
  return flags;
}

const char kInstanceFlagsUsage[] =
    "      --backend B             auto (GPU if visible, else CPU), cpu, or gpu (default auto)\n"
    "      --gpu-device N          GPU ordinal (default 0)\n"
    "      --dtype D               GPU compute dtype: bfloat16 (bf16) or float16 (fp16)\n"
    "                              (default bfloat16; the CPU backend computes in float32)\n"
    "      --devices LIST          split the model over these devices, in order (0,1 or all)\n"
    "      --device-map MAP        auto, balanced, balanced_low_0, sequential, or prefix=device,...\n"
    "      --max-memory CAPS       per-device memory caps, e.g. 0=20GiB,1=20GiB\n"
    "      --tensor-parallel-size N  split every layer over N devices (default 1)\n"
    "      --quantization Q        auto (default: fp8 for an FP8 checkpoint on a GPU with FP8,\n"
    "                              else none), none, or fp8: the decoder's linear weights in\n"
    "                              FP8 (GPU, compute capability 8.9+)\n"
    "      --quantization-keep L   weights fp8 leaves in dtype: qkv, o, gate_up, down,\n"
    "                              layers.N, layers.N.<projection> (comma-separated)\n"
    "      --kv-cache-dtype D      auto (the compute dtype) or fp8: e4m3 K/V with per-layer\n"
    "                              scales, twice the tokens (GPU, compute capability 8.9+)\n"
    "      --micro-batches N       parts a large step flows through the devices in (default 2)\n"
    "      --decode-graphs auto|off  replay decode steps as recorded GPU graphs (default auto)\n"
    "      --threads N             CPU threads (default: every core)\n";

absl::StatusOr<InstanceOptions> instance_options(const Args& args) {
  InstanceOptions options;
  auto threads = args.get_int("threads", 0);
  if (!threads.ok()) return threads.status();
  auto gpu_device = args.get_int("gpu-device", 0);
  if (!gpu_device.ok()) return gpu_device.status();
  auto backend = parse_backend_kind(args.get("backend", "auto"));
  if (!backend.ok()) return backend.status();
  auto dtype = parse_gpu_dtype(args.get("dtype", "bfloat16"));
  if (!dtype.ok()) return dtype.status();
  options.backend.kind = *backend;
  options.backend.gpu_device = static_cast<int>(*gpu_device);
  options.backend.gpu_dtype = *dtype;
  options.backend.threads = static_cast<int>(*threads);
  if (const std::string devices = args.get("devices"); devices == "all") {
    options.backend.all_devices = true;
  } else {
    auto list = parse_devices(devices);
    if (!list.ok()) return list.status();
    options.backend.devices = *std::move(list);
  }
  options.device_map = args.get("device-map", "auto");
  options.max_memory = args.get("max-memory");
  auto tensor_parallel = args.get_int("tensor-parallel-size", 1);
  if (!tensor_parallel.ok()) return tensor_parallel.status();
  options.tensor_parallel_size = static_cast<int32_t>(*tensor_parallel);
  auto quantization = parse_quantization(args.get("quantization", "auto"));
  if (!quantization.ok()) return quantization.status();
  options.quantization = *quantization;
  auto keep = QuantizationKeep::parse(args.get("quantization-keep"));
  if (!keep.ok()) return keep.status();
  options.quantization_keep = *std::move(keep);
  auto kv_cache_dtype = parse_kv_cache_dtype(args.get("kv-cache-dtype", "auto"));
  if (!kv_cache_dtype.ok()) return kv_cache_dtype.status();
  options.kv_cache_dtype = *kv_cache_dtype;
  auto micro_batches = args.get_int("micro-batches", 2);
  if (!micro_batches.ok()) return micro_batches.status();
  options.execution.micro_batches = static_cast<int32_t>(*micro_batches);
  if (const std::string graphs = args.get("decode-graphs", "auto"); graphs == "off") {
    options.execution.decode_graphs = DecodeGraphs::kOff;
  } else if (graphs != "auto") {
    return absl::InvalidArgumentError("--decode-graphs: \"" + graphs + "\" is not auto or off");
  }
  return options;
}

}  // namespace tessera::cli
