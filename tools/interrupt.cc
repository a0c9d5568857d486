#include "tools/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>

namespace tessera::cli {

namespace {

std::atomic<int> g_interrupts{0};
struct sigaction g_previous;

void on_sigint(int) {
  if (g_interrupts.fetch_add(1) >= 1) _exit(130);
}

}  // namespace

InterruptScope::InterruptScope(std::function<void()> on_interrupt)
    : on_interrupt_(std::move(on_interrupt)) {
  g_interrupts.store(0);
  struct sigaction action = {};
  action.sa_handler = on_sigint;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, &g_previous);
  watcher_ = std::thread([this] { watch(); });
}

InterruptScope::~InterruptScope() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  watcher_.join();
  sigaction(SIGINT, &g_previous, nullptr);
}

void InterruptScope::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!done_) {
    // A signal handler cannot notify a condition variable, hence the short poll.
    cv_.wait_for(lock, std::chrono::milliseconds(20));
    if (!fired_.load() && g_interrupts.load() > 0) {
      fired_.store(true);
      lock.unlock();
      if (on_interrupt_) on_interrupt_();
      lock.lock();
    }
  }
}

}  // namespace tessera::cli
