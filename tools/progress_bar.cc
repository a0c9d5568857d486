#include "tools/progress_bar.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_format.h"

namespace tessera::cli {

std::string progress_bar_text(double fraction, int width) {
  fraction = std::clamp(fraction, 0.0, 1.0);
  const int filled = static_cast<int>(fraction * width + 0.5);
  std::string bar = "[";
  bar.append(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '-');
  bar += ']';
  return bar;
}

std::string progress_line(const RunProgress& p, size_t total_requests, double duration_seconds,
                          int bar_width) {
  const size_t finished = p.succeeded + p.failed;
  double fraction = 0;
  if (total_requests > 0) {
    fraction = static_cast<double>(finished) / static_cast<double>(total_requests);
  } else if (duration_seconds > 0) {
    fraction = p.elapsed_seconds / duration_seconds;
  }
  const std::string bar = progress_bar_text(fraction, bar_width);
  const std::string done = total_requests > 0 ? absl::StrFormat("%zu/%zu", finished, total_requests)
                                              : absl::StrFormat("%zu", finished);
  const double rate = p.elapsed_seconds > 0 ? p.output_tokens / p.elapsed_seconds : 0;
  return absl::StrFormat("%s %s done, %zu running, %zu failed, %.1f s, %.0f out tok/s", bar, done,
                         p.in_flight, p.failed, p.elapsed_seconds, rate);
}

ProgressBar::ProgressBar(std::function<RunProgress()> poll, size_t total_requests,
                         double duration_seconds, bool tty, std::FILE* out)
    : poll_(std::move(poll)),
      total_requests_(total_requests),
      duration_seconds_(duration_seconds),
      tty_(tty),
      out_(out) {
  thread_ = std::thread([this] { loop(); });
}

ProgressBar::~ProgressBar() {
  finish();
}

void ProgressBar::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
  print(/*final=*/true);
}

void ProgressBar::loop() {
  const auto period = tty_ ? std::chrono::milliseconds(200) : std::chrono::seconds(10);
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, period, [this] { return done_; })) print(/*final=*/false);
}

void ProgressBar::print(bool final) {
  const std::string line = progress_line(poll_(), total_requests_, duration_seconds_, 30);
  if (tty_) {
    std::fprintf(out_, "\r%s\033[K%s", line.c_str(), final ? "\n" : "");
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

}  // namespace tessera::cli
