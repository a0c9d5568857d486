// tesserad's life: start the gRPC server (health NOT_SERVING), load the model and start its
// engine (SERVING), and on a signal drain: stop admitting (UNAVAILABLE), health NOT_SERVING, let
// in-flight requests finish within drain_timeout, cancel the rest with a clear status, shut the
// server down.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "server/admin_service.h"
#include "server/call_auth.h"
#include "server/daemon_config.h"
#include "server/generation_service.h"
#include "server/http/http_server.h"
#include "server/metrics/readiness_state.h"
#include "server/metrics/tessera_metrics.h"
#include "server/output_delivery.h"
#include "server/serving_state.h"

namespace tessera::server {

class Daemon {
 public:
  explicit Daemon(DaemonConfig config);
  // Shuts down whatever is still running (no drain wait).
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Builds and starts the gRPC server: every service answers, Generation with UNAVAILABLE until
  // the model is loaded. Errors name the address or the TLS file.
  absl::Status start();
  // The bound port (the chosen one when listen's port is 0); 0 before start().
  int port() const { return port_; }

  // Loads the model, starts its engine and goes SERVING.
  absl::Status load_model();

  // The drain; returns once the server has shut down. Safe to call once.
  void drain();
  // Ends the drain's wait for in-flight requests now (a second SIGTERM/SIGINT).
  void cut_drain_short();

  ServingState& state() { return state_; }
  // The admin listener's bound port (0 before start()).
  int admin_port() const { return admin_http_ ? admin_http_->port() : 0; }
  // The OpenAI API listener's bound port (0 before start() or when openai_listen is empty).
  int openai_port() const { return openai_http_ ? openai_http_->port() : 0; }
  const DaemonConfig& config() const { return config_; }

 private:
  void shutdown_server();
  // Tuning mode warmup: starts the warmup of the model's whole plan and holds readiness and
  // health at NOT_SERVING until it ends. False when there is none to run.
  bool warm_up_before_serving();
  absl::Status start_admin_listener();
  absl::Status start_openai_listener();

  DaemonConfig config_;
  ServingState state_;
  TesseraMetrics metrics_;    // outlives the engine that reports to it
  ReadinessState readiness_;
  std::unique_ptr<HttpServer> admin_http_;
  // Runs the gRPC calls' output pumps: destroyed after the model and the servers, since the
  // engine's last outputs (shutdown) reach the calls through it while the gRPC server drains.
  std::unique_ptr<OutputDelivery> delivery_;
  std::unique_ptr<ServedModel> model_;  // declared before the servers: destroyed after them
  std::unique_ptr<HttpServer> openai_http_;
  std::string api_key_;                   // resolved at start(); empty = none
  std::unique_ptr<CallAuth> call_auth_;   // outlives the services that hold it
  std::unique_ptr<GenerationService> generation_;
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  std::mutex drain_mu_;
  std::condition_variable drain_cv_;
  bool cut_short_ = false;
  std::atomic<bool> drained_{false};
};

}  // namespace tessera::server
