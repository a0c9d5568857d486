#include "runtime/runner/rank_threads.h"

namespace tessera {

RankThreads::RankThreads(int32_t ranks) {
  for (int32_t r = 1; r < ranks; ++r) threads_.emplace_back([this, r] { serve(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  start_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void RankThreads::run(absl::FunctionRef<void(int32_t)> work) {
  if (threads_.empty()) {
    work(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    work_ = &work;
    pending_ = static_cast<int32_t>(threads_.size());
    ++generation_;
  }
  start_.notify_all();
  work(0);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return pending_ == 0; });
  work_ = nullptr;
}

void RankThreads::serve(int32_t rank) {
  uint64_t seen = 0;
  for (;;) {
    const absl::FunctionRef<void(int32_t)>* work = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      work = work_;
    }
    (*work)(rank);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

}  // namespace tessera
