// The host threads that drive the ranks of a tensor-parallel group concurrently: rank 0 on the
// caller's thread, every other rank on a thread of its own, kept for the runner's life. Each rank
// queues its share of a step on its own device (or, on the CPU, computes it) without waiting for
// the host to finish queueing another rank's, and the collectives between them can only complete
// when every rank reaches them.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace tessera {

class RankThreads {
 public:
  explicit RankThreads(int32_t ranks);
  ~RankThreads();
  RankThreads(const RankThreads&) = delete;
  RankThreads& operator=(const RankThreads&) = delete;

  int32_t size() const { return static_cast<int32_t>(threads_.size()) + 1; }
  // Runs work(r) for every rank r, concurrently; returns once each has returned. One rank runs it
  // on the caller's thread alone.
  void run(absl::FunctionRef<void(int32_t rank)> work);

 private:
  void serve(int32_t rank);

  std::mutex mu_;
  std::condition_variable start_;
  std::condition_variable done_;
  const absl::FunctionRef<void(int32_t)>* work_ = nullptr;  // the current run's, while it lasts
  uint64_t generation_ = 0;  // runs started
  int32_t pending_ = 0;      // ranks of the current run still working
  bool stopping_ = false;
  std::vector<std::thread> threads_;  // ranks 1..
};

}  // namespace tessera
