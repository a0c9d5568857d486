// Host code's one dispatch from a runtime dtype to the kernels' element type: the launchers are
// templates over exactly gpu_bf16 and gpu_f16 (TESSERA_FOR_EACH_ELEMENT_TYPE in gpu.h).
#pragma once

#include <utility>

#include "kernels/gpu.h"
#include "base/dtype.h"
#include "runtime/backend.h"

namespace tessera::gpu {

// launch.template operator()<T>() with T the element type of `dtype`: gpu_f16 for kF16, else
// gpu_bf16 (callers pass only the two GPU compute types). One call site serves both dtypes.
template <typename Launch>
gpuError_t launch_as(GemmDType dtype, Launch&& launch) {
  return dtype == GemmDType::kF16 ? launch.template operator()<gpu_f16>()
                                  : launch.template operator()<gpu_bf16>();
}
template <typename Launch>
gpuError_t launch_as(DType dtype, Launch&& launch) {
  return launch_as(gemm_dtype_of(dtype), std::forward<Launch>(launch));
}

}  // namespace tessera::gpu
