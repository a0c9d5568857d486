#include "runtime/backend_factory.h"

#include "kernels/cpu/cpu_backend.h"
#include "runtime/str_cat.h"
#include "spdlog/spdlog.h"

#if defined(TESSERA_WITH_GPU)
#include "kernels/gpu_backend.h"
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

absl::StatusOr<std::unique_ptr<Backend>> create_gpu_backend(int device) {
#if defined(TESSERA_WITH_GPU)
  absl::StatusOr<std::unique_ptr<GpuBackend>> gpu = GpuBackend::create(device);
  if (!gpu.ok()) return gpu.status();
  return std::unique_ptr<Backend>(std::move(*gpu));
#else
  return absl::FailedPreconditionError(
      "backend: gpu is required but this tessera was built without a GPU backend "
      "(TESSERA_GPU=off); rebuild with -DTESSERA_GPU=cuda or hip, or set backend: cpu");
#endif
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> create_backend(const BackendOptions& options) {
  if (options.kind == BackendKind::kCpu) return std::make_unique<CpuBackend>(options.threads);
  const int gpus = visible_gpus();  // 0 in a build without a GPU backend
  if (gpus == 0) {
    if (options.kind == BackendKind::kGpu) {
      if (!built_with_gpu()) return create_gpu_backend(options.gpu_device);  // says why
      return absl::FailedPreconditionError(
          "backend: gpu is required but no GPU is visible (no driver, no device, or "
          "CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES hides them); set backend: auto or cpu to run "
          "on the CPU");
    }
    if (built_with_gpu()) {
      spdlog::warn("backend auto: no GPU is visible (no driver or no device); running on the CPU");
    }
    return std::make_unique<CpuBackend>(options.threads);
  }
  if (options.gpu_device < 0 || options.gpu_device >= gpus) {
    return absl::InvalidArgumentError(str_cat("gpu_device: ", options.gpu_device,
                                              " does not exist; ", gpus,
                                              " GPU(s) are visible (0..", gpus - 1, ")"));
  }
  return create_gpu_backend(options.gpu_device);
}

}  // namespace tessera
