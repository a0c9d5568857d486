// ServingState's model fault: the phase moves to faulted from loading, warming up or serving
// (never out of a drain, and a drain still follows it), the first reason is kept, and the health
// service hears NOT_SERVING for both service names. ReadinessState: the fault is final and its
// reason is /readyz's, after "draining".
#include <gtest/gtest.h>

#include <grpcpp/health_check_service_interface.h>

#include <map>
#include <string>

#include "server/metrics/readiness_state.h"
#include "server/serving_state.h"

namespace tessera::server {
namespace {

// Records the last status set per service name.
class RecordingHealth final : public grpc::HealthCheckServiceInterface {
 public:
  void SetServingStatus(const std::string& service, bool serving) override {
    serving_[service] = serving;
  }
  void SetServingStatus(bool serving) override {
    for (auto& [name, s] : serving_) s = serving;
  }
  bool serving(const std::string& service) const {
    auto it = serving_.find(service);
    return it != serving_.end() && it->second;
  }
  bool heard(const std::string& service) const { return serving_.count(service) > 0; }

 private:
  std::map<std::string, bool> serving_;
};

constexpr const char* kReason =
    "model fault: sampling gave token id -1: the model's logits are not finite (NaN or inf)";

TEST(ServingStateFault, FaultedIsNotServingKeepsTheFirstReasonAndYieldsToADrain) {
  ServingState state;
  RecordingHealth health;
  state.attach_health(&health);
  state.set_phase(Phase::kServing);
  EXPECT_TRUE(health.serving(""));
  EXPECT_TRUE(health.serving(kGenerationServiceName));
  EXPECT_EQ(state.fault_reason(), "");

  state.set_fault(kReason);
  EXPECT_EQ(state.phase(), Phase::kFaulted);
  EXPECT_STREQ(phase_name(state.phase()), "faulted");
  EXPECT_EQ(state.fault_reason(), kReason);
  EXPECT_TRUE(health.heard(""));
  EXPECT_FALSE(health.serving(""));
  EXPECT_FALSE(health.serving(kGenerationServiceName));

  state.set_fault("a later fault");
  EXPECT_EQ(state.fault_reason(), kReason);
  // Nothing brings serving back but a new process; a drain (SIGTERM) still takes over.
  EXPECT_FALSE(state.advance(Phase::kWarmingUp, Phase::kServing));
  EXPECT_FALSE(state.advance(Phase::kLoading, Phase::kServing));
  EXPECT_EQ(state.phase(), Phase::kFaulted);
  state.set_phase(Phase::kDraining);
  EXPECT_EQ(state.phase(), Phase::kDraining);
  EXPECT_FALSE(health.serving(""));
}

TEST(ServingStateFault, AFaultDuringWarmupFaultsButADrainStaysADrain) {
  ServingState warming;
  warming.set_phase(Phase::kWarmingUp);
  warming.set_fault(kReason);
  EXPECT_EQ(warming.phase(), Phase::kFaulted);

  ServingState draining;
  draining.set_phase(Phase::kDraining);
  draining.set_fault(kReason);
  EXPECT_EQ(draining.phase(), Phase::kDraining);
  EXPECT_EQ(draining.fault_reason(), kReason);
}

TEST(ReadinessStateFault, TheFaultIsTheReasonUntilADrain) {
  ReadinessState r;
  r.set_model_loaded(true);
  r.set_warmup_done(true);
  ASSERT_TRUE(r.ready());
  r.set_faulted(kReason);
  EXPECT_TRUE(r.faulted());
  EXPECT_FALSE(r.ready());
  EXPECT_EQ(r.not_ready_reason(), kReason);
  r.set_faulted("a later fault");
  EXPECT_EQ(r.not_ready_reason(), kReason);
  r.set_draining();
  EXPECT_EQ(r.not_ready_reason(), "draining");
}

}  // namespace
}  // namespace tessera::server
