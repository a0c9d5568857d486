#include "server/served_model.h"

#include <cstdlib>
#include <filesystem>

#include "base/dtype.h"
#include "runtime/backend/quantization.h"
#include "runtime/placement/device_map.h"

namespace tessera::server {

std::string model_id_from_path(const std::string& path) {
  std::filesystem::path p(path);
  while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
  if (p.extension() == ".gguf") return p.stem().string();
  return p.filename().string();
}

TuningConfig tuning_config(const DaemonConfig& config) {
  TuningConfig t;
  // daemon_config validated every value; the fallbacks are unreachable.
  t.mode = parse_tuning_mode(config.tuning_mode).value_or(TuningMode::kOff);
  t.filename = config.tuning_file;
  t.max_tuning_duration_ms = config.tuning_max_duration_ms;
  t.max_tuning_iterations = config.tuning_max_iterations;
  t.rotating_buffer_size_mb = config.tuning_rotating_buffer_mb;
  t.buckets.decode = config.tuning_decode_buckets;
  t.buckets.prefill_pad = config.tuning_prefill_pad;
  return t;
}

InstanceOptions instance_options(const DaemonConfig& config) {
  InstanceOptions options;
  // daemon_config validated the names; parse_backend_kind and parse_gpu_dtype cannot fail here.
  options.backend.kind = parse_backend_kind(config.backend).value_or(BackendKind::kAuto);
  options.backend.gpu_device = config.gpu_device;
  options.backend.gpu_dtype = parse_gpu_dtype(config.dtype).value_or(DType::kBF16);
  options.backend.threads = config.threads;
  // daemon_config validated the placement keys too.
  if (config.devices == "all") {
    options.backend.all_devices = true;
  } else {
    options.backend.devices = parse_devices(config.devices).value_or(std::vector<int32_t>{});
  }
  options.device_map = config.device_map;
  options.tensor_parallel_size = config.tensor_parallel_size;
  // daemon_config validated the name.
  options.quantization = parse_quantization(config.quantization).value_or(std::nullopt);
  options.quantization_keep = QuantizationKeep::parse(config.quantization_keep).value_or(QuantizationKeep{});
  options.kv_cache_dtype = parse_kv_cache_dtype(config.kv_cache_dtype).value_or(KvCacheDtype::kAuto);
  options.max_memory = config.max_memory;
  options.kv_reserve_bytes = static_cast<uint64_t>(config.kv_reserve);
  options.execution.micro_batches = config.micro_batches;
  options.execution.decode_graphs =
      config.decode_graphs == "off" ? DecodeGraphs::kOff : DecodeGraphs::kAuto;
  options.limits.max_batch_tokens = config.max_batch_tokens;
  options.limits.max_logit_rows = config.max_num_seqs;
  options.block_size = config.block_size;
  options.kv_cache_bytes = config.kv_cache_bytes;
  options.kv_cache_fraction = config.kv_cache_fraction;
  options.engine.max_num_seqs = config.max_num_seqs;
  options.engine.enable_prefix_caching = config.enable_prefix_caching == "true";
  options.engine.admission_headroom_steps = config.admission_headroom_steps;
  options.engine.max_queue = config.max_queue;
  options.engine.max_model_len = config.max_model_len;
  options.tuning = tuning_config(config);
  return options;
}

absl::StatusOr<std::unique_ptr<ServedModel>> ServedModel::load(const DaemonConfig& config) {
  InstanceOptions options = instance_options(config);
  if (absl::Status s = apply_environment([](const char* name) { return std::getenv(name); },
                                         &options.tuning);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<ModelInstance>> instance =
      ModelInstance::load(config.model, options);
  if (!instance.ok()) return instance.status();
  std::unique_ptr<ServedModel> m(new ServedModel());
  m->instance_ = *std::move(instance);
  m->id_ = config.model_id.empty() ? model_id_from_path(config.model) : config.model_id;

  ModelInstance& inst = *m->instance_;
  const ModelConfig& mc = inst.config();
  const EngineConfig& ec = inst.engine().config();
  m->limits_.model_id = m->id_;
  m->limits_.vocab_size = inst.tokenizer().vocab_size();
  m->limits_.max_model_len = ec.max_model_len;
  m->limits_.has_chat_template = inst.files().has_chat_template();

  tessera::v1::ModelInfo& info = m->info_;
  info.set_id(m->id_);
  info.set_path(config.model);
  info.set_architecture(mc.architecture);
  info.set_vocab_size(m->limits_.vocab_size);
  info.set_hidden_size(mc.hidden_size);
  info.set_num_layers(mc.num_layers);
  info.set_num_heads(mc.num_heads);
  info.set_num_kv_heads(mc.num_kv_heads);
  info.set_max_model_len(ec.max_model_len);
  info.set_backend(inst.backend().name());
  info.set_dtype(std::string(dtype_name(inst.backend().compute_dtype())));
  info.set_weight_bytes(static_cast<int64_t>(inst.weight_bytes()));
  info.set_kv_cache_blocks(inst.cache().allocator().num_blocks());
  info.set_kv_block_size(inst.cache().block_size());
  info.set_has_chat_template(m->limits_.has_chat_template);
  info.set_max_num_seqs(ec.max_num_seqs);
  info.set_max_batch_tokens(inst.runner().limits().max_batch_tokens);
  info.set_device_map(std::string(device_map_strategy_name(inst.plan().strategy)));
  for (const DevicePlacement& d : inst.plan().devices) {
    tessera::v1::DevicePlacement* p = info.add_placement();
    p->set_device(d.device);
    p->set_name(d.name);
    p->set_first_layer(d.first_layer);
    p->set_last_layer(d.last_layer);
    p->set_embeddings(d.embeddings);
    p->set_head(d.head);
    p->set_weight_bytes(static_cast<int64_t>(d.weight_bytes));
    p->set_allowed_bytes(static_cast<int64_t>(d.allowed_bytes));
    p->set_kv_bytes(static_cast<int64_t>(d.kv_bytes));
    p->set_kv_capacity_tokens(d.kv_capacity_tokens);
    for (int32_t r : d.ranks) p->add_ranks(r);
  }
  info.set_tensor_parallel_size(inst.tensor_parallel_size());
  info.set_quantization(std::string(quantization_name(inst.quantization())));
  info.set_kv_cache_dtype(std::string(dtype_name(inst.cache().dtype())));
  info.set_collectives(inst.collectives());
  return m;
}

}  // namespace tessera::server
