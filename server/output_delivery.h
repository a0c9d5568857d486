// Runs the gRPC calls' output pumps on a thread of their own instead of the engine's. An engine
// step publishes one output per running sequence; turning each into a chunk (proto, serializing,
// StartWrite into gRPC's transport) took ~15 us, ~3.6 ms of a 21 ms step at 256 streams on an
// H100, during which the device sat idle. Here the engine thread only queues the call: the pump
// runs beside the device's next step.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace tessera::server {

// What is delivered: one call's pump. `queued` coalesces: an output arriving while the call is
// already queued adds nothing (the pump reads everything the stream holds).
class Deliverable {
 public:
  virtual ~Deliverable() = default;
  virtual void deliver() = 0;

 private:
  friend class OutputDelivery;
  std::atomic<bool> queued_{false};
};

class OutputDelivery {
 public:
  OutputDelivery();
  // Delivers what is still queued, then joins the thread. Whoever posts must be gone or stopped
  // by then (the daemon shuts the engine down and the gRPC server first).
  ~OutputDelivery();
  OutputDelivery(const OutputDelivery&) = delete;
  OutputDelivery& operator=(const OutputDelivery&) = delete;

  // Queues `target` unless it is queued already; its deliver() runs on the delivery thread, after
  // every target queued before it. Cheap and non-blocking beyond a short lock: safe from the
  // engine thread.
  void post(std::shared_ptr<Deliverable> target);

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Deliverable>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tessera::server
