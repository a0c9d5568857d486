// The engine's own host time per step (scheduling, batch building, sampling, detokenizing,
// emitting) with N running sequences, on a model that does no work: it only fills logits.
// Prints a table and writes JSON.
//
//   bench_engine_step [--json FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/engine.h"
#include "tests/unit/runtime/fake_model.h"

namespace tessera {
namespace {

// Logits with a different argmax per row, so sampling does real work; no KV reads or writes.
// The engine reuses its logits buffer, so only the entries set last step are cleared: the
// model's own cost stays near zero and the figure is the engine's.
class NullModel final : public ForwardModel {
 public:
  NullModel(int64_t vocab, ForwardLimits limits) : vocab_(vocab), limits_(limits) {}
  int64_t vocab_size() const override { return vocab_; }
  const ForwardLimits& limits() const override { return limits_; }
  absl::Status forward(const StepBatch& batch, const KvCache&, std::span<float> logits) override {
    if (first_) std::fill(logits.begin(), logits.end(), 0.0f);
    first_ = false;
    for (size_t r = 0; r < batch.logits_rows.size(); ++r) {
      float* row = logits.data() + r * vocab_;
      for (int c = 'a'; c <= 'z'; ++c) row[c] = 0.0f;
      row['a' + batch.positions[batch.logits_rows[r]] % 26] = 1.0f;
    }
    return absl::OkStatus();
  }

 private:
  bool first_ = true;
  int64_t vocab_;
  ForwardLimits limits_;
};

struct Result {
  int32_t seqs;
  int64_t vocab;
  double p50_ms, p90_ms, mean_ms;
};

Result measure(int32_t seqs, int64_t vocab, const Tokenizer& tokenizer) {
  CpuBackend backend(1);
  NullModel model(vocab, ForwardLimits{4096, seqs});
  auto cache = *KvCache::create(backend, KvCacheShape{1, seqs * 64, 16, 1, 1});
  EngineConfig config;
  config.max_num_seqs = seqs;
  config.max_queue = seqs;
  Engine engine(model, *cache, tokenizer, config);
  std::vector<RequestHandle> handles;
  for (int32_t i = 0; i < seqs; ++i) {
    auto r = std::make_shared<Request>();
    r->prompt = {'a', 'b', 'c', static_cast<int32_t>('a' + i % 26)};
    r->sampling.temperature = 0;
    r->stop.max_tokens = 1000;
    r->stop.ignore_eos = true;
    handles.push_back(*engine.submit(r));
  }
  engine.step();  // prefill all: not a decode step
  std::vector<double> ms;
  for (int i = 0; i < 200; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    engine.step();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    for (auto& h : handles) while (h.stream->try_next()) {}
  }
  engine.shutdown(absl::CancelledError("bench done"));
  std::sort(ms.begin(), ms.end());
  double sum = 0;
  for (double v : ms) sum += v;
  return {seqs, vocab, ms[ms.size() / 2], ms[ms.size() * 9 / 10], sum / ms.size()};
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  using namespace tessera;
  std::string json_path;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--json") == 0) json_path = argv[i + 1];
  auto tokenizer = testing::make_byte_tokenizer();
  nlohmann::json rows = nlohmann::json::array();
  std::printf("%6s %8s %10s %10s %10s\n", "seqs", "vocab", "p50 ms", "p90 ms", "mean ms");
  for (int64_t vocab : {int64_t{257}, int64_t{49152}}) {
    for (int32_t seqs : {1, 64, 256}) {
      const Result r = measure(seqs, vocab, *tokenizer);
      std::printf("%6d %8ld %10.3f %10.3f %10.3f\n", r.seqs, static_cast<long>(r.vocab), r.p50_ms,
                  r.p90_ms, r.mean_ms);
      rows.push_back({{"seqs", r.seqs}, {"vocab", r.vocab}, {"p50_ms", r.p50_ms},
                      {"p90_ms", r.p90_ms}, {"mean_ms", r.mean_ms}});
    }
  }
  if (!json_path.empty()) std::ofstream(json_path) << rows.dump(2) << "\n";
  return 0;
}
