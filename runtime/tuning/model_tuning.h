// GEMM tuning of one loaded model: a TuningContext per device that holds layers (installed as
// that backend's GemmSolutionSource), the model's warmup plan, and at most one warmup at a time.
//
// Warmup runs beside the engine, on threads of its own, on the TunableGemm's own operands:
// inference keeps going (on the CPU backend there is no shared stream to serialize with; a GPU
// TunableGemm uses a stream of its own), and a tune-on-miss from the engine answers the default
// instead of waiting for the warmup (tuning_context.h). The price is that tuning and serving
// share the device, so timings taken under load are noisier; warmup at start (mode warmup)
// runs before any request is admitted.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/model_io/model_config.h"
#include "runtime/tuning/tuning_config.h"
#include "runtime/tuning/tuning_context.h"
#include "runtime/tuning/warmup_job.h"
#include "runtime/tuning/warmup_plan.h"

namespace tessera {

// One device that runs layers of the model.
struct TuningDevice {
  int ordinal = 0;   // names its results file
  Backend* backend;  // not owned; outlives the ModelTuning
  // Runs lm_head (the last stage, each of its tensor-parallel ranks). When no device says so,
  // the last one does.
  bool runs_head = false;
};

// What to warm up: the plan's buckets and limits, and the job's options.
struct WarmupSpec {
  TokenBuckets buckets;
  WarmupLimits limits;
  WarmupOptions options;
};

// Per-shape gain of a device, for metrics.
struct GemmGain {
  int device = 0;
  GemmSignature signature;
  double gain = 0;
};

struct GemmTuningStats {
  GemmTuningCounters totals;  // summed over devices
  std::vector<GemmGain> gains;
};

// The dimensions of `config` that decide its GEMMs, in `dtype`.
GemmModelShape gemm_model_shape(const ModelConfig& config, GemmDType dtype,
                                Quantization quantization = Quantization::kNone,
                                const QuantizationKeep& keep = {});

class ModelTuning {
 public:
  // Creates a context for each device whose backend offers a TunableGemm and installs it as the
  // backend's solution source; a device without one is left untuned (a warning unless the mode
  // is off). Errors: an invalid config, or a results file that cannot be read (naming it).
  static absl::StatusOr<std::unique_ptr<ModelTuning>> attach(const TuningConfig& config,
                                                             const GemmModelShape& shape,
                                                             const WarmupLimits& limits,
                                                             std::vector<TuningDevice> devices);
  // Cancels and waits for a running warmup; detaches the contexts from the backends.
  ~ModelTuning();

  const TuningConfig& config() const { return config_; }
  // The engine's limits: the default warmup spec's, and the most a spec may ask for.
  const WarmupLimits& limits() const { return limits_; }
  std::vector<TuningContext*> contexts() const;

  // The config's buckets and the engine's limits, no budget, not forced.
  WarmupSpec default_spec() const;
  absl::StatusOr<std::vector<WarmupGemm>> plan(const WarmupSpec& spec) const;

  // Starts a warmup of `spec`'s plan on every device. Errors: FAILED_PRECONDITION when the mode
  // does not tune or no device can be tuned; ALREADY_EXISTS while a warmup runs; INVALID_ARGUMENT
  // for a spec the plan rejects or limits beyond the engine's.
  absl::StatusOr<std::shared_ptr<WarmupJob>> start_warmup(const WarmupSpec& spec,
                                                          WarmupJob::OnUpdate on_update = {});
  // A drain: asks a running warmup to stop after the GEMMs being tuned, and refuses new ones
  // (FAILED_PRECONDITION) from then on.
  void cancel_warmup();
  // The running warmup, or the last one; null before the first.
  std::shared_ptr<const WarmupJob> last_warmup() const;

  GemmTuningStats stats() const;

 private:
  ModelTuning(const TuningConfig& config, const GemmModelShape& shape, const WarmupLimits& limits)
      : config_(config), shape_(shape), limits_(limits) {}

  const TuningConfig config_;
  const GemmModelShape shape_;
  const WarmupLimits limits_;
  std::vector<TuningDevice> devices_;  // those with a context, in contexts_' order
  std::vector<std::unique_ptr<TuningContext>> contexts_;

  mutable std::mutex job_mu_;
  std::shared_ptr<WarmupJob> job_;
  bool closed_ = false;  // cancel_warmup() was called: no new warmup starts
};

}  // namespace tessera
