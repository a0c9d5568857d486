// Tuned GEMMs in memory: what the results file holds, and what tuning adds while serving.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <shared_mutex>
#include <string>

#include "runtime/tuning/gemm_signature.h"

namespace tessera {

// The chosen algorithm of one GEMM, as the results file writes it.
struct TunedSolution {
  // The backend's name for the algorithm (e.g. "cublaslt_algo_23_tile_..._splitk_4"); taken as
  // written, so a hand-edited value is honoured. "Default" means the library's own heuristic.
  std::string solution;
  // Mean time of one call when it was tuned; PyTorch makes this field optional.
  std::optional<double> avg_ms;

  friend bool operator==(const TunedSolution&, const TunedSolution&) = default;
};

// "solution (avg_ms ms)", for logs and test failures.
inline std::ostream& operator<<(std::ostream& os, const TunedSolution& s) {
  os << s.solution;
  if (s.avg_ms) os << " (" << *s.avg_ms << " ms)";
  return os;
}

// The PyTorch name of the untuned library default, usable as a solution.
inline constexpr std::string_view kDefaultSolution = "Default";

// Ordered by signature: the order a results file is written in.
using TunedEntries = std::map<GemmSignature, TunedSolution>;

// Thread-safe: many readers (GEMM dispatch) and occasional writers (tuning, loading).
class TuningResults {
 public:
  TuningResults() = default;
  explicit TuningResults(TunedEntries entries) : entries_(std::move(entries)) {}

  std::optional<TunedSolution> find(const GemmSignature& sig) const;
  // Adds or replaces one result; bumps version().
  void insert(const GemmSignature& sig, TunedSolution solution);
  // Adds or replaces every entry of `entries`; bumps version() once when any was given.
  void merge(const TunedEntries& entries);

  size_t size() const;
  // Grows with every change: a saver remembers the version it wrote and saves again only when
  // the results have changed since.
  uint64_t version() const;
  // A copy of every entry, and the version it reflects.
  TunedEntries snapshot(uint64_t* version = nullptr) const;

 private:
  mutable std::shared_mutex mu_;
  TunedEntries entries_;
  uint64_t version_ = 0;
};

}  // namespace tessera
