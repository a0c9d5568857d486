#include "runtime/tuning/tuning_results.h"

#include <mutex>

namespace tessera {

std::optional<TunedSolution> TuningResults::find(const GemmSignature& sig) const {
  std::shared_lock lock(mu_);
  const auto it = entries_.find(sig);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void TuningResults::insert(const GemmSignature& sig, TunedSolution solution) {
  std::unique_lock lock(mu_);
  entries_.insert_or_assign(sig, std::move(solution));
  ++version_;
}

void TuningResults::merge(const TunedEntries& entries) {
  if (entries.empty()) return;
  std::unique_lock lock(mu_);
  for (const auto& [sig, sol] : entries) entries_.insert_or_assign(sig, sol);
  ++version_;
}

size_t TuningResults::size() const {
  std::shared_lock lock(mu_);
  return entries_.size();
}

uint64_t TuningResults::version() const {
  std::shared_lock lock(mu_);
  return version_;
}

TunedEntries TuningResults::snapshot(uint64_t* version) const {
  std::shared_lock lock(mu_);
  if (version != nullptr) *version = version_;
  return entries_;
}

}  // namespace tessera
