#include "server/daemon.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/impl/server_builder_option.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "server/logging.h"
#include "base/status_macros.h"
#include "server/api_key.h"
#include "server/http/admin_routes.h"
#include "server/http/openai_routes.h"
#include "server/message_limits.h"
#include "server/open_listener.h"
#include "server/server_credentials.h"
#include "server/prefix_cache_routes.h"
#include "server/tuning_routes.h"

namespace tessera::server {

namespace {

int to_ms(double seconds) { return static_cast<int>(std::min(seconds * 1000.0, 2.0e9)); }

// The address with the port actually bound ("0.0.0.0:0" -> "0.0.0.0:43121").
std::string bound_address(const std::string& listen, int port) {
  if (listen.starts_with("unix:")) return listen;
  return absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
}

// Leaves server reflection out of one server. Its plugin registers itself for every ServerBuilder
// of the process once InitProtoReflectionServerBuilderPlugin() has run, so turning it off per
// server means taking the plugin out of that builder's list.
class WithoutReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    std::erase_if(*plugins, [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
      return dynamic_cast<grpc::reflection::ProtoServerReflectionPlugin*>(p.get()) != nullptr;
    });
  }
};

void warn_if_open(std::string_view what, std::string_view listen, std::string_view bound,
                  bool guarded, std::string_view missing) {
  if (std::optional<std::string> w = open_listener_warning(what, listen, bound, guarded, missing)) {
    spdlog::warn("{}", *w);
  }
}

constexpr char kNoApiKey[] = "no API key (api_key, api_key_file or TESSERA_API_KEY)";

}  // namespace

Daemon::Daemon(DaemonConfig config) : config_(std::move(config)) {}

Daemon::~Daemon() {
  if (model_) model_->engine().shutdown(absl::CancelledError("server shutting down"));
  shutdown_server();
  if (openai_http_) openai_http_->stop();
  if (admin_http_) admin_http_->stop();
  metrics_.set_engine_stats(nullptr);
  metrics_.set_gemm_tuning(nullptr);
}

absl::Status Daemon::start() {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = make_server_credentials(config_);
  if (!credentials.ok()) return credentials.status();
  absl::StatusOr<std::string> api_key =
      resolve_api_key(config_, [](const char* name) { return std::getenv(name); });
  if (!api_key.ok()) return api_key.status();
  api_key_ = *std::move(api_key);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();

  call_auth_ = std::make_unique<CallAuth>(api_key_, config_.admin_token);
  delivery_ = std::make_unique<OutputDelivery>();
  generation_ = std::make_unique<GenerationService>(state_, *call_auth_, *delivery_);
  admin_ = std::make_unique<AdminService>(state_, *call_auth_, config_.admin_token);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config_.listen, *credentials, &port_);
  builder.RegisterService(generation_.get());
  builder.RegisterService(admin_.get());
  if (config_.grpc_reflection != "true") builder.SetOption(std::make_unique<WithoutReflection>());
  builder.SetMaxReceiveMessageSize(max_receive_message_bytes(config_.max_message_bytes));
  builder.SetMaxSendMessageSize(max_send_message_bytes(config_.max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, to_ms(config_.keepalive_time_seconds));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, to_ms(config_.keepalive_timeout_seconds));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             to_ms(config_.keepalive_min_ping_interval_seconds));
  server_ = builder.BuildAndStart();
  if (!server_) {
    return absl::UnavailableError(absl::StrCat(
        "listen: cannot serve on \"", config_.listen,
        "\": the address is invalid or in use, or the TLS certificate and key do not match"));
  }
  if (!config_.listen.starts_with("unix:") && port_ == 0) {
    return absl::UnavailableError(absl::StrCat("listen: cannot bind \"", config_.listen, "\""));
  }
  state_.attach_health(server_->GetHealthCheckService());
  state_.set_metrics(&metrics_);

  TESSERA_RETURN_IF_ERROR(start_admin_listener());
  TESSERA_RETURN_IF_ERROR(start_openai_listener());
  spdlog::info("tesserad {} listening on {} ({}{}); loading {}", TESSERA_VERSION,
               bound_address(config_.listen, port_), security_name(config_),
               api_key_.empty() ? "" : ", API key required", config_.model);
  warn_if_open("gRPC (tessera.v1.Generation and Admin)", config_.listen,
               bound_address(config_.listen, port_),
               !api_key_.empty() || !config_.tls_client_ca.empty(),
               absl::StrCat(kNoApiKey, " and no mTLS (tls_client_ca)"));
  return absl::OkStatus();
}

absl::Status Daemon::start_admin_listener() {
  HttpServerOptions admin;
  admin.name = "admin";
  admin.listen = config_.admin_listen;
  if (!config_.admin_token.empty()) admin.bearer_tokens = {config_.admin_token};
  admin_http_ = std::make_unique<HttpServer>(admin);
  admin_http_->set_response_observer([this](std::string_view route, int status) {
    metrics_.on_http_response("admin", route, status);
  });
  TESSERA_RETURN_IF_ERROR(
      add_admin_routes(*admin_http_, readiness_, [this] { return metrics_.serialize(); }));
  TESSERA_RETURN_IF_ERROR(add_tuning_routes(
      *admin_http_,
      [this]() -> ModelTuning* {
        ServedModel* model = state_.model();
        return model == nullptr ? nullptr : &model->instance().tuning();
      },
      config_.admin_token));
  TESSERA_RETURN_IF_ERROR(add_prefix_cache_routes(*admin_http_, [this]() -> Engine* {
    ServedModel* model = state_.model();
    return model == nullptr ? nullptr : &model->engine();
  }));
  if (absl::Status s = admin_http_->start(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("admin_listen: ", std::string(s.message())));
  }
  const std::string bound = bound_address(config_.admin_listen, admin_http_->port());
  spdlog::info("admin listener (/metrics, /healthz, /readyz, /v1/tuning, /v1/prefix_cache/reset) on {}",
               bound);
  warn_if_open("the admin listener's mutating routes (POST /v1/tuning/warmup, "
               "/v1/prefix_cache/reset)",
               config_.admin_listen, bound, !config_.admin_token.empty(), "no admin_token");
  return absl::OkStatus();
}

absl::Status Daemon::start_openai_listener() {
  if (config_.openai_listen.empty()) return absl::OkStatus();
  HttpServerOptions openai;
  openai.name = "openai";
  openai.listen = config_.openai_listen;
  openai.tls_cert = config_.tls_cert;
  openai.tls_key = config_.tls_key;
  // As on gRPC (CallAuth): the API key, or the admin token, where a key is set.
  if (!api_key_.empty()) {
    openai.bearer_tokens = {api_key_};
    if (!config_.admin_token.empty()) openai.bearer_tokens.push_back(config_.admin_token);
  }
  openai.max_body_bytes = static_cast<size_t>(config_.max_message_bytes);
  openai.max_connections = config_.http_max_connections;
  openai.threads = config_.http_threads;
  openai.idle_timeout_seconds = config_.keepalive_time_seconds;
  openai.request_timeout_seconds = config_.http_request_timeout_seconds;
  openai.write_timeout_seconds = config_.http_write_timeout_seconds;
  openai_http_ = std::make_unique<HttpServer>(openai);
  openai_http_->set_response_observer([this](std::string_view route, int status) {
    metrics_.on_http_response("openai", route, status);
  });
  TESSERA_RETURN_IF_ERROR(add_openai_routes(*openai_http_, state_));
  if (absl::Status s = openai_http_->start(); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("openai_listen: ", std::string(s.message())));
  }
  const std::string bound = bound_address(config_.openai_listen, openai_http_->port());
  spdlog::info("OpenAI API on {}{}", bound, api_key_.empty() ? "" : " (API key required)");
  warn_if_open("the OpenAI API", config_.openai_listen, bound, !api_key_.empty(), kNoApiKey);
  return absl::OkStatus();
}

absl::Status Daemon::load_model() {
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<ServedModel>> model = ServedModel::load(config_);
  if (!model.ok()) {
    return absl::Status(model.status().code(), absl::StrCat("model \"", config_.model,
                                                            "\": ", std::string(model.status().message())));
  }
  model_ = *std::move(model);
  const tessera::v1::ModelInfo& model_info = model_->info();
  model_->engine().set_observer(&metrics_);
  // A model fault (non-finite logits; the engine logs it) is final: readiness and health go
  // NOT_SERVING with its reason, and Generation answers UNAVAILABLE with it (the engine refuses
  // requests itself too).
  model_->engine().set_fault_listener([this](const absl::Status& fault) {
    readiness_.set_faulted(std::string(fault.message()));
    state_.set_fault(std::string(fault.message()));
  });
  metrics_.set_engine_stats(&model_->engine().stats(), model_info.backend());
  metrics_.set_model_info({model_->id(), model_info.architecture(), model_info.dtype(),
                           model_info.backend(), model_info.max_model_len(),
                           model_info.quantization(), model_info.kv_cache_dtype()});
  metrics_.set_placement(model_->instance().plan());
  metrics_.set_gemm_tuning(&model_->instance().tuning());
  model_->engine().start();
  state_.set_model(model_.get());
  if (!warm_up_before_serving()) {
    readiness_.set_warmup_done(true);
    state_.advance(Phase::kLoading, Phase::kServing);
  }
  readiness_.set_model_loaded(true);
  const tessera::v1::ModelInfo& info = model_->info();
  spdlog::info("serving model \"{}\" (loaded in {:.2f}s): {} layers, vocab {}, max_model_len {}, "
               "KV cache {} blocks x {} tokens, max_num_seqs {}, max_batch_tokens {}",
               model_->id(), std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
               info.num_layers(), info.vocab_size(), info.max_model_len(), info.kv_cache_blocks(),
               info.kv_block_size(), info.max_num_seqs(), info.max_batch_tokens());
  return absl::OkStatus();
}

bool Daemon::warm_up_before_serving() {
  ModelTuning& tuning = model_->instance().tuning();
  if (!tunes_upfront(tuning.config().mode)) return false;
  const WarmupSpec spec = tuning.default_spec();
  if (absl::StatusOr<std::vector<WarmupGemm>> plan = tuning.plan(spec); plan.ok()) {
    readiness_.set_warmup_progress(0, static_cast<int64_t>(plan->size() * tuning.contexts().size()));
  }
  readiness_.set_warmup_done(false);
  state_.advance(Phase::kLoading, Phase::kWarmingUp);
  absl::StatusOr<std::shared_ptr<WarmupJob>> job = tuning.start_warmup(
      spec, [this](WarmupState s, size_t done, size_t total) {
        readiness_.set_warmup_progress(static_cast<int64_t>(done), static_cast<int64_t>(total));
        if (s == WarmupState::kRunning) return;
        readiness_.set_warmup_done(true);
        if (state_.advance(Phase::kWarmingUp, Phase::kServing)) {
          spdlog::info("warmup at start {}: serving", warmup_state_name(s));
        }
      });
  if (!job.ok()) {
    spdlog::warn("tuning mode warmup: cannot warm up before serving ({}); serving untuned",
                 std::string(job.status().message()));
    state_.advance(Phase::kWarmingUp, Phase::kLoading);
    return false;
  }
  spdlog::info("tuning mode warmup: tuning {} GEMMs before serving; readiness waits",
               (*job)->snapshot().total);
  return true;
}

void Daemon::cut_drain_short() {
  {
    std::lock_guard<std::mutex> lock(drain_mu_);
    cut_short_ = true;
  }
  drain_cv_.notify_all();
}

void Daemon::drain() {
  if (drained_.exchange(true)) return;
  const auto t0 = std::chrono::steady_clock::now();
  readiness_.set_draining();
  state_.set_phase(Phase::kDraining);
  if (model_) model_->instance().tuning().cancel_warmup();
  if (model_) {
    Engine& engine = model_->engine();
    engine.stop_admitting();
    const EngineStats& stats = engine.stats();
    spdlog::info("draining: {} running, {} waiting; waiting up to {:.1f}s for them to finish",
                 stats.running.load(), stats.waiting.load(), config_.drain_timeout_seconds);
    const auto until = t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                std::chrono::duration<double>(config_.drain_timeout_seconds));
    {
      std::unique_lock<std::mutex> lock(drain_mu_);
      while (!engine.idle() && !cut_short_ && std::chrono::steady_clock::now() < until) {
        drain_cv_.wait_for(lock, std::chrono::milliseconds(10));
      }
    }
    bool forced;
    {
      std::lock_guard<std::mutex> lock(drain_mu_);
      forced = cut_short_;
    }
    if (!engine.idle()) {
      spdlog::warn("drain: cancelling {} running and {} waiting requests ({})", stats.running.load(),
                   stats.waiting.load(), forced ? "second signal" : "drain_timeout passed");
    }
    engine.shutdown(absl::CancelledError(
        forced ? std::string("server draining: shutdown forced before the request finished")
               : absl::StrCat("server draining: the request did not finish within drain_timeout (",
                              config_.drain_timeout_seconds, "s)")));
  }
  shutdown_server();
  spdlog::info("drained in {:.2f}s; exiting",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

void Daemon::shutdown_server() {
  if (!server_) return;
  if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) health->Shutdown();
  // Calls still open after a short grace (health watchers, calls just finishing) are cancelled.
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
  state_.attach_health(nullptr);
  server_.reset();
  // By now the engine has ended every request and the streams have had the grace above to
  // send their last event.
  if (openai_http_) openai_http_->stop();
}

}  // namespace tessera::server
