#include "runtime/runner/rank_threads.h"

namespace tessera {

RankThreads::RankThreads(int32_t ranks, std::chrono::microseconds poll_for) : poll_for_(poll_for) {
  for (int32_t r = 1; r < ranks; ++r) threads_.emplace_back([this, r] { serve(r); });
}

RankThreads::~RankThreads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_.store(true, std::memory_order_release);
  }
  start_.notify_all();
  for (std::thread& t : threads_) t.join();
}

template <typename Done>
bool RankThreads::poll(Done done) const {
  if (poll_for_.count() <= 0) return done();
  const auto deadline = std::chrono::steady_clock::now() + poll_for_;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::yield();
  }
  return true;
}

void RankThreads::run(absl::FunctionRef<void(int32_t)> work) {
  if (threads_.empty()) {
    work(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    work_ = &work;
    pending_.store(static_cast<int32_t>(threads_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_.notify_all();
  work(0);
  auto all_done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!poll(all_done)) {
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, all_done);
  }
  work_ = nullptr;
}

void RankThreads::serve(int32_t rank) {
  uint64_t seen = 0;
  for (;;) {
    auto started = [&] {
      return stopping_.load(std::memory_order_acquire) ||
             generation_.load(std::memory_order_acquire) != seen;
    };
    if (!poll(started)) {
      std::unique_lock<std::mutex> lock(mu_);
      start_.wait(lock, started);
    }
    if (stopping_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    (*work_)(rank);  // set before the generation advanced
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      done_.notify_one();
    }
  }
}

}  // namespace tessera
