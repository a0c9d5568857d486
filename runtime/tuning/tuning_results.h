// Tuned GEMMs in memory: what the results file holds, and what tuning adds while serving.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <shared_mutex>
#include <string>

#include "runtime/backend/gemm_signature.h"
#include "runtime/backend/tunable_gemm.h"

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

// Ordered by signature: the order a results file is written in.
using TunedEntries = std::map<GemmSignature, TunedSolution>;

// Thread-safe: many readers (GEMM dispatch) and occasional writers (tuning, loading).
//
// version() tells whoever keeps an answer (a backend's solution cache, a recorded decode graph)
// when to ask again. It moves only when an answer handed out by answer() -- a solution, or none
// -- is changed by a later insert or merge: a signature nobody has asked about can be added or
// replaced without it. So a warmup that tunes shapes the engine has not run yet invalidates
// nothing, and one that tunes a shape in use (or re-tunes it to another solution) invalidates
// at once: nothing keeps running an answer that was replaced.
class TuningResults {
 public:
  TuningResults() = default;
  explicit TuningResults(TunedEntries entries) : entries_(std::move(entries)) {}

  // A look that hands nothing out (tuning's "already tuned?"): its caller keeps no answer.
  std::optional<TunedSolution> find(const GemmSignature& sig) const;
  // The entry of `sig` (none: nullopt), as an answer its caller may keep until version() moves:
  // from now on a change of `sig`'s solution moves it.
  std::optional<TunedSolution> answer(const GemmSignature& sig);
  // Adds or replaces one result; moves version() when that changes an answer handed out.
  void insert(const GemmSignature& sig, TunedSolution solution);
  // Adds or replaces every entry of `entries`; moves version() once when any of them changes an
  // answer handed out.
  void merge(const TunedEntries& entries);

  size_t size() const;
  uint64_t version() const;
  TunedEntries snapshot() const;

 private:
  // Stores one result (mu_ held); true when it changes an answer handed out.
  bool store(const GemmSignature& sig, TunedSolution solution);

  mutable std::shared_mutex mu_;
  TunedEntries entries_;
  std::set<GemmSignature> answered_;  // every signature answer() was asked for
  uint64_t version_ = 0;
};

}  // namespace tessera
