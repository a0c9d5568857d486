#include "kernels/cpu/in_process_communicator.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "base/str_cat.h"

namespace tessera {
namespace {

// What the ranks of one group share: a barrier and the buffers each rank offers to the others.
class Group {
 public:
  explicit Group(int32_t size) : size_(size), offered_(static_cast<size_t>(size), nullptr) {}

  int32_t size() const { return size_; }
  // Blocks until every rank has arrived. A rank spins (yielding) a little before it sleeps: the
  // ranks of a step arrive within microseconds of each other, and a sleep and wake-up per barrier
  // (three per all-reduce) would cost more than the step's arithmetic on a small model.
  void barrier() {
    const uint64_t phase = phase_.load(std::memory_order_acquire);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (++arrived_ == size_) {
        arrived_ = 0;
        phase_.store(phase + 1, std::memory_order_release);
        all_arrived_.notify_all();
        return;
      }
    }
    for (int spin = 0; spin < kSpins; ++spin) {
      if (phase_.load(std::memory_order_acquire) != phase) return;
      std::this_thread::yield();
    }
    std::unique_lock<std::mutex> lock(mu_);
    all_arrived_.wait(lock, [&] { return phase_.load(std::memory_order_acquire) != phase; });
  }
  // Rank `rank`'s buffer for this op (valid between the barriers around its use).
  void offer(int32_t rank, void* data) { offered_[static_cast<size_t>(rank)] = data; }
  void* offered(int32_t rank) const { return offered_[static_cast<size_t>(rank)]; }

 private:
  const int32_t size_;
  std::mutex mu_;
  std::condition_variable all_arrived_;
  static constexpr int kSpins = 2000;
  int32_t arrived_ = 0;              // guarded by mu_
  std::atomic<uint64_t> phase_{0};   // barriers completed; written under mu_
  std::vector<void*> offered_;  // written by each rank before a barrier, read after it
};

class InProcessCommunicator final : public Communicator {
 public:
  InProcessCommunicator(std::shared_ptr<Group> group, int32_t rank)
      : group_(std::move(group)), rank_(rank) {}

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return group_->size(); }
  std::string describe() const override { return "in-process"; }

  void all_reduce_sum(const Tensor& x) override {
    const bool ok = check(x, "all_reduce_sum", "x");
    // Every rank takes part in every barrier, even one whose tensor was refused: the group's
    // tensors have the same shapes, so all refuse alike, and none waits for ever.
    group_->offer(rank_, ok ? x.data : nullptr);
    group_->barrier();
    const int64_t n = x.numel();
    const int32_t size = group_->size();
    const int64_t begin = n * rank_ / size, end = n * (rank_ + 1) / size;
    if (ok) {
      // This rank's share of the elements, summed in rank order...
      sums_.assign(static_cast<size_t>(end - begin), 0.0f);
      for (int32_t r = 0; r < size; ++r) {
        const float* in = static_cast<const float*>(group_->offered(r));
        if (in == nullptr) continue;
        for (int64_t i = begin; i < end; ++i) sums_[static_cast<size_t>(i - begin)] += in[i];
      }
    }
    group_->barrier();  // every rank has read every buffer
    if (ok) {
      // ... written to every rank's.
      for (int32_t r = 0; r < size; ++r) {
        float* out = static_cast<float*>(group_->offered(r));
        if (out != nullptr) std::copy(sums_.begin(), sums_.end(), out + begin);
      }
    }
    group_->barrier();  // every share is written
  }

  // The CPU's add_rms_norm is the backend's: the caller runs it after all_reduce_sum.
  bool all_reduce_add_rms_norm(const Tensor&, const Tensor&, const Tensor&, NormSpec,
                               const Tensor&) override {
    return false;
  }

  void gather_columns(const Tensor& part, const Tensor& full) override {
    const bool ok = check(part, "gather_columns", "part") &&
                    (rank_ != 0 || (check(full, "gather_columns", "full") && fits(part, full)));
    group_->offer(rank_, ok ? part.data : nullptr);
    group_->barrier();
    if (ok && rank_ == 0) {
      const int64_t rows = part.dim(0), cols = part.dim(1), full_cols = full.dim(1);
      for (int32_t r = 0; r < group_->size(); ++r) {
        const float* in = static_cast<const float*>(group_->offered(r));
        const int64_t first = r * cols;
        const int64_t count = std::clamp<int64_t>(full_cols - first, 0, cols);
        if (in == nullptr || count == 0) continue;
        for (int64_t row = 0; row < rows; ++row) {
          std::memcpy(full.as<float>() + row * full_cols + first, in + row * cols,
                      static_cast<size_t>(count) * sizeof(float));
        }
      }
    }
    group_->barrier();  // rank 0 has read every part
  }

  absl::Status take_error() override {
    absl::Status s = std::move(error_);
    error_ = absl::OkStatus();
    return s;
  }

 private:
  bool check(const Tensor& t, const char* op, const char* what) {
    if (t.dtype == DType::kF32 && t.data != nullptr) return true;
    if (error_.ok()) {
      error_ = absl::InvalidArgumentError(str_cat("in-process communicator, rank ", rank_, ": ", op,
                                                  " takes fp32 tensors; ", what, " is ",
                                                  t.data == nullptr ? "empty" : dtype_name(t.dtype)));
    }
    return false;
  }

  // Rank 0's `full` holds the gathered parts: [rows, <= parts' columns], as the GPU's checks.
  bool fits(const Tensor& part, const Tensor& full) {
    if (part.rank == 2 && full.rank == 2 && full.dim(0) == part.dim(0) &&
        full.dim(1) <= part.dim(1) * group_->size()) {
      return true;
    }
    if (error_.ok()) {
      error_ = absl::InvalidArgumentError(str_cat(
          "in-process communicator, rank 0: gather_columns: full must be [", part.dim(0), ", <= ",
          part.dim(1) * group_->size(), "] for parts of ", part.dim(0), " x ", part.dim(1), ", is ",
          full.rank == 2 ? str_cat("[", full.dim(0), ", ", full.dim(1), "]")
                         : str_cat("of rank ", full.rank)));
    }
    return false;
  }

  std::shared_ptr<Group> group_;
  int32_t rank_;
  std::vector<float> sums_;  // this rank's share of an all-reduce
  absl::Status error_;
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> make_in_process_communicators(int32_t size) {
  auto group = std::make_shared<Group>(size);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int32_t r = 0; r < size; ++r) out.push_back(std::make_unique<InProcessCommunicator>(group, r));
  return out;
}

}  // namespace tessera
