#include "server/output_delivery.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace tessera::server {
namespace {

// Counts its deliveries and where they ran; `gate` (when set) holds the first delivery until
// released, so that posts can pile up behind it.
struct Counter final : Deliverable {
  void deliver() override {
    {
      std::unique_lock<std::mutex> lock(mu);
      threads.push_back(std::this_thread::get_id());
      ++delivered;
      cv.notify_all();
      if (gate) cv.wait(lock, [this] { return released; });
    }
    if (on_deliver) on_deliver();
  }
  void wait_for(int n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return delivered >= n; });
  }
  void release() {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
    cv.notify_all();
  }
  int count() {
    std::lock_guard<std::mutex> lock(mu);
    return delivered;
  }

  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::thread::id> threads;
  int delivered = 0;
  bool gate = false, released = false;
  std::function<void()> on_deliver;
};

TEST(OutputDelivery, DeliversOnItsOwnThread) {
  OutputDelivery delivery;
  auto a = std::make_shared<Counter>(), b = std::make_shared<Counter>();
  delivery.post(a);
  delivery.post(b);
  a->wait_for(1);
  b->wait_for(1);
  EXPECT_NE(a->threads[0], std::this_thread::get_id());
  EXPECT_EQ(a->threads[0], b->threads[0]);
}

TEST(OutputDelivery, PostsWhileQueuedCoalesceAndAPostDuringDeliveryQueuesAgain) {
  OutputDelivery delivery;
  auto blocker = std::make_shared<Counter>();
  blocker->gate = true;
  auto target = std::make_shared<Counter>();
  delivery.post(blocker);
  blocker->wait_for(1);  // the thread is held inside the blocker
  for (int i = 0; i < 100; ++i) delivery.post(target);
  blocker->release();
  target->wait_for(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(target->count(), 1);  // 100 posts behind the blocker: one delivery

  // An output published while the call's pump runs must not be lost: it queues the call again.
  auto again = std::make_shared<Counter>();
  std::atomic<int> reposts{1};
  again->on_deliver = [&] {
    if (reposts.fetch_sub(1) > 0) delivery.post(again);
  };
  delivery.post(again);
  again->wait_for(2);
  EXPECT_EQ(again->count(), 2);
}

TEST(OutputDelivery, DestructionDeliversWhatIsQueued) {
  auto blocker = std::make_shared<Counter>();
  blocker->gate = true;
  std::vector<std::shared_ptr<Counter>> queued(5);
  std::thread releaser;
  {
    OutputDelivery delivery;
    delivery.post(blocker);
    blocker->wait_for(1);
    for (auto& q : queued) {
      q = std::make_shared<Counter>();
      delivery.post(q);
    }
    releaser = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      blocker->release();
    });
  }  // joins after delivering the five
  releaser.join();
  for (auto& q : queued) EXPECT_EQ(q->count(), 1);
}

}  // namespace
}  // namespace tessera::server
