#include "runtime/model_instance.h"

#include <algorithm>
#include <limits>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "base/dtype.h"
#include "runtime/kv_cache_scales.h"
#include "runtime/model/tensor_parallel.h"
#include "runtime/placement/device_map.h"
#include "runtime/placement/plan_table.h"
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera {

namespace {

// The stages as the planner sees them: each a group of `ranks` consecutive devices, known by its
// first device's ordinal, with the memory free on its tightest device now (every rank holds the
// same share).
std::vector<DeviceInfo> describe_stages(const std::vector<DeviceBackend>& devices, int32_t ranks) {
  std::vector<DeviceInfo> out;
  for (size_t g = 0; g + ranks <= devices.size(); g += static_cast<size_t>(ranks)) {
    size_t free_bytes = devices[g].backend->free_memory();
    std::string name = devices[g].backend->name();
    for (int32_t r = 1; r < ranks; ++r) {
      free_bytes = std::min(free_bytes, devices[g + r].backend->free_memory());
      name += " + " + devices[g + r].backend->name();
    }
    out.push_back(DeviceInfo{devices[g].ordinal, name, free_bytes, free_bytes});
  }
  return out;
}

// max_memory names devices; a stage of several allows each of them what the tightest cap says.
// A device no stage holds is refused here (the planner sees stages by their first device only,
// so it could not tell a typo from a stage's other member).
absl::StatusOr<std::map<int32_t, uint64_t>> stage_max_memory(
    const std::map<int32_t, uint64_t>& per_device, const std::vector<DeviceBackend>& devices,
    int32_t ranks) {
  if (ranks == 1) return per_device;
  std::map<int32_t, uint64_t> out;
  for (size_t g = 0; g + ranks <= devices.size(); g += static_cast<size_t>(ranks)) {
    for (int32_t r = 0; r < ranks; ++r) {
      auto cap = per_device.find(devices[g + r].ordinal);
      if (cap == per_device.end()) continue;
      auto [it, fresh] = out.emplace(devices[g].ordinal, cap->second);
      if (!fresh) it->second = std::min(it->second, cap->second);
    }
  }
  for (const auto& [device, bytes] : per_device) {
    const bool listed = std::any_of(devices.begin(), devices.end(),
                                    [device](const DeviceBackend& d) { return d.ordinal == device; });
    if (!listed) {
      std::string names;
      for (const DeviceBackend& d : devices) names += (names.empty() ? "" : ", ") + std::to_string(d.ordinal);
      return absl::InvalidArgumentError(str_cat("max_memory: device ", device,
                                                " is not among the devices (", names,
                                                "); give limits only for those"));
    }
  }
  return out;
}

// The devices tensor parallelism uses when none are listed: ranks of them from gpu_device on (the
// GPU), or CPU devices 0..ranks-1. Errors say how many GPUs there are.
absl::Status default_tensor_parallel_devices(int32_t ranks, BackendOptions& backend) {
  if (ranks <= 1 || !backend.devices.empty() || backend.all_devices) return absl::OkStatus();
  const int gpus = backend.kind == BackendKind::kCpu ? 0 : visible_gpus();
  if (gpus > 0 || backend.kind == BackendKind::kGpu) {
    if (backend.gpu_device + ranks > gpus) {
      return absl::InvalidArgumentError(str_cat(
          "tensor_parallel_size: ", ranks, " ranks from GPU ", backend.gpu_device, " need GPUs ",
          backend.gpu_device, "..", backend.gpu_device + ranks - 1, "; ", gpus,
          " GPU(s) are visible"));
    }
    for (int32_t r = 0; r < ranks; ++r) backend.devices.push_back(backend.gpu_device + r);
    return absl::OkStatus();
  }
  for (int32_t r = 0; r < ranks; ++r) backend.devices.push_back(r);
  return absl::OkStatus();
}

// The quantization asked for, or auto's choice: an FP8 checkpoint's per-tensor or per-channel
// scaled linear weights kept as stored where every device computes in FP8 and takes their shapes,
// else the compute dtype (as a 16-bit checkpoint, and a block-scaled one, always are). Auto says
// at start what it chose for an FP8 checkpoint, and why.
absl::StatusOr<Quantization> choose_quantization(const InstanceOptions& options,
                                                 const ModelConfig& config,
                                                 const std::vector<DeviceBackend>& backends,
                                                 int32_t tp, DType dtype) {
  if (options.quantization) return *options.quantization;
  if (!config.quantization.quantized()) return Quantization::kNone;
  if (config.quantization.block_rows > 0) {
    // FP8 weights here are kept with a scale per row: block-scaled codes would be rounded again.
    spdlog::info("quantization auto: an FP8 checkpoint with {}x{} block scales, served in {} "
                 "(its weights dequantized at load, exactly); quantization: fp8 would round them "
                 "again to a scale per row",
                 config.quantization.block_rows, config.quantization.block_cols, dtype_name(dtype));
    return Quantization::kNone;
  }
  absl::Status fp8 = absl::OkStatus();
  for (const DeviceBackend& d : backends) {
    fp8 = d.backend->supports(Quantization::kFp8);
    if (!fp8.ok()) break;
  }
  if (fp8.ok()) {
    fp8 = check_fp8_linear_shapes(config, tensor_parallel_shard(config, 0, tp),
                                  options.quantization_keep);
  }
  if (!fp8.ok()) {
    spdlog::info("quantization auto: an FP8 checkpoint, served in {} (its weights dequantized "
                 "at load): {}",
                 dtype_name(dtype), std::string(fp8.message()));
    return Quantization::kNone;
  }
  spdlog::info("quantization auto: an FP8 checkpoint, its FP8 linear weights kept as stored "
               "(codes and scales)");
  return Quantization::kFp8;
}

}  // namespace

std::string ModelInstance::collectives() const {
  return communicators_.empty() ? std::string() : communicators_.front()->describe();
}

ModelInstance::~ModelInstance() {
  if (engine_) engine_->shutdown(absl::CancelledError("model unloaded"));
  // Recordings that hold collectives go before the communicators, which wait for them.
  for (const std::unique_ptr<Backend>& b : backends_) b->release_graphs();
  communicators_.clear();
}

absl::StatusOr<std::unique_ptr<ModelInstance>> ModelInstance::load(const std::string& path,
                                                                   const InstanceOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(ModelFiles files, ModelFiles::open(path));
  return load(path, std::move(files), options);
}

absl::StatusOr<std::unique_ptr<ModelInstance>> ModelInstance::load(const std::string& path,
                                                                   ModelFiles files,
                                                                   const InstanceOptions& options) {
  std::unique_ptr<ModelInstance> inst(new ModelInstance(std::move(files)));
  inst->path_ = path;
  const ModelConfig& config = inst->config();
  TESSERA_RETURN_IF_ERROR(config.validate());
  // Positions past the model's are positions its rotary embedding was never trained on.
  if (const int64_t positions = config.max_position_embeddings;
      positions > 0 && options.engine.max_model_len > positions) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_model_len ", options.engine.max_model_len, " exceeds the model's ",
                     positions, " positions (max_position_embeddings)"));
  }
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
  // Tensor parallelism: the model must split into that many ranks, and the devices into stages of
  // that many.
  const int32_t tp = options.tensor_parallel_size;
  TESSERA_RETURN_IF_ERROR(check_tensor_parallel(config, tp));
  BackendOptions backend_options = options.backend;
  TESSERA_RETURN_IF_ERROR(default_tensor_parallel_devices(tp, backend_options));
  // CPU ranks compute at once: each takes its share of the cores unless told otherwise (GPU
  // backends ignore the count).
  if (tp > 1 && backend_options.threads == 0) {
    backend_options.threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / tp);
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<DeviceBackend> backends, create_backends(backend_options));
  if (backends.size() % static_cast<size_t>(tp) != 0) {
    return absl::InvalidArgumentError(str_cat("tensor_parallel_size: ", tp, " does not divide the ",
                                              backends.size(), " devices listed into stages"));
  }
  const DType dtype = backends.front().backend->compute_dtype();
  TESSERA_ASSIGN_OR_RETURN(inst->quantization_,
                           choose_quantization(options, config, backends, tp, dtype));
  const Quantization quantization = inst->quantization_;
  const DType kv_dtype =
      options.kv_cache_dtype == KvCacheDtype::kFp8 ? DType::kF8_E4M3 : dtype;
  PlacementOptions placement;
  TESSERA_ASSIGN_OR_RETURN(placement.device_map, parse_device_map(options.device_map));
  TESSERA_ASSIGN_OR_RETURN(const auto max_memory, parse_max_memory(options.max_memory));
  TESSERA_ASSIGN_OR_RETURN(placement.max_memory, stage_max_memory(max_memory, backends, tp));
  const ActivationBytes activations = StepRunner::activation_bytes(
      DecoderModel::activation_cost(config, dtype, tp, quantization), config.hidden_size, config.vocab_size,
      options.limits, execution, dtype);
  placement.activation_bytes = activations.stage;
  placement.head_activation_bytes = activations.head;
  placement.kv_reserve_bytes = options.kv_reserve_bytes;
  placement.kv_reserve_fraction = kDefaultKvReserveFraction;
  TESSERA_ASSIGN_OR_RETURN(inst->plan_,
                           plan_placement(DecoderModel::footprint(config, dtype, tp, quantization,
                                                                  options.quantization_keep, kv_dtype),
                                          describe_stages(backends, tp), placement));
  inst->plan_.tensor_parallel_size = tp;
  inst->plan_.weight_bytes *= static_cast<uint64_t>(tp);

  // Stages the plan left without layers hold nothing: their backends go. Each stage of several
  // ranks gets its group's communicators.
  std::vector<LayerSegment> segments;
  std::vector<TuningDevice> tuning_devices;
  for (size_t i = 0; i < inst->plan_.devices.size(); ++i) {
    DevicePlacement& d = inst->plan_.devices[i];
    if (tp > 1) {
      for (int32_t r = 0; r < tp; ++r) {
        d.ranks.push_back(backends[i * tp + r].ordinal);
        d.rank_names.push_back(backends[i * tp + r].backend->name());
      }
    }
    if (d.num_layers() == 0) continue;
    LayerSegment seg{backends[i * tp].backend.get(), d.first_layer, d.num_layers(), {}, {}};
    for (int32_t r = 0; r < tp; ++r) {
      DeviceBackend& member = backends[i * tp + r];
      if (tp > 1) seg.ranks.push_back(member.backend.get());
      const bool last_stage = d.last_layer + 1 == static_cast<int32_t>(config.num_layers);
      tuning_devices.push_back(TuningDevice{member.ordinal, member.backend.get(), last_stage});
      inst->backends_.push_back(std::move(member.backend));
    }
    if (tp > 1) {
      TESSERA_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Communicator>> group,
                               create_communicators(seg.ranks));
      for (auto& c : group) {
        seg.comms.push_back(c.get());
        inst->communicators_.push_back(std::move(c));
      }
    }
    segments.push_back(std::move(seg));
  }
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<DecoderModel> family,
                           DecoderModel::load(inst->files_.weights(), segments, quantization,
                                              options.quantization_keep));
  inst->family_ = family.get();
  // (A keep list naming layers the model lacks was refused by the load: no warning before that.)
  if (!options.quantization_keep.empty() && quantization == Quantization::kNone) {
    spdlog::warn("quantization_keep \"{}\" has no effect: quantization is none",
                 options.quantization_keep.text());
  }
  TESSERA_ASSIGN_OR_RETURN(inst->runner_, StepRunner::create(std::move(family), segments,
                                                             options.limits, execution));

  // GEMM tuning: each device that holds layers gets a tuning context (its results file read now),
  // for the GEMMs of its rank's share (the shapes of one rank: every rank's are alike).
  const ModelConfig one_rank = rank_config(config, tensor_parallel_shard(config, 0, tp));
  TESSERA_ASSIGN_OR_RETURN(
      inst->tuning_,
      ModelTuning::attach(options.tuning, gemm_model_shape(one_rank, gemm_dtype_of(dtype), quantization,
                                           options.quantization_keep),
                          WarmupLimits{options.limits.max_batch_tokens, options.limits.max_logit_rows},
                          std::move(tuning_devices)));

  EngineConfig engine_config = options.engine;
  if (engine_config.max_model_len <= 0) {
    engine_config.max_model_len = static_cast<int32_t>(config.max_position_embeddings);
  }
  // The KV cache: the same blocks on every device, as many as the tightest device holds.
  const KvCacheShape one_block = inst->family_->kv_cache_shape(1, options.block_size);
  const size_t layer_block_bytes = one_block.bytes_per_layer_block(kv_dtype);
  const size_t block_bytes = one_block.bytes_per_block(kv_dtype);
  double fraction = options.kv_cache_fraction;
  if (fraction <= 0) {
    fraction = inst->backend().uses_host_memory() ? kDefaultKvFractionCpu : kDefaultKvFractionGpu;
  }
  // CPU "devices" all draw on the one host memory.
  const double device_fraction =
      inst->backend().uses_host_memory() ? fraction / static_cast<double>(inst->backends_.size()) : fraction;
  size_t free_after_load = 0;
  std::string tightest;
  // A block over every layer on every device: each tensor-parallel rank holds its heads of it.
  const size_t all_ranks_block_bytes = block_bytes * static_cast<size_t>(tp);
  // No point holding more than every sequence at full length.
  const int64_t most_useful = static_cast<int64_t>(engine_config.max_num_seqs) *
                              ((engine_config.max_model_len + options.block_size - 1) / options.block_size);
  // The blocks kv_cache_bytes, or each device's share of what it has free, holds.
  auto blocks_that_fit = [&]() -> int64_t {
    int64_t blocks = std::numeric_limits<int64_t>::max();
    free_after_load = 0;
    if (options.kv_cache_bytes > 0) {
      blocks = options.kv_cache_bytes / static_cast<int64_t>(all_ranks_block_bytes);
    } else {
      for (const LayerSegment& seg : segments) {
        for (int32_t r = 0; r < seg.num_ranks(); ++r) {
          Backend& b = seg.rank_backend(r);
          const size_t free_bytes = b.free_memory();
          free_after_load += free_bytes;
          const int64_t fit = static_cast<int64_t>(static_cast<double>(free_bytes) * device_fraction) /
                              static_cast<int64_t>(layer_block_bytes * seg.num_layers);
          if (fit < blocks) {
            blocks = fit;
            tightest = b.name();
          }
        }
      }
    }
    return std::min(blocks, most_useful);
  };
  int64_t num_blocks = blocks_that_fit();
  // Every device must hold its layers' KV in kv_dtype. An FP8 cache's prefill copy is allocated
  // now, for the longest context the cache could hold, and the cache then takes its share of what
  // is left.
  const int64_t longest_context =
      std::min<int64_t>(engine_config.max_model_len,
                        std::max<int64_t>(1, num_blocks) * options.block_size);
  for (const LayerSegment& seg : segments) {
    for (int32_t r = 0; r < seg.num_ranks(); ++r) {
      TESSERA_RETURN_IF_ERROR(seg.rank_backend(r).prepare_kv_cache(
          kv_dtype, inst->family_->attention_shape(), options.block_size,
          static_cast<int32_t>(longest_context)));
    }
  }
  if (is_fp8(kv_dtype)) num_blocks = blocks_that_fit();
  if (num_blocks < 1) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "kv cache: no block of ", options.block_size, " tokens (", all_ranks_block_bytes,
        " bytes over all layers", tp > 1 ? " and ranks" : "", ") fits", tightest.empty() ? "" : " on " + tightest,
        "; raise kv_cache_bytes or kv_cache_fraction, or lower max_batch_tokens"));
  }
  TESSERA_ASSIGN_OR_RETURN(
      inst->cache_,
      KvCache::create(segments,
                      inst->family_->kv_cache_shape(static_cast<int32_t>(num_blocks),
                                                    options.block_size),
                      kv_dtype));
  std::string kv_scales;
  if (is_fp8(kv_dtype)) {
    TESSERA_ASSIGN_OR_RETURN(kv_scales, inst->set_kv_scales(engine_config.max_model_len));
  } else if (config.quantization.kv_cache_scales) {
    spdlog::info("the checkpoint has FP8 KV cache scales; kv_cache_dtype: fp8 would use them");
  }
  // The plan's KV columns estimated from the reserve; now they are what was allocated.
  for (DevicePlacement& d : inst->plan_.devices) {
    if (d.num_layers() == 0) continue;
    d.kv_bytes = layer_block_bytes * d.num_layers() * static_cast<uint64_t>(num_blocks);
    d.kv_capacity_tokens = num_blocks * options.block_size;
  }
  inst->plan_.kv_capacity_tokens = num_blocks * options.block_size;
  spdlog::info("model {}: {} layers, {:.1f} MiB weights on {} device(s)\n{}", path,
               config.num_layers, inst->weight_bytes() / 1048576.0, inst->backends_.size(),
               format_plan_table(inst->plan_));
  if (tp > 1) {
    spdlog::info("tensor parallelism: {} ranks per stage, collectives: {}", tp, inst->collectives());
  }
  spdlog::info("KV cache: {} blocks x {} tokens = {} tokens in {} ({:.1f} MiB{}), prefix caching {}{}",
               num_blocks, options.block_size, num_blocks * options.block_size,
               is_fp8(kv_dtype) ? "fp8 e4m3" : dtype_name(kv_dtype),
               num_blocks * all_ranks_block_bytes / 1048576.0,
               options.kv_cache_bytes > 0
                   ? std::string(", kv_cache_bytes")
                   : str_cat(" of ", free_after_load / 1048576, " MiB free after loading, kv_cache_fraction ",
                             fraction),
               engine_config.enable_prefix_caching ? "on" : "off", kv_scales);
  if (const int64_t graphs = inst->runner_->largest_graph_bucket(); graphs > 0) {
    spdlog::info("decode graphs: decode steps of up to {} sequences padded to their bucket and "
                 "replayed as graphs recorded per bucket and context class", graphs);
  }
  inst->engine_ = std::make_unique<Engine>(*inst->runner_, *inst->cache_, inst->files_.tokenizer(),
                                           engine_config);
  return inst;
}

absl::StatusOr<std::string> ModelInstance::set_kv_scales(int32_t max_model_len) {
  const int32_t layers = static_cast<int32_t>(config().num_layers);
  TESSERA_ASSIGN_OR_RETURN(std::optional<std::vector<LayerKvScales>> scales,
                           read_checkpoint_kv_scales(files_.weights(), layers));
  std::string source = "; scales from the checkpoint";
  if (!scales.has_value()) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
                             tokenizer().encode(kKvCalibrationText));
    // As much of the text as one sequence may hold, and the cache too.
    const int64_t fits = std::min<int64_t>(
        max_model_len, static_cast<int64_t>(cache_->allocator().num_free()) * cache_->block_size());
    if (static_cast<int64_t>(tokens.size()) > fits) tokens.resize(static_cast<size_t>(fits));
    TESSERA_ASSIGN_OR_RETURN(scales, calibrate_kv_scales(*runner_, *cache_, tokens));
    source = str_cat("; scales calibrated on ", tokens.size(), " tokens");
  }
  float k_lo = scales->front().k, k_hi = k_lo, v_lo = scales->front().v, v_hi = v_lo;
  for (int32_t i = 0; i < layers; ++i) {
    const LayerKvScales& s = (*scales)[i];
    cache_->set_scales(i, s.k, s.v);
    k_lo = std::min(k_lo, s.k);
    k_hi = std::max(k_hi, s.k);
    v_lo = std::min(v_lo, s.v);
    v_hi = std::max(v_hi, s.v);
  }
  return str_cat(source, " (k ", k_lo, "..", k_hi, ", v ", v_lo, "..", v_hi, ")");
}

}  // namespace tessera
