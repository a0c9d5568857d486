// Chooses and creates the backend a model runs on: the GPU backend when this build has one and a
// GPU is visible, else the CPU backend, or exactly the one the config requires.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/backend/communicator.h"
#include "base/dtype.h"

namespace tessera {

enum class BackendKind {
  kAuto,  // a GPU when there is one (logged when there is not), else the CPU
  kCpu,
  kGpu,   // a GPU or refuse to start
};

struct BackendOptions {
  BackendKind kind = BackendKind::kAuto;
  int gpu_device = 0;  // device ordinal for the GPU backend
  int threads = 0;     // CPU backend threads; 0 = every core
  // The GPU backend's compute dtype for weights, activations and KV cache: kBF16 or kF16. The CPU
  // backend computes in fp32 and refuses kF16 (a request for fp16 numerics it cannot honour).
  DType gpu_dtype = DType::kBF16;
  // The devices a model is split over, in pipeline order (create_backends): empty = one device
  // (gpu_device, or the CPU). On the CPU backend the numbers name CPU "devices" that share the
  // host (to test and develop placement without GPUs).
  std::vector<int32_t> devices;
  bool all_devices = false;  // every visible GPU (one CPU device on the CPU backend)
};

// "auto", "cpu" or "gpu".
absl::StatusOr<BackendKind> parse_backend_kind(std::string_view text);
std::string_view backend_kind_name(BackendKind kind);

// The GPU compute dtype named as PyTorch does ("bfloat16", "float16") or short ("bf16", "fp16").
absl::StatusOr<DType> parse_gpu_dtype(std::string_view text);
// "bfloat16" or "float16" (any other dtype by its own name).
std::string_view gpu_dtype_name(DType dtype);

// Whether this binary was built with a GPU backend (TESSERA_GPU=cuda or hip).
bool built_with_gpu();
// GPUs the GPU backend can see (0 without a GPU build, driver or device).
int visible_gpus();

absl::StatusOr<std::unique_ptr<Backend>> create_backend(const BackendOptions& options);

// A backend and the device ordinal it runs on (the number device_map and max_memory use).
struct DeviceBackend {
  int32_t ordinal = 0;
  std::unique_ptr<Backend> backend;
};

// One backend per device of options.devices (or the single device), all of one kind, in pipeline
// order. Errors name a device that does not exist and how many are visible.
absl::StatusOr<std::vector<DeviceBackend>> create_backends(const BackendOptions& options);

// The communicators of a tensor-parallel group over `ranks` (rank i on ranks[i]; at least two,
// all CPU or all GPU): in-process on the CPU, NCCL / RCCL (with a one-shot all-reduce over peer
// memory for small messages where it is faster) on GPUs. Errors name what is missing (the NCCL
// library, peer access between two devices).
absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> create_communicators(
    std::span<Backend* const> ranks);

}  // namespace tessera
