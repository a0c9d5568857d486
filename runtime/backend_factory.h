// Chooses and creates the backend a model runs on: the GPU backend when this build has one and a
// GPU is visible, else the CPU backend, or exactly the one the config requires.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "runtime/backend.h"

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
};

// "auto", "cpu" or "gpu".
absl::StatusOr<BackendKind> parse_backend_kind(std::string_view text);
std::string_view backend_kind_name(BackendKind kind);

// Whether this binary was built with a GPU backend (TESSERA_GPU=cuda or hip).
bool built_with_gpu();
// GPUs the GPU backend can see (0 without a GPU build, driver or device).
int visible_gpus();

absl::StatusOr<std::unique_ptr<Backend>> create_backend(const BackendOptions& options);

}  // namespace tessera
