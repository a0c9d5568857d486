// The host threads that drive the ranks of a tensor-parallel group concurrently: rank 0 on the
// caller's thread, every other rank on a thread of its own, kept for the runner's life. Each rank
// queues its share of a step on its own device (or, on the CPU, computes it) without waiting for
// the host to finish queueing another rank's, and the collectives between them can only complete
// when every rank reaches them.
//
// A rank thread that finished its share polls for the next run for `poll_for` before it sleeps.
// Ranks on GPUs are given a poll: their share is queueing a step, done long before the devices
// finish it, and the next run follows the devices; a wake-up through the kernel would start every
// other rank's queueing tens of microseconds after rank 0's, which the step's first collective
// then waits for on every device.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace tessera {

class RankThreads {
 public:
  explicit RankThreads(int32_t ranks, std::chrono::microseconds poll_for = {});
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  int32_t size() const { return static_cast<int32_t>(threads_.size()) + 1; }
  // Runs work(r) for every rank r, concurrently; returns once each has returned. One rank runs it
  // on the caller's thread alone.
  void run(absl::FunctionRef<void(int32_t rank)> work);

 private:
  void serve(int32_t rank);
  // Polls (yielding) until done() or poll_for_ has passed; done() then.
  template <typename Done>
  bool poll(Done done) const;

  const std::chrono::microseconds poll_for_;
  std::mutex mu_;
  std::condition_variable start_;
  std::condition_variable done_;
  const absl::FunctionRef<void(int32_t)>* work_ = nullptr;  // the current run's, while it lasts
  std::atomic<uint64_t> generation_{0};  // runs started; advanced under mu_ after work_ is set
  std::atomic<int32_t> pending_{0};      // ranks of the current run still working
  std::atomic<bool> stopping_{false};    // set under mu_
  std::vector<std::thread> threads_;     // ranks 1..
};

}  // namespace tessera
