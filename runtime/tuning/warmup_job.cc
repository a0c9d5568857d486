#include "runtime/tuning/warmup_job.h"

#include <algorithm>
#include <utility>

#include "base/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera {

namespace {

bool is_head_gemm(const WarmupGemm& g) { return g.used_by == "lm_head"; }

}  // namespace

const char* warmup_state_name(WarmupState state) {
  switch (state) {
    case WarmupState::kRunning:
      return "running";
    case WarmupState::kDone:
      return "done";
    case WarmupState::kCancelled:
      return "cancelled";
    case WarmupState::kFailed:
      return "failed";
  }
  return "unknown";
}

WarmupJob::WarmupJob(std::vector<WarmupGemm> plan, WarmupOptions options, OnUpdate on_update,
                     size_t devices, size_t head_devices)
    : plan_(std::move(plan)),
      options_(options),
      on_update_(std::move(on_update)),
      started_(std::chrono::steady_clock::now()),
      devices_running_(devices) {
  const size_t head = static_cast<size_t>(std::count_if(plan_.begin(), plan_.end(), is_head_gemm));
  snap_.total = (plan_.size() - head) * devices + head * head_devices;
}

std::shared_ptr<WarmupJob> WarmupJob::start(std::vector<TuningContext*> contexts,
                                            std::vector<WarmupGemm> plan, WarmupOptions options,
                                            OnUpdate on_update, std::vector<bool> runs_head) {
  // Which devices run lm_head: those marked, else the last.
  std::vector<bool> heads(contexts.size(), false);
  const bool marked = std::find(runs_head.begin(), runs_head.end(), true) != runs_head.end();
  for (size_t i = 0; i < contexts.size(); ++i) {
    heads[i] = marked ? i < runs_head.size() && runs_head[i] : i + 1 == contexts.size();
  }
  const size_t head_devices = static_cast<size_t>(std::count(heads.begin(), heads.end(), true));
  std::shared_ptr<WarmupJob> job(new WarmupJob(std::move(plan), options, std::move(on_update),
                                               contexts.size(), head_devices));
  spdlog::info("warmup: tuning {} GEMMs on {} device(s){}{}", job->plan_.size(), contexts.size(),
               options.force ? ", re-tuning those already tuned" : "",
               options.time_budget_seconds > 0
                   ? str_cat(", within ", options.time_budget_seconds, " s")
                   : std::string());
  if (contexts.empty()) {
    job->devices_running_ = 1;
    job->device_finished();
  }
  for (size_t i = 0; i < contexts.size(); ++i) {
    job->threads_.emplace_back(
        [j = job.get(), ctx = contexts[i], head = bool{heads[i]}] { j->run_device(ctx, head); });
  }
  return job;
}

WarmupJob::~WarmupJob() {
  cancel();
  for (std::thread& t : threads_) t.join();
}

void WarmupJob::run_device(TuningContext* context, bool head) {
  const GemmTuningCounters before = context->counters();
  for (size_t i = 0; i < plan_.size(); ++i) {
    const WarmupGemm& g = plan_[i];
    if (!head && is_head_gemm(g)) continue;
    // The next GEMM's candidates are listed in the background while this one is timed (once
    // this one has taken its own listing: a device keeps one listing in flight).
    const GemmSignature* next = nullptr;
    for (size_t j = i + 1; j < plan_.size(); ++j) {
      if (!head && is_head_gemm(plan_[j])) continue;
      next = &plan_[j].signature;
      break;
    }
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    const bool cancelled = cancelled_.load(std::memory_order_acquire);
    const bool over_budget =
        options_.time_budget_seconds > 0 && elapsed >= options_.time_budget_seconds;
    GemmTuneReport report;
    if (cancelled || over_budget) {
      report.device = context->ordinal();
      report.signature = g.signature;
      report.outcome = GemmTuneOutcome::kSkipped;
      report.message = cancelled ? "warmup cancelled"
                                 : str_cat("time budget of ", options_.time_budget_seconds,
                                           " s spent");
      if (over_budget && !cancelled) {
        std::lock_guard<std::mutex> lock(mu_);
        budget_spent_ = true;
      }
    } else {
      report = context->tune(g.signature, options_.force, next);
    }
    report.used_by = g.used_by;
    if (report.outcome == GemmTuneOutcome::kFailed) {
      spdlog::warn("warmup: device {}: {} ({}): {}", report.device, g.signature.key(), g.used_by,
                   report.message);
    }
    record(std::move(report));
  }
  const GemmTuningCounters after = context->counters();
  if (after.shapes_tuned > before.shapes_tuned) {
    spdlog::info("warmup: device {}: {} GEMMs tuned in {:.1f} s: listing candidates {:.1f} s, "
                 "operands {:.1f} s, rough timings {:.1f} s ({} of {} candidates; the rest "
                 "skipped after neighbouring GEMMs), checks and full timings {:.1f} s",
                 context->ordinal(), after.shapes_tuned - before.shapes_tuned,
                 after.tuning_seconds - before.tuning_seconds,
                 after.phases.list - before.phases.list,
                 after.phases.prepare - before.phases.prepare,
                 after.phases.rough - before.phases.rough, after.rough_timed - before.rough_timed,
                 after.candidates - before.candidates, after.phases.final - before.phases.final);
  }
  device_finished();
}

void WarmupJob::record(GemmTuneReport report) {
  WarmupState state;
  size_t done;
  size_t total;
  {
    std::lock_guard<std::mutex> lock(mu_);
    snap_.reports.push_back(std::move(report));
    ++snap_.done;
    ++snap_.sequence;
    state = snap_.state;
    done = snap_.done;
    total = snap_.total;
  }
  changed_.notify_all();
  if (on_update_) on_update_(state, done, total);
}

void WarmupJob::device_finished() {
  WarmupState state;
  size_t done;
  size_t total;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (--devices_running_ > 0) return;
    size_t counts[4] = {0, 0, 0, 0};  // by GemmTuneOutcome
    for (const GemmTuneReport& r : snap_.reports) ++counts[static_cast<int>(r.outcome)];
    const size_t tuned = counts[static_cast<int>(GemmTuneOutcome::kTuned)];
    const size_t cached = counts[static_cast<int>(GemmTuneOutcome::kCached)];
    const size_t failed = counts[static_cast<int>(GemmTuneOutcome::kFailed)];
    const size_t skipped = counts[static_cast<int>(GemmTuneOutcome::kSkipped)];
    if (cancelled_.load(std::memory_order_acquire)) {
      snap_.state = WarmupState::kCancelled;
    } else if (snap_.total > 0 && failed == snap_.total) {
      snap_.state = WarmupState::kFailed;
    } else {
      snap_.state = WarmupState::kDone;
    }
    snap_.message = str_cat(tuned, " tuned, ", cached, " already tuned, ", failed, " failed, ",
                            skipped, " skipped",
                            budget_spent_ ? str_cat(" (time budget of ",
                                                    options_.time_budget_seconds, " s spent)")
                                          : std::string());
    ++snap_.sequence;
    snap_.elapsed_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    state = snap_.state;
    done = snap_.done;
    total = snap_.total;
    spdlog::info("warmup {}: {} in {:.1f} s", warmup_state_name(state), snap_.message,
                 snap_.elapsed_seconds);
  }
  changed_.notify_all();
  if (on_update_) on_update_(state, done, total);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = true;
  }
  changed_.notify_all();
}

WarmupSnapshot WarmupJob::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  WarmupSnapshot s = snap_;
  if (s.state == WarmupState::kRunning) {  // an ended job keeps the time it took
    s.elapsed_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  }
  return s;
}

WarmupSnapshot WarmupJob::wait_for_update(uint64_t seen, std::chrono::milliseconds timeout) const {
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, timeout, [&] {
      return snap_.sequence > seen || snap_.state != WarmupState::kRunning;
    });
  }
  return snapshot();
}

WarmupSnapshot WarmupJob::wait() const {
  {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [&] { return ended_; });
  }
  return snapshot();
}

}  // namespace tessera
