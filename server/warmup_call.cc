#include "server/warmup_call.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "server/metrics/bearer_token.h"
#include "server/status_mapping.h"
#include "server/warmup_proto.h"

namespace tessera::server {

namespace {

using tessera::v1::WarmupProgress;

// How often the writer thread looks at the cancel flag while no GEMM finishes.
constexpr std::chrono::milliseconds kPollInterval(200);

class WarmupCall final : public grpc::ServerWriteReactor<WarmupProgress> {
 public:
  // Finishes at once with `error`.
  explicit WarmupCall(const grpc::Status& error) { Finish(error); }

  explicit WarmupCall(std::shared_ptr<WarmupJob> job) : job_(std::move(job)) {
    writer_ = std::thread([this] { write_progress(); });
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      writing_ = false;
      if (!ok) broken_ = true;
    }
    cv_.notify_all();
  }

  void OnCancel() override {
    if (job_) job_->cancel();
    {
      std::lock_guard<std::mutex> lock(mu_);
      broken_ = true;
    }
    cv_.notify_all();
  }

  void OnDone() override {
    if (writer_.joinable()) {
      if (writer_.get_id() == std::this_thread::get_id()) {
        writer_.detach();  // Finish() ran OnDone inline: the thread ends right after it
      } else {
        writer_.join();
      }
    }
    delete this;
  }

 private:
  // Writes `message` and waits for OnWriteDone; false when the call broke.
  bool write(const WarmupProgress& message) {
    std::unique_lock<std::mutex> lock(mu_);
    if (broken_) return false;
    writing_ = true;
    lock.unlock();
    StartWrite(&message);
    lock.lock();
    cv_.wait(lock, [this] { return !writing_; });
    return !broken_;
  }

  bool broken() {
    std::lock_guard<std::mutex> lock(mu_);
    return broken_;
  }

  void write_progress() {
    size_t written = 0;
    uint64_t seen = 0;
    while (true) {
      const WarmupSnapshot s = job_->wait_for_update(seen, kPollInterval);
      seen = s.sequence;
      if (broken()) break;
      for (; written < s.reports.size(); ++written) {
        WarmupProgress p;
        p.set_done(static_cast<int64_t>(written + 1));
        p.set_total(static_cast<int64_t>(s.total));
        *p.mutable_current() = tuned_gemm_proto(s.reports[written]);
        p.set_state(warmup_state_name(WarmupState::kRunning));
        p.set_elapsed_seconds(s.elapsed_seconds);
        if (!write(p)) break;
      }
      if (broken()) break;
      if (s.state != WarmupState::kRunning) {
        message_ = final_progress(s);
        if (!write(message_)) break;
        Finish(grpc::Status::OK);
        return;
      }
    }
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "warmup call cancelled"));
  }

  std::shared_ptr<WarmupJob> job_;
  WarmupProgress message_;  // the final message, alive until its write completes
  std::mutex mu_;
  std::condition_variable cv_;
  bool writing_ = false;
  bool broken_ = false;
  std::thread writer_;
};

}  // namespace

bool call_authorized(const grpc::CallbackServerContext& context, const std::string& token) {
  if (token.empty()) return true;
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return false;
  return bearer_token_matches(std::string_view(it->second.data(), it->second.size()), token);
}

grpc::ServerWriteReactor<WarmupProgress>* start_warmup_call(
    grpc::CallbackServerContext* context, const tessera::v1::WarmupRequest& request,
    ServingState& state, const std::string& admin_token) {
  if (!call_authorized(*context, admin_token)) {
    return new WarmupCall(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                       "Warmup needs the metadata \"authorization: Bearer <admin "
                                       "token>\""));
  }
  ServedModel* model = state.model();
  if (model == nullptr) {
    return new WarmupCall(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                       "the model is still loading: retry when it is served"));
  }
  ModelTuning& tuning = model->instance().tuning();
  absl::StatusOr<WarmupSpec> spec = warmup_spec(request, tuning);
  if (!spec.ok()) return new WarmupCall(to_grpc_status(spec.status()));
  absl::StatusOr<std::shared_ptr<WarmupJob>> job = tuning.start_warmup(*spec);
  if (!job.ok()) return new WarmupCall(to_grpc_status(job.status()));
  return new WarmupCall(*std::move(job));
}

}  // namespace tessera::server
