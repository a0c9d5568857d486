// A loaded, servable model: its files, the backend it runs on, the forward pass, the paged KV
// cache and the engine that schedules requests over them. The daemon and the offline CLI build
// one the same way.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/backend_factory.h"
#include "runtime/engine.h"
#include "runtime/kv_cache/kv_cache.h"
#include "runtime/model/decoder_model.h"
#include "runtime/model_files.h"
#include "runtime/runner/step_runner.h"
#include "runtime/placement/placement_planner.h"
#include "runtime/tuning/model_tuning.h"
#include "runtime/tuning/tuning_config.h"

namespace tessera {

struct InstanceOptions {
  BackendOptions backend;          // which backend (auto/cpu/gpu), devices, CPU threads
  // Placement over backend.devices (runtime/placement/): a strategy or explicit map, per-device
  // caps ("0=40GiB,1=70GiB"; empty = free memory), and the memory kept free of weights on each
  // device for its KV cache (0 = kDefaultKvReserveFraction of what it allows).
  std::string device_map = "auto";
  std::string max_memory;
  // Tensor parallelism: each pipeline stage split over this many devices (consecutive devices of
  // backend.devices form a stage; the planner places layers over the stages, budgeting each
  // device for its rank's share). 1 = off.
  int32_t tensor_parallel_size = 1;
  // The decoder layers' linear weights in FP8 (a scale per output feature, quantized at load)
  // where kFp8, but those quantization_keep names; refused at load by a backend without FP8
  // (Backend::supports). Unset (auto): kFp8 for an FP8 checkpoint whose shapes every device
  // takes in FP8, else kNone (ModelInstance::quantization() says which).
  std::optional<Quantization> quantization;
  QuantizationKeep quantization_keep;
  // The KV cache's elements: the compute dtype, or FP8 e4m3 with per-layer K and V scales (from
  // the checkpoint, else calibrated at load: runtime/kv_cache_scales.h); refused at load by a
  // backend without FP8 (Backend::prepare_kv_cache).
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  uint64_t kv_reserve_bytes = 0;
  ExecutionOptions execution;      // micro-batches through the stages; GEMM padding buckets
  ForwardLimits limits;            // tokens per step, sequences sampled per step
  int32_t block_size = 16;         // KV tokens per block
  int64_t kv_cache_bytes = 0;      // over every device; 0 = kv_cache_fraction of free memory
  // Share of the backend's free memory (after weights and activations) for the KV cache when
  // kv_cache_bytes is 0; 0 = the backend's default (kDefaultKvFractionCpu / Gpu).
  double kv_cache_fraction = 0;
  EngineConfig engine;             // max_model_len 0 = the model's max_position_embeddings
  TuningConfig tuning;             // GEMM tuning mode, results file, buckets (environment applied)
};

inline constexpr double kDefaultKvFractionCpu = 0.25;  // host memory is shared with everything
inline constexpr double kDefaultKvFractionGpu = 0.90;  // the device is ours
inline constexpr double kDefaultKvReserveFraction = 0.10;  // accelerate keeps a margin like it

class ModelInstance {
 public:
  static absl::StatusOr<std::unique_ptr<ModelInstance>> load(const std::string& path,
                                                             const InstanceOptions& options);
  // The same over `files`, already opened from `path` (a caller that read their config first).
  static absl::StatusOr<std::unique_ptr<ModelInstance>> load(const std::string& path,
                                                             ModelFiles files,
                                                             const InstanceOptions& options);
  ~ModelInstance();

  const ModelFiles& files() const { return files_; }
  const ModelConfig& config() const { return files_.config(); }
  const Tokenizer& tokenizer() const { return files_.tokenizer(); }
  // The first device's backend (the only one unless the model is split).
  Backend& backend() { return *backends_.front(); }
  // The devices that hold the model's layers, in pipeline order (a stage's ranks in rank order).
  const std::vector<std::unique_ptr<Backend>>& backends() const { return backends_; }
  int32_t tensor_parallel_size() const { return plan_.tensor_parallel_size; }
  // How the decoder's linear weights are kept: InstanceOptions::quantization, or what auto chose.
  Quantization quantization() const { return quantization_; }
  // What carries the collectives of tensor parallelism (empty without it).
  std::string collectives() const;
  // Where the layers went, per device: bytes, KV capacity (the plan table's source).
  const PlacementPlan& plan() const { return plan_; }
  // The model's steps: its family's forward over the stages above.
  StepRunner& runner() { return *runner_; }
  size_t weight_bytes() const { return family_->weight_bytes(); }
  KvCache& cache() { return *cache_; }
  Engine& engine() { return *engine_; }
  ModelTuning& tuning() { return *tuning_; }
  const std::string& path() const { return path_; }

 private:
  explicit ModelInstance(ModelFiles files) : files_(std::move(files)) {}
  // An FP8 cache's per-layer scales, from the checkpoint or calibrated on kKvCalibrationText
  // (at most max_model_len tokens of it, and what the cache holds); what the start-up report
  // says of them.
  absl::StatusOr<std::string> set_kv_scales(int32_t max_model_len);

  std::string path_;
  ModelFiles files_;
  Quantization quantization_ = Quantization::kNone;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<std::unique_ptr<Communicator>> communicators_;  // after backends_: go first
  PlacementPlan plan_;
  std::unique_ptr<ModelTuning> tuning_;  // after backends_: detaches from them before they go
  DecoderModel* family_ = nullptr;  // owned by runner_
  std::unique_ptr<StepRunner> runner_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Engine> engine_;  // declared last: destroyed first
};

}  // namespace tessera
