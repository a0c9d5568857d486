#include "runtime/request/request.h"

#include <iterator>

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
    if (queue_.empty() || queue_.back().finished) {
      queue_.push_back(std::move(output));
    } else {
      RequestOutput& unread = queue_.back();
      unread.token_ids.insert(unread.token_ids.end(), output.token_ids.begin(), output.token_ids.end());
      unread.text += output.text;
      unread.logprobs.insert(unread.logprobs.end(), std::make_move_iterator(output.logprobs.begin()),
                             std::make_move_iterator(output.logprobs.end()));
      if (output.finished) {
        output.token_ids = std::move(unread.token_ids);
        output.text = std::move(unread.text);
        output.logprobs = std::move(unread.logprobs);
        unread = std::move(output);
      }
    }
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
