#include "runtime/tuning/tuning_results.h"

#include <mutex>

namespace tessera {

std::optional<TunedSolution> TuningResults::find(const GemmSignature& sig) const {
  std::shared_lock lock(mu_);
  const auto it = entries_.find(sig);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

std::optional<TunedSolution> TuningResults::answer(const GemmSignature& sig) {
  // Exclusive: marking the signature and reading its entry must not interleave with a store, or
  // a change could land between them unseen.
  std::unique_lock lock(mu_);
  answered_.insert(sig);
  const auto it = entries_.find(sig);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

bool TuningResults::store(const GemmSignature& sig, TunedSolution solution) {
  const auto it = entries_.find(sig);
  // Only the solution decides what runs: a new time alone changes no answer.
  const bool changed = it == entries_.end() || it->second.solution != solution.solution;
  entries_.insert_or_assign(sig, std::move(solution));
  return changed && answered_.count(sig) != 0;
}

void TuningResults::insert(const GemmSignature& sig, TunedSolution solution) {
  std::unique_lock lock(mu_);
  if (store(sig, std::move(solution))) ++version_;
}

void TuningResults::merge(const TunedEntries& entries) {
  std::unique_lock lock(mu_);
  bool moved = false;
  for (const auto& [sig, sol] : entries) moved = store(sig, sol) || moved;
  if (moved) ++version_;
}

size_t TuningResults::size() const {
  std::shared_lock lock(mu_);
  return entries_.size();
}

uint64_t TuningResults::version() const {
  std::shared_lock lock(mu_);
  return version_;
}

TunedEntries TuningResults::snapshot() const {
  std::shared_lock lock(mu_);
  return entries_;
}

}  // namespace tessera
