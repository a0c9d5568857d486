#include "runtime/request.h"

namespace tessera {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kEos: return "eos";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

void OutputStream::push(RequestOutput output) {
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(output));
    notify = notify_;
  }
  cv_.notify_one();
  if (notify) notify();
}

RequestOutput OutputStream::next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !queue_.empty(); });
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  return out;
}

std::optional<RequestOutput> OutputStream::try_next() {
  std::lock_guard<std::mutex> lock(mu_);
  if (queue_.empty()) return std::nullopt;
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  return out;
}

void OutputStream::set_notifier(std::function<void()> notify) {
  std::function<void()> ready_notify;  // called outside the lock, as push() does
  {
    std::lock_guard<std::mutex> lock(mu_);
    notify_ = std::move(notify);
    if (!queue_.empty()) ready_notify = notify_;
  }
  if (ready_notify) ready_notify();
}

}  // namespace tessera
