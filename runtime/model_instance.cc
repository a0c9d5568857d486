#include "runtime/model_instance.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "runtime/placement/device_map.h"
#include "runtime/placement/plan_table.h"
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera {

namespace {

// The devices as the planner sees them: their ordinals and the memory free on each now.
std::vector<DeviceInfo> describe_devices(const std::vector<DeviceBackend>& devices) {
  std::vector<DeviceInfo> out;
  for (const DeviceBackend& d : devices) {
    const size_t free_bytes = d.backend->free_memory();
    out.push_back(DeviceInfo{d.ordinal, d.backend->name(), free_bytes, free_bytes});
  }
  return out;
}

}  // namespace

ModelInstance::~ModelInstance() {
  if (engine_) engine_->shutdown(absl::CancelledError("model unloaded"));
}

absl::StatusOr<std::unique_ptr<ModelInstance>> ModelInstance::load(const std::string& path,
                                                                   const InstanceOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(ModelFiles files, ModelFiles::open(path));
  std::unique_ptr<ModelInstance> inst(new ModelInstance(std::move(files)));
  inst->path_ = path;
  const ModelConfig& config = inst->config();
  TESSERA_RETURN_IF_ERROR(config.validate());
  if (options.block_size <= 0 || options.block_size > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("block_size: ", options.block_size, " is outside [1, 1024]"));
  }

  // While GEMMs are tuned, they run at the token counts the tuning plan covers.
  ExecutionOptions execution = options.execution;
  if (options.tuning.mode != TuningMode::kOff && !execution.gemm_buckets) {
    execution.gemm_buckets = options.tuning.buckets;
  }

  // Devices and the plan: which holds which layers, checked against their memory before any
  // weight is read (a model that does not fit says so per device, not with an allocator error).
  TESSERA_ASSIGN_OR_RETURN(std::vector<DeviceBackend> backends, create_backends(options.backend));
  const DType dtype = backends.front().backend->compute_dtype();
  PlacementOptions placement;
  TESSERA_ASSIGN_OR_RETURN(placement.device_map, parse_device_map(options.device_map));
  TESSERA_ASSIGN_OR_RETURN(placement.max_memory, parse_max_memory(options.max_memory));
  const ActivationBytes activations =
      StepRunner::activation_bytes(DecoderModel::activation_cost(config, dtype), config.hidden_size,
                                   config.vocab_size, options.limits, execution, dtype);
  placement.activation_bytes = activations.stage;
  placement.head_activation_bytes = activations.head;
  placement.kv_reserve_bytes = options.kv_reserve_bytes;
  placement.kv_reserve_fraction = kDefaultKvReserveFraction;
  TESSERA_ASSIGN_OR_RETURN(inst->plan_,
                           plan_placement(DecoderModel::footprint(config, dtype),
                                          describe_devices(backends), placement));

  // Devices the plan left without layers hold nothing: their backends go.
  std::vector<LayerSegment> segments;
  std::vector<TuningDevice> tuning_devices;
  for (size_t i = 0; i < inst->plan_.devices.size(); ++i) {
    const DevicePlacement& d = inst->plan_.devices[i];
    if (d.num_layers() == 0) continue;
    Backend* b = backends[i].backend.get();
    segments.push_back(LayerSegment{b, d.first_layer, d.num_layers()});
    tuning_devices.push_back(TuningDevice{d.device, b});
    inst->backends_.push_back(std::move(backends[i].backend));
  }
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<DecoderModel> family,
                           DecoderModel::load(inst->files_.weights(), segments));
  inst->family_ = family.get();
  TESSERA_ASSIGN_OR_RETURN(inst->runner_, StepRunner::create(std::move(family), segments,
                                                             options.limits, execution));

  // GEMM tuning: each device that holds layers gets a tuning context (its results file read now).
  TESSERA_ASSIGN_OR_RETURN(
      inst->tuning_,
      ModelTuning::attach(options.tuning, gemm_model_shape(config, gemm_dtype_of(dtype)),
                          WarmupLimits{options.limits.max_batch_tokens, options.limits.max_logit_rows},
                          std::move(tuning_devices)));

  // The KV cache: the same blocks on every device, as many as the tightest device holds.
  const KvCacheShape one_block = inst->family_->kv_cache_shape(1, options.block_size);
  const size_t layer_block_bytes = one_block.bytes_per_layer_block(dtype);
  const size_t block_bytes = one_block.bytes_per_block(dtype);
  double fraction = options.kv_cache_fraction;
  if (fraction <= 0) {
    fraction = inst->backend().uses_host_memory() ? kDefaultKvFractionCpu : kDefaultKvFractionGpu;
  }
  // CPU "devices" all draw on the one host memory.
  const double device_fraction =
      inst->backend().uses_host_memory() ? fraction / static_cast<double>(segments.size()) : fraction;
  int64_t num_blocks = std::numeric_limits<int64_t>::max();
  size_t free_after_load = 0;
  std::string tightest;
  if (options.kv_cache_bytes > 0) {
    num_blocks = options.kv_cache_bytes / static_cast<int64_t>(block_bytes);
  } else {
    for (const LayerSegment& seg : segments) {
      const size_t free_bytes = seg.backend->free_memory();
      free_after_load += free_bytes;
      const int64_t blocks = static_cast<int64_t>(static_cast<double>(free_bytes) * device_fraction) /
                             static_cast<int64_t>(layer_block_bytes * seg.num_layers);
      if (blocks < num_blocks) {
        num_blocks = blocks;
        tightest = seg.backend->name();
      }
    }
  }
  EngineConfig engine_config = options.engine;
  if (engine_config.max_model_len <= 0) {
    engine_config.max_model_len = static_cast<int32_t>(config.max_position_embeddings);
  }
  // No point holding more than every sequence at full length.
  const int64_t most_useful = static_cast<int64_t>(engine_config.max_num_seqs) *
                              ((engine_config.max_model_len + options.block_size - 1) / options.block_size);
  num_blocks = std::min(num_blocks, most_useful);
  if (num_blocks < 1) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "kv cache: no block of ", options.block_size, " tokens (", block_bytes,
        " bytes over all layers) fits", tightest.empty() ? "" : " on " + tightest,
        "; raise kv_cache_bytes or kv_cache_fraction, or lower max_batch_tokens"));
  }
  TESSERA_ASSIGN_OR_RETURN(
      inst->cache_,
      KvCache::create(segments, inst->family_->kv_cache_shape(static_cast<int32_t>(num_blocks),
                                                             options.block_size)));
  // The plan's KV columns estimated from the reserve; now they are what was allocated.
  for (DevicePlacement& d : inst->plan_.devices) {
    if (d.num_layers() == 0) continue;
    d.kv_bytes = layer_block_bytes * d.num_layers() * static_cast<uint64_t>(num_blocks);
    d.kv_capacity_tokens = num_blocks * options.block_size;
  }
  inst->plan_.kv_capacity_tokens = num_blocks * options.block_size;
  spdlog::info("model {}: {} layers, {:.1f} MiB weights on {} device(s)\n{}", path,
               config.num_layers, inst->weight_bytes() / 1048576.0, segments.size(),
               format_plan_table(inst->plan_));
  spdlog::info("KV cache: {} blocks x {} tokens = {} tokens ({:.1f} MiB{}), prefix caching {}",
               num_blocks, options.block_size, num_blocks * options.block_size,
               num_blocks * block_bytes / 1048576.0,
               options.kv_cache_bytes > 0
                   ? std::string(", kv_cache_bytes")
                   : str_cat(" of ", free_after_load / 1048576, " MiB free after loading, kv_cache_fraction ",
                             fraction),
               engine_config.enable_prefix_caching ? "on" : "off");
  if (const int64_t graphs = inst->runner_->largest_graph_bucket(); graphs > 0) {
    spdlog::info("decode graphs: decode steps of up to {} sequences padded to their bucket and "
                 "replayed as graphs recorded per bucket and context class", graphs);
  }
  inst->engine_ = std::make_unique<Engine>(*inst->runner_, *inst->cache_, inst->files_.tokenizer(),
                                           engine_config);
  return inst;
}

}  // namespace tessera
