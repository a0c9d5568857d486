// A double that threads update without locks: its bits live in an std::atomic<uint64_t>;
// additions are a compare-exchange loop on the bit pattern.
#pragma once

#include <atomic>
#include <bit>
#include <cstdint>

namespace tessera::metrics {

class AtomicDouble {
 public:
  explicit AtomicDouble(double value = 0) : bits_(std::bit_cast<uint64_t>(value)) {}

  double load() const { return std::bit_cast<double>(bits_.load(std::memory_order_relaxed)); }
  void store(double value) {
    bits_.store(std::bit_cast<uint64_t>(value), std::memory_order_relaxed);
  }
  void add(double delta) {
    uint64_t expected = bits_.load(std::memory_order_relaxed);
    while (!bits_.compare_exchange_weak(
        expected, std::bit_cast<uint64_t>(std::bit_cast<double>(expected) + delta),
        std::memory_order_relaxed, std::memory_order_relaxed)) {
    }
  }

 private:
  static_assert(std::atomic<uint64_t>::is_always_lock_free,
                "metrics need lock-free 64-bit atomics");
  std::atomic<uint64_t> bits_;
};

}  // namespace tessera::metrics
