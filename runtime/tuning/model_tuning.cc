#include "runtime/tuning/model_tuning.h"

#include <algorithm>
#include <utility>

#include "base/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera {

GemmModelShape gemm_model_shape(const ModelConfig& config, GemmDType dtype,
                                Quantization quantization, const QuantizationKeep& keep) {
  GemmModelShape s;
  s.hidden = config.hidden_size;
  s.intermediate = config.intermediate_size;
  s.num_heads = config.num_heads;
  s.num_kv_heads = config.num_kv_heads;
  s.head_dim = config.head_dim;
  s.vocab = config.vocab_size;
  s.num_layers = config.num_layers;
  s.dtype = dtype;
  if (quantization == Quantization::kFp8) {
    s.layer_dtype = GemmDType::kF8E4M3FN;
    s.kept_layers = keep.kept_layers(config.num_layers);
  }
  return s;
}

absl::StatusOr<std::unique_ptr<ModelTuning>> ModelTuning::attach(
    const TuningConfig& config, const GemmModelShape& shape, const WarmupLimits& limits,
    std::vector<TuningDevice> devices) {
  if (absl::Status s = config.validate(); !s.ok()) {
    return absl::InvalidArgumentError(str_cat("tuning config: ", s.message()));
  }
  std::unique_ptr<ModelTuning> t(new ModelTuning(config, shape, limits));
  for (const TuningDevice& d : devices) {
    TunableGemm* gemm = d.backend->tunable_gemm();
    if (gemm == nullptr) {
      if (config.mode != TuningMode::kOff) {
        spdlog::warn("tuning: the {} backend of device {} has no tunable GEMMs; tuning mode {} "
                     "does not apply to it",
                     d.backend->name(), d.ordinal, tuning_mode_name(config.mode));
      }
      continue;
    }
    // The CPU backend is the one that computes in host memory.
    const TuningDeviceKind kind =
        d.backend->uses_host_memory() ? TuningDeviceKind::kCpu : TuningDeviceKind::kGpu;
    absl::StatusOr<std::unique_ptr<TuningContext>> ctx =
        TuningContext::create(config, kind, d.ordinal, gemm);
    if (!ctx.ok()) return ctx.status();
    // With tuning off every answer is the default: linear() then asks nobody (no lookup per GEMM).
    if (reads_results(config.mode)) d.backend->set_gemm_solutions(ctx->get());
    t->devices_.push_back(d);
    t->contexts_.push_back(*std::move(ctx));
  }
  return t;
}

ModelTuning::~ModelTuning() {
  std::shared_ptr<WarmupJob> job;
  {
    std::lock_guard<std::mutex> lock(job_mu_);
    job = job_;
  }
  if (job) {
    job->cancel();
    job->wait();
  }
  for (const TuningDevice& d : devices_) d.backend->set_gemm_solutions(nullptr);
}

std::vector<TuningContext*> ModelTuning::contexts() const {
  std::vector<TuningContext*> out;
  for (const auto& c : contexts_) out.push_back(c.get());
  return out;
}

WarmupSpec ModelTuning::default_spec() const {
  WarmupSpec spec;
  spec.buckets = config_.buckets;
  spec.limits = limits_;
  return spec;
}

absl::StatusOr<std::vector<WarmupGemm>> ModelTuning::plan(const WarmupSpec& spec) const {
  if (spec.limits.max_batch_tokens > limits_.max_batch_tokens) {
    return absl::InvalidArgumentError(str_cat("warmup: max prefill tokens ",
                                              spec.limits.max_batch_tokens,
                                              " exceeds the engine's max_batch_tokens ",
                                              limits_.max_batch_tokens));
  }
  WarmupLimits limits = spec.limits;
  // A step samples at most one row per token it runs.
  limits.max_logit_rows =
      std::min({limits.max_logit_rows, limits_.max_logit_rows, limits.max_batch_tokens});
  return plan_warmup_gemms(shape_, spec.buckets, limits);
}

absl::StatusOr<std::shared_ptr<WarmupJob>> ModelTuning::start_warmup(const WarmupSpec& spec,
                                                                     WarmupJob::OnUpdate on_update) {
  if (!tunes_on_miss(config_.mode)) {
    return absl::FailedPreconditionError(
        str_cat("warmup needs tuning mode tune or warmup; the mode is ",
                tuning_mode_name(config_.mode)));
  }
  if (contexts_.empty()) {
    return absl::FailedPreconditionError("warmup: no device of this model has tunable GEMMs");
  }
  absl::StatusOr<std::vector<WarmupGemm>> gemms = plan(spec);
  if (!gemms.ok()) return gemms.status();
  std::lock_guard<std::mutex> lock(job_mu_);
  if (closed_) {
    return absl::FailedPreconditionError("the server is draining: no new warmup starts");
  }
  if (job_) {
    const WarmupSnapshot s = job_->snapshot();
    if (s.state == WarmupState::kRunning) {
      return absl::AlreadyExistsError(
          str_cat("a warmup is already running (", s.done, "/", s.total, " GEMMs done)"));
    }
  }
  std::vector<bool> heads;
  for (const TuningDevice& d : devices_) heads.push_back(d.runs_head);
  job_ = WarmupJob::start(contexts(), *std::move(gemms), spec.options, std::move(on_update),
                          std::move(heads));
  return job_;
}

void ModelTuning::cancel_warmup() {
  std::lock_guard<std::mutex> lock(job_mu_);
  closed_ = true;
  if (job_) job_->cancel();
}

std::shared_ptr<const WarmupJob> ModelTuning::last_warmup() const {
  std::lock_guard<std::mutex> lock(job_mu_);
  return job_;
}

GemmTuningStats ModelTuning::stats() const {
  GemmTuningStats s;
  for (const auto& ctx : contexts_) {
    const GemmTuningCounters c = ctx->counters();
    s.totals.hits += c.hits;
    s.totals.misses += c.misses;
    s.totals.shapes_tuned += c.shapes_tuned;
    s.totals.tuning_seconds += c.tuning_seconds;
    for (const auto& [sig, gain] : ctx->gains()) s.gains.push_back({ctx->ordinal(), sig, gain});
  }
  return s;
}

}  // namespace tessera
