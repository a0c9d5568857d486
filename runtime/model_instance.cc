#include "runtime/model_instance.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/status_macros.h"
#include "runtime/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera {

ModelInstance::~ModelInstance() {
  if (engine_) engine_->shutdown(absl::CancelledError("model unloaded"));
}

absl::StatusOr<std::unique_ptr<ModelInstance>> ModelInstance::load(const std::string& path,
                                                                   const InstanceOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(ModelFiles files, ModelFiles::open(path));
  std::unique_ptr<ModelInstance> inst(new ModelInstance(std::move(files)));
  inst->path_ = path;
  const ModelConfig& config = inst->config();

  TESSERA_ASSIGN_OR_RETURN(inst->backend_, create_backend(options.backend));
  TESSERA_ASSIGN_OR_RETURN(inst->model_,
                           LlamaModel::load(inst->files_.weights(), *inst->backend_, options.limits));

  // GEMM tuning: the backend's device gets a tuning context (its results file read now).
  const int device = inst->backend_->name() == "cpu" ? 0 : options.backend.gpu_device;
  TESSERA_ASSIGN_OR_RETURN(
      inst->tuning_,
      ModelTuning::attach(options.tuning,
                          gemm_model_shape(config, gemm_dtype_of(inst->backend_->compute_dtype())),
                          WarmupLimits{options.limits.max_batch_tokens, options.limits.max_logit_rows},
                          {TuningDevice{device, inst->backend_.get()}}));

  if (options.block_size <= 0 || options.block_size > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_size: ", options.block_size, " is outside [1, 1024]"));
  }
  const KvCacheShape one_block = inst->model_->kv_cache_shape(1, options.block_size);
  const size_t block_bytes = one_block.bytes_per_block(inst->backend_->compute_dtype());
  int64_t budget = options.kv_cache_bytes;
  double fraction = options.kv_cache_fraction;
  if (fraction <= 0) {
    fraction = inst->backend_->uses_host_memory() ? kDefaultKvFractionCpu : kDefaultKvFractionGpu;
  }
  const size_t free_after_load = inst->backend_->free_memory();
  if (budget <= 0) budget = static_cast<int64_t>(static_cast<double>(free_after_load) * fraction);
  EngineConfig engine_config = options.engine;
  if (engine_config.max_model_len <= 0) engine_config.max_model_len = static_cast<int32_t>(config.max_position_embeddings);
  // No point holding more than every sequence at full length.
  const int64_t most_useful = static_cast<int64_t>(engine_config.max_num_seqs) *
                              ((engine_config.max_model_len + options.block_size - 1) / options.block_size);
  const int64_t num_blocks = std::min<int64_t>(budget / static_cast<int64_t>(block_bytes), most_useful);
  if (num_blocks < 1) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "kv cache: ", budget, " bytes hold no block of ", options.block_size, " tokens (",
        block_bytes, " bytes each); raise kv_cache_bytes"));
  }
  TESSERA_ASSIGN_OR_RETURN(
      inst->cache_, KvCache::create(*inst->backend_, inst->model_->kv_cache_shape(
                                                         static_cast<int32_t>(num_blocks), options.block_size)));
  spdlog::info("model {}: {} layers, {:.1f} MiB weights on {}; KV cache {} blocks x {} tokens = {} "
               "tokens ({:.1f} MiB of {:.1f} MiB free after loading{})",
               path, config.num_layers, inst->model_->weight_bytes() / 1048576.0,
               inst->backend_->name(), num_blocks, options.block_size, num_blocks * options.block_size,
               num_blocks * block_bytes / 1048576.0, free_after_load / 1048576.0,
               options.kv_cache_bytes > 0 ? std::string(", kv_cache_bytes")
                                          : str_cat(", kv_cache_fraction ", fraction));
  inst->engine_ = std::make_unique<Engine>(*inst->model_, *inst->cache_, inst->files_.tokenizer(),
                                           engine_config);
  return inst;
}

}  // namespace tessera
