// A loaded, servable model: its files, the backend it runs on, the forward pass, the paged KV
// cache and the engine that schedules requests over them. The daemon and the offline CLI build
// one the same way.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/backend.h"
#include "runtime/backend_factory.h"
#include "runtime/engine.h"
#include "runtime/kv_cache.h"
#include "runtime/model/llama.h"
#include "runtime/model/model_loader.h"
#include "runtime/tuning/model_tuning.h"
#include "runtime/tuning/tuning_config.h"

namespace tessera {

struct InstanceOptions {
  BackendOptions backend;          // which backend (auto/cpu/gpu), GPU ordinal, CPU threads
  ForwardLimits limits;            // tokens per step, sequences sampled per step
  int32_t block_size = 16;         // KV tokens per block
  int64_t kv_cache_bytes = 0;      // 0 = kv_cache_fraction of free memory
  // Share of the backend's free memory (after weights and activations) for the KV cache when
  // kv_cache_bytes is 0; 0 = the backend's default (kDefaultKvFractionCpu / Gpu).
  double kv_cache_fraction = 0;
  EngineConfig engine;             // max_model_len 0 = the model's max_position_embeddings
  TuningConfig tuning;             // GEMM tuning mode, results file, buckets (environment applied)
};

inline constexpr double kDefaultKvFractionCpu = 0.25;  // host memory is shared with everything
inline constexpr double kDefaultKvFractionGpu = 0.90;  // the device is ours

class ModelInstance {
 public:
  static absl::StatusOr<std::unique_ptr<ModelInstance>> load(const std::string& path,
                                                             const InstanceOptions& options);
  ~ModelInstance();

  const ModelFiles& files() const { return files_; }
  const ModelConfig& config() const { return files_.config(); }
  const Tokenizer& tokenizer() const { return files_.tokenizer(); }
  Backend& backend() { return *backend_; }
  LlamaModel& model() { return *model_; }
  KvCache& cache() { return *cache_; }
  Engine& engine() { return *engine_; }
  ModelTuning& tuning() { return *tuning_; }
  const std::string& path() const { return path_; }

 private:
  explicit ModelInstance(ModelFiles files) : files_(std::move(files)) {}

  std::string path_;
  ModelFiles files_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ModelTuning> tuning_;  // after backend_: detaches from it before it goes
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Engine> engine_;  // declared last: destroyed first
};

}  // namespace tessera
