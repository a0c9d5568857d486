// The model the daemon serves: the loaded instance (files, backend, KV cache, engine), its id,
// the limits request validation checks against, and its ModelInfo for ListModels/GetModelInfo.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/model_instance.h"
#include "server/daemon_config.h"
#include "server/request_validation.h"
#include "tessera/v1/tessera.pb.h"

namespace tessera::server {

class ServedModel {
 public:
  // Loads config.model with the engine settings of `config` (the engine is not started). The
  // TESSERA_TUNABLEOP_* / PYTORCH_TUNABLEOP_* environment overrides the tuning keys; a bad
  // variable is an error naming it.
  static absl::StatusOr<std::unique_ptr<ServedModel>> load(const DaemonConfig& config);

  const std::string& id() const { return id_; }
  const ModelLimits& limits() const { return limits_; }
  const tessera::v1::ModelInfo& info() const { return info_; }
  ModelInstance& instance() { return *instance_; }
  Engine& engine() { return instance_->engine(); }
  const Tokenizer& tokenizer() const { return instance_->tokenizer(); }
  const ModelFiles& files() const { return instance_->files(); }

 private:
  ServedModel() = default;
  std::string id_;
  std::unique_ptr<ModelInstance> instance_;
  ModelLimits limits_;
  tessera::v1::ModelInfo info_;
};

// "models/SmolLM2-135M-Instruct.Q4_1.gguf" -> "SmolLM2-135M-Instruct.Q4_1"; a directory's name.
std::string model_id_from_path(const std::string& path);

// The runtime's options for `config` (tuning before the environment's overrides, which
// ServedModel::load applies).
InstanceOptions instance_options(const DaemonConfig& config);
// The tuning settings of `config`.
TuningConfig tuning_config(const DaemonConfig& config);

}  // namespace tessera::server
