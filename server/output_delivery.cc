#include "server/output_delivery.h"

#include <utility>

namespace tessera::server {

OutputDelivery::OutputDelivery() : thread_([this] { run(); }) {}

OutputDelivery::~OutputDelivery() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void OutputDelivery::post(std::shared_ptr<Deliverable> target) {
  if (target->queued_.exchange(true, std::memory_order_acq_rel)) return;
  bool was_empty = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    was_empty = queue_.empty();
    queue_.push_back(std::move(target));
  }
  // The thread sleeps only on an empty queue: one wake-up per batch of posts, not per post.
  if (was_empty) cv_.notify_one();
}

void OutputDelivery::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything delivered
    std::shared_ptr<Deliverable> target = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    // Cleared before delivering: an output published while deliver() runs queues it again.
    target->queued_.store(false, std::memory_order_release);
    target->deliver();
    target.reset();  // a call's last reference may go here, outside the lock
    lock.lock();
  }
}

}  // namespace tessera::server
