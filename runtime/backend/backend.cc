#include "runtime/backend.h"

#include "base/str_cat.h"

namespace tessera {

bool Backend::check_dtype(const Tensor& t, DType want, const char* op, const char* what) {
  if (t.dtype == want) return true;
  record_error(absl::InvalidArgumentError(str_cat(name(), ": ", op, ": ", what, " is ",
                                                  dtype_name(t.dtype), ", expected ",
                                                  dtype_name(want))));
  return false;
}

void Backend::quantize_fp8(const Tensor&, const Tensor&, const Tensor&) {
  record_error(supports(Quantization::kFp8));
}

absl::Status Backend::prepare_kv_cache(DType dtype, const AttentionShape&, int32_t, int32_t) {
  if (dtype == compute_dtype()) return absl::OkStatus();
  if (is_fp8(dtype)) {
    return absl::FailedPreconditionError(str_cat(
        "kv_cache_dtype: fp8 needs a GPU with FP8 tensor cores; ", name(), " has no FP8 KV cache"));
  }
  return absl::InvalidArgumentError(str_cat("kv cache: ", name(), " holds it in ",
                                            dtype_name(compute_dtype()), ", not ",
                                            dtype_name(dtype)));
}

void Backend::record_error(absl::Status s) {
  if (!s.ok() && step_error_.ok()) step_error_ = std::move(s);
}

absl::Status Backend::take_step_error() {
  absl::Status s = std::move(step_error_);
  step_error_ = absl::OkStatus();
  return s;
}

}  // namespace tessera
