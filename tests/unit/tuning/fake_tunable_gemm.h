// A TunableGemm whose candidates behave as scripted: an output offset (a wrong algorithm), a
// fixed time per call, or a failure. Counts what the tuner asked of it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/backend/tunable_gemm.h"

namespace tessera::testing {

struct FakeCandidate {
  std::string name;
  double ms = 1.0;       // per call
  float offset = 0.0f;   // added to every output element
  bool fails = false;    // run() and time_ms() fail
};

class FakeTunableGemm final : public TunableGemm {
 public:
  explicit FakeTunableGemm(std::vector<FakeCandidate> candidates,
                           std::vector<std::pair<std::string, std::string>> validators = {
                               {"TESSERA_VERSION", "test"}, {"DEVICE_NAME", "fake"}})
      : candidates_(std::move(candidates)), validators_(std::move(validators)) {}

  std::vector<std::pair<std::string, std::string>> validators() const override {
    return validators_;
  }
  absl::StatusOr<std::vector<std::string>> candidates(const GemmSignature& sig) override {
    // A prefetched listing is taken by the candidates() of its signature, as a GPU's is; another
    // prefetch before that replaces it (one listing in flight).
    if (prefetched_ == sig) ++prefetch_hits;
    prefetched_.reset();
    std::vector<std::string> out;
    for (const FakeCandidate& c : candidates_) out.push_back(c.name);
    return out;
  }
  size_t operand_bytes(const GemmSignature&) const override { return operand_bytes_; }
  size_t cache_bytes() const override { return cache_bytes_; }
  absl::Status prepare(const GemmSignature& sig, int copies) override {
    ++prepares;
    copies_prepared = copies;
    size_ = static_cast<size_t>(sig.m * sig.n);
    outputs_.assign(static_cast<size_t>(copies), std::vector<float>(size_, 0.0f));
    return absl::OkStatus();
  }
  absl::Status run(std::string_view solution, int copy) override {
    const FakeCandidate* c = find(solution);
    if (c == nullptr || c->fails) return absl::InternalError("scripted failure");
    for (size_t i = 0; i < size_; ++i) outputs_[copy][i] = static_cast<float>(i % 7) + c->offset;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<float>> output(int copy) override { return outputs_[copy]; }
  absl::StatusOr<double> time_ms(std::string_view solution, int64_t iterations) override {
    const FakeCandidate* c = find(solution);
    if (c == nullptr || c->fails) return absl::InternalError("scripted failure");
    timed[std::string(solution)].push_back(iterations);
    return c->ms;
  }
  void release() override {
    ++releases;
    outputs_.clear();
  }
  void prefetch_candidates(const GemmSignature& sig) override {
    ++prefetches;
    prefetched_ = sig;
  }

  size_t operand_bytes_ = 1 << 20;
  size_t cache_bytes_ = 8 << 20;
  int prepares = 0;
  int releases = 0;
  int copies_prepared = 0;
  int prefetches = 0;     // prefetch_candidates() calls
  int prefetch_hits = 0;  // candidates() calls that found their signature prefetched
  std::map<std::string, std::vector<int64_t>> timed;  // iterations asked, per candidate

 private:
  const FakeCandidate* find(std::string_view name) const {
    for (const FakeCandidate& c : candidates_) {
      if (c.name == name) return &c;
    }
    return nullptr;
  }

  std::vector<FakeCandidate> candidates_;
  std::vector<std::pair<std::string, std::string>> validators_;
  size_t size_ = 0;
  std::vector<std::vector<float>> outputs_;
  std::optional<GemmSignature> prefetched_;
};

}  // namespace tessera::testing
