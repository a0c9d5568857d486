// Ctrl-C handling for commands that hold open calls: while an InterruptScope lives, the first
// SIGINT runs its callback (on a watcher thread, never inside the signal handler, so the
// callback may cancel gRPC calls or take locks); a second SIGINT ends the process at once with
// status 130. Outside any scope SIGINT keeps its previous disposition. One scope at a time.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace tessera::cli {

class InterruptScope {
 public:
  explicit InterruptScope(std::function<void()> on_interrupt);
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  // Whether SIGINT arrived during this scope (set before the callback runs).
  bool interrupted() const { return fired_.load(); }

 private:
  void watch();

  std::function<void()> on_interrupt_;
  std::atomic<bool> fired_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread watcher_;
};

}  // namespace tessera::cli
