#include "server/admin_service.h"

#include "server/refused_call.h"
#include "server/status_mapping.h"
#include "server/warmup_call.h"

namespace tessera::server {

tessera::v1::ServerStatus server_status(const ServingState& state) {
  tessera::v1::ServerStatus status;
  status.set_state(phase_name(state.phase()));
  status.set_uptime_seconds(state.uptime_seconds());
  if (ServedModel* model = state.model(); model != nullptr) {
    const EngineStats& stats = model->engine().stats();
    status.set_running_requests(stats.running.load(std::memory_order_relaxed));
    status.set_waiting_requests(stats.waiting.load(std::memory_order_relaxed));
    status.set_kv_cache_blocks_used(stats.kv_blocks_used.load(std::memory_order_relaxed));
    status.set_kv_cache_blocks_total(stats.kv_blocks_total.load(std::memory_order_relaxed));
    status.set_preemptions_total(stats.preemptions_total.load(std::memory_order_relaxed));
  }
  return status;
}

grpc::ServerUnaryReactor* AdminService::GetStatus(grpc::CallbackServerContext* context,
                                                  const tessera::v1::GetStatusRequest*,
                                                  tessera::v1::ServerStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status s = auth_.authenticate(call_authorization(*context)); !s.ok()) {
    reactor->Finish(to_grpc_status(s));
    return reactor;
  }
  *response = server_status(state_);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<tessera::v1::WarmupProgress>* AdminService::Warmup(
    grpc::CallbackServerContext* context, const tessera::v1::WarmupRequest* request) {
  if (absl::Status s = auth_.authenticate(call_authorization(*context)); !s.ok()) {
    return new RefusedStream<tessera::v1::WarmupProgress>(to_grpc_status(s));
  }
  return start_warmup_call(context, *request, state_, admin_token_);
}

}  // namespace tessera::server
