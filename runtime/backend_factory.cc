#include "runtime/backend_factory.h"

#include <algorithm>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/in_process_communicator.h"
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "spdlog/spdlog.h"

#if defined(TESSERA_WITH_GPU)
#include "kernels/gpu_backend.h"
#include "kernels/gpu_communicator.h"
#endif

namespace tessera {

absl::StatusOr<BackendKind> parse_backend_kind(std::string_view text) {
  if (text == "auto") return BackendKind::kAuto;
  if (text == "cpu") return BackendKind::kCpu;
  if (text == "gpu") return BackendKind::kGpu;
  return absl::InvalidArgumentError(
      str_cat("backend: \"", text, "\" is not one of auto, cpu, gpu"));
}

std::string_view backend_kind_name(BackendKind kind) {
  switch (kind) {
    case BackendKind::kAuto: return "auto";
    case BackendKind::kCpu: return "cpu";
    case BackendKind::kGpu: return "gpu";
  }
  return "auto";
}

absl::StatusOr<DType> parse_gpu_dtype(std::string_view text) {
  if (text == "bfloat16" || text == "bf16") return DType::kBF16;
  if (text == "float16" || text == "fp16") return DType::kF16;
  return absl::InvalidArgumentError(str_cat(
      "dtype: \"", text, "\" is not one of bfloat16 (bf16), float16 (fp16)"));
}

std::string_view gpu_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return "bfloat16";
    case DType::kF16:
      return "float16";
    default:
      return dtype_name(dtype);  // not a GPU compute dtype: named as it is, never as bfloat16
  }
}

bool built_with_gpu() {
#if defined(TESSERA_WITH_GPU)
  return true;
#else
  return false;
#endif
}

int visible_gpus() {
#if defined(TESSERA_WITH_GPU)
  return GpuBackend::device_count();
#else
  return 0;
#endif
}

namespace {

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> create_gpu_group(
    std::span<Backend* const> ranks) {
#if defined(TESSERA_WITH_GPU)
  std::vector<GpuBackend*> gpus;
  for (Backend* b : ranks) gpus.push_back(static_cast<GpuBackend*>(b));
  return create_gpu_communicators(gpus);
#else
  (void)ranks;
  return absl::InternalError("GPU backends in a build without a GPU backend");
#endif
}

absl::Status built_without_gpu_error() {
  return absl::FailedPreconditionError(
      "backend: gpu is required but this tessera was built without a GPU backend "
      "(TESSERA_GPU=off); rebuild with -DTESSERA_GPU=cuda or hip, or set backend: cpu");
}

absl::StatusOr<std::unique_ptr<Backend>> create_gpu_backend(int device, DType dtype) {
#if defined(TESSERA_WITH_GPU)
  absl::StatusOr<std::unique_ptr<GpuBackend>> gpu = GpuBackend::create(device, dtype);
  if (!gpu.ok()) return gpu.status();
  return std::unique_ptr<Backend>(std::move(*gpu));
#else
  (void)device;
  (void)dtype;
  return built_without_gpu_error();
#endif
}

// The CPU computes in fp32, so it refuses a GPU compute dtype other than the default: an operator
// who chose float16 expects fp16 numerics and memory, not a silent fp32 run. `why` says how the
// CPU came to be chosen.
absl::Status check_cpu_dtype(const BackendOptions& options, std::string_view why) {
  if (options.gpu_dtype == DType::kBF16) return absl::OkStatus();
  return absl::FailedPreconditionError(str_cat(
      "dtype: ", gpu_dtype_name(options.gpu_dtype), " is a GPU compute dtype, but ", why,
      " and the CPU backend computes in float32; set dtype: bfloat16 (the default, which the "
      "CPU backend ignores) or run on a GPU"));
}

// Whether `options` run on a GPU (else on the CPU), decided before any backend is created: every
// refusal, and auto's warning when it falls back to the CPU, is create_backend's.
absl::StatusOr<bool> runs_on_gpu(const BackendOptions& options) {
  if (options.kind == BackendKind::kCpu) {
    TESSERA_RETURN_IF_ERROR(check_cpu_dtype(options, "backend is cpu"));
    return false;
  }
  const int gpus = visible_gpus();  // 0 in a build without a GPU backend
  if (gpus == 0) {
    if (options.kind == BackendKind::kGpu) {
      if (!built_with_gpu()) return built_without_gpu_error();
      return absl::FailedPreconditionError(
          "backend: gpu is required but no GPU is visible (no driver, no device, or "
          "CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES hides them); set backend: auto or cpu to run "
          "on the CPU");
    }
    if (built_with_gpu()) {
      spdlog::warn("backend auto: no GPU is visible (no driver or no device); running on the CPU");
    }
    TESSERA_RETURN_IF_ERROR(check_cpu_dtype(options, "backend auto found no GPU"));
    return false;
  }
  if (options.gpu_device < 0 || options.gpu_device >= gpus) {
    return absl::InvalidArgumentError(str_cat("gpu_device: ", options.gpu_device,
                                              " does not exist; ", gpus,
                                              " GPU(s) are visible (0..", gpus - 1, ")"));
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> create_backend(const BackendOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(const bool gpu, runs_on_gpu(options));
  if (!gpu) return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(options.threads, 0));
  return create_gpu_backend(options.gpu_device, options.gpu_dtype);
}

absl::StatusOr<std::vector<DeviceBackend>> create_backends(const BackendOptions& options) {
  std::vector<DeviceBackend> out;
  if (options.devices.empty() && !options.all_devices) {
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Backend> one, create_backend(options));
    const int32_t ordinal = one->uses_host_memory() ? 0 : options.gpu_device;
    out.push_back({ordinal, std::move(one)});
    return out;
  }
  const int gpus = visible_gpus();
  if (options.kind != BackendKind::kCpu && gpus > 0) {
    for (int32_t d : options.devices) {
      if (d < 0 || d >= gpus) {
        return absl::InvalidArgumentError(str_cat("devices: GPU ", d, " does not exist; ", gpus,
                                                  " GPU(s) are visible (0..", gpus - 1, ")"));
      }
    }
  }
  // The kind is decided once, by the first device, so that auto never mixes CPU and GPU -- without
  // making a backend to find it out (a CPU one would be numbered 0, not as the list says, and
  // thrown away).
  BackendOptions first = options;
  first.gpu_device = options.devices.empty() ? 0 : options.devices.front();
  TESSERA_ASSIGN_OR_RETURN(const bool on_gpu, runs_on_gpu(first));
  std::vector<int32_t> devices = options.devices;
  if (options.all_devices) {
    devices.clear();
    const int n = on_gpu ? gpus : 1;
    for (int i = 0; i < n; ++i) devices.push_back(i);
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    if (std::count(devices.begin(), devices.end(), devices[i]) > 1) {
      return absl::InvalidArgumentError(
          str_cat("devices: device ", devices[i], " is listed twice"));
    }
  }
  for (int32_t d : devices) {
    std::unique_ptr<Backend> b;
    if (on_gpu) {
      TESSERA_ASSIGN_OR_RETURN(b, create_gpu_backend(d, options.gpu_dtype));
    } else {
      b = std::make_unique<CpuBackend>(options.threads, d);
    }
    out.push_back({d, std::move(b)});
  }
  return out;
}

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> create_communicators(
    std::span<Backend* const> ranks) {
  if (ranks.size() < 2) {
    return absl::InvalidArgumentError(
        str_cat("a tensor-parallel group needs at least 2 ranks, got ", ranks.size()));
  }
  const bool host = ranks.front()->uses_host_memory();
  for (Backend* b : ranks) {
    if (b->uses_host_memory() != host) {
      return absl::InvalidArgumentError("a tensor-parallel group mixes CPU and GPU backends");
    }
  }
  if (host) return make_in_process_communicators(static_cast<int32_t>(ranks.size()));
  return create_gpu_group(ranks);
}

}  // namespace tessera
