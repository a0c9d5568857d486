#include "kernels/op_profiler.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "base/str_cat.h"

namespace tessera::gpu {

OpProfiler::~OpProfiler() {
  for (gpuEvent_t e : pool_) (void)gpuEventDestroy(e);
  if (last_end_ != nullptr) (void)gpuEventDestroy(last_end_);
}

uint32_t OpProfiler::label_id(std::string_view label) {
  auto it = ids_.find(std::string(label));
  if (it != ids_.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(labels_.size());
  labels_.emplace_back(label);
  totals_.emplace_back();
  ids_.emplace(std::string(label), id);
  return id;
}

absl::Status OpProfiler::record(uint32_t id, gpuStream_t stream) {
  if (marks_.size() == pool_.size()) {
    gpuEvent_t e = nullptr;
    GPU_CHECK(gpuEventCreate(&e));
    pool_.push_back(e);
  }
  GPU_CHECK(gpuEventRecord(pool_[marks_.size()], stream));
  marks_.push_back(id);
  return absl::OkStatus();
}

void OpProfiler::mark(std::string_view label, gpuStream_t stream) {
  // A failed record leaves a gap in the profile, never an error in the step.
  (void)record(label_id(label), stream);
}

void OpProfiler::end_step(gpuStream_t stream) {
  // Waits with no op marked since the last (weight loading, a second wait) are not steps.
  if (marks_.empty() || marks_.back() == kStepEnd) return;
  if (record(kStepEnd, stream).ok()) ++steps_;
}

absl::Status OpProfiler::collect() {
  // The marks are spent however this ends (an error would count them again next time).
  struct Spent {
    std::vector<uint32_t>& marks;
    ~Spent() { marks.clear(); }
  } spent{marks_};
  float ms = 0.0f;
  for (size_t i = 0; i < marks_.size(); ++i) {
    if (marks_[i] == kStepEnd) {
      // To the next step's first op, where that is in this batch.
      if (i + 1 < marks_.size() && marks_[i + 1] != kStepEnd) {
        GPU_CHECK(gpuEventElapsedTime(&ms, pool_[i], pool_[i + 1]));
        between_steps_.ms += ms;
        ++between_steps_.calls;
      }
      continue;
    }
    if (i == 0 && has_last_end_) {
      GPU_CHECK(gpuEventElapsedTime(&ms, last_end_, pool_[0]));
      between_steps_.ms += ms;
      ++between_steps_.calls;
    }
    // An op without a mark after it (the stream was waited for without end_step) is not timed.
    if (i + 1 == marks_.size()) break;
    GPU_CHECK(gpuEventElapsedTime(&ms, pool_[i], pool_[i + 1]));
    totals_[marks_[i]].ms += ms;
    ++totals_[marks_[i]].calls;
  }
  has_last_end_ = false;
  if (!marks_.empty() && marks_.back() == kStepEnd) {
    // Keep the last step end's event: the pool's slot is reused, so swap it out.
    std::swap(last_end_, pool_[marks_.size() - 1]);
    if (pool_[marks_.size() - 1] == nullptr) pool_.erase(pool_.begin() + (marks_.size() - 1));
    has_last_end_ = true;
  }
  return absl::OkStatus();
}

std::string OpProfiler::report() const {
  std::vector<std::pair<std::string, Total>> rows;
  double total = between_steps_.ms;
  for (size_t i = 0; i < labels_.size(); ++i) {
    rows.emplace_back(labels_[i], totals_[i]);
    total += totals_[i].ms;
  }
  rows.emplace_back("(between steps: waiting for the host)", between_steps_);
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  const double steps = static_cast<double>(std::max<int64_t>(steps_, 1));
  std::string out = str_cat("device time by op over ", steps_, " steps (",
                            static_cast<int64_t>(total), " ms):\n");
  char line[256];
  std::snprintf(line, sizeof(line), "%-44s %10s %12s %10s %7s\n", "op", "calls", "ms/step",
                "us/call", "share");
  out += line;
  for (const auto& [label, t] : rows) {
    if (t.calls == 0) continue;
    std::snprintf(line, sizeof(line), "%-44s %10lld %12.3f %10.1f %6.1f%%\n", label.c_str(),
                  static_cast<long long>(t.calls), t.ms / steps,
                  1e3 * t.ms / static_cast<double>(t.calls), total > 0 ? 100.0 * t.ms / total : 0.0);
    out += line;
  }
  return out;
}

}  // namespace tessera::gpu
