#include "server/metrics/readiness_state.h"

namespace tessera::server {

std::string_view ReadinessState::not_ready_reason() const {
  if (draining()) return "draining";
  if (!model_loaded()) return "model loading";
  if (!warmup_done()) return "warmup in progress";
  return {};
}

}  // namespace tessera::server
