// A running benchmark's progress on stderr: on a terminal, a bar redrawn in place five times a
// second; otherwise (a log, a CI job) one line every ten seconds. A thread of its own polls the
// runner, so the load generator never waits on the terminal.
#pragma once

#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "tools/bench_runner.h"

namespace tessera::cli {

// "[########------------]": `fraction` (clamped to [0, 1]) of `width` cells filled.
std::string progress_bar_text(double fraction, int width);

// "[########------------]  40/100 done, 8 running, 0 failed, 12.3 s, 1034 out tok/s".
// The bar counts finished requests out of `total_requests`, or, when that is 0, elapsed time
// out of `duration_seconds`.
std::string progress_line(const RunProgress& p, size_t total_requests, double duration_seconds,
                          int bar_width);

class ProgressBar {
 public:
  ProgressBar(std::function<RunProgress()> poll, size_t total_requests, double duration_seconds,
              bool tty, std::FILE* out = stderr);
  ~ProgressBar();  // finish()es
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Stops the thread and prints the final state once.
  void finish();

 private:
  void loop();
  void print(bool final);

  std::function<RunProgress()> poll_;
  const size_t total_requests_;
  const double duration_seconds_;
  const bool tty_;
  std::FILE* out_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace tessera::cli
