// Test doubles for the engine: a byte-level tokenizer with one <eos> control token, and a model
// that does no neural work but really uses the paged KV cache. It writes each token id into its
// slot and predicts the next token from the ids it reads back through the sequence's block
// table, so wrong slots, stale blocks or a broken recompute after preemption change the output.
// Optionally its logits spread over the whole vocabulary (so that sampling is really random), and
// it samples "on its device" with a CpuBackend's sample op (so that the engine's device path runs).
#pragma once

#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <thread>

#include "kernels/cpu/cpu_backend.h"
#include "runtime/kv_cache/kv_cache.h"
#include "runtime/runner/forward_model.h"
#include "base/splitmix64.h"
#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/tokenizer.h"

namespace tessera::testing {

inline constexpr int32_t kFakeVocab = 257;  // 256 byte tokens + <eos>
inline constexpr int32_t kFakeEos = 256;

inline std::unique_ptr<Tokenizer> make_byte_tokenizer() {
  Vocab v;
  v.pre = "gpt2";
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(byte_level_encode(std::string(1, static_cast<char>(b))));
    v.types.push_back(TokenType::kNormal);
  }
  v.tokens.push_back("<eos>");
  v.types.push_back(TokenType::kControl);
  v.eos_id = kFakeEos;
  v.stop_ids = {kFakeEos};
  return *Tokenizer::create(std::move(v));
}

// Next token of a context: a hash of every token id in it, mapped to printable ASCII, except
// that a context whose hash hits `eos_modulus` ends (when eos_modulus > 0).
class FakeModel final : public ForwardModel {
 public:
  explicit FakeModel(ForwardLimits limits, int eos_modulus = 0, std::chrono::microseconds delay = {})
      : limits_(limits), eos_modulus_(eos_modulus), delay_(delay) {}

  int64_t vocab_size() const override { return kFakeVocab; }
  const ForwardLimits& limits() const override { return limits_; }

  static uint64_t context_hash(const std::vector<int32_t>& context) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t t : context) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
    return h;
  }

  static int32_t next_token(const std::vector<int32_t>& context, int eos_modulus) {
    const uint64_t h = context_hash(context);
    if (eos_modulus > 0 && h % eos_modulus == 0) return kFakeEos;
    return 'a' + static_cast<int32_t>(h % 26);
  }

  absl::Status forward(const StepBatch& batch, const KvCache& cache,
                       std::span<float> logits) override {
    ++steps;
    if (takes_overlapped_work) {
      // As a device model does, once the step is "queued": the caller's host work runs now.
      if (std::function<void()> work = take_overlapped_work()) work();
    }
    if (on_forward) on_forward();
    max_tokens_seen = std::max(max_tokens_seen, batch.num_tokens());
    if (delay_.count() > 0) std::this_thread::sleep_for(delay_);
    tokens_run += batch.num_tokens();
    float* k = cache.layer(0).k.as<float>();  // [blocks, block_size, 1, 1]
    const int32_t bs = cache.block_size();
    for (int32_t t = 0; t < batch.num_tokens(); ++t) {
      // A block is registered in the prefix cache only once its K/V are complete: no step may
      // write into it after that.
      writes_into_cached_blocks += cache.allocator().prefix_cache().holds(batch.slot_mapping[t] / bs);
      k[batch.slot_mapping[t]] = static_cast<float>(batch.token_ids[t]);
    }
    std::fill(logits.begin(), logits.end(), 0.0f);
    size_t row = 0;
    for (int32_t s = 0; s < batch.num_seqs(); ++s) {
      const int32_t last = batch.query_start[s + 1] - 1;
      if (row < batch.logits_rows.size() && batch.logits_rows[row] == last) {
        std::vector<int32_t> context;
        for (int32_t pos = 0; pos < batch.context_len[s]; ++pos) {
          const int32_t block = batch.block_tables[s * batch.max_blocks + pos / bs];
          context.push_back(static_cast<int32_t>(k[block * bs + pos % bs]));
        }
        const uint64_t h = context_hash(context);
        float* row_logits = logits.data() + row * kFakeVocab;
        if (spread_logits) {
          // Every token gets a logit in [0, 4) from the context: many are plausible.
          for (int32_t t = 0; t < kFakeVocab; ++t) {
            row_logits[t] = static_cast<float>(splitmix64(h + t) >> 54) / 256.0f;
          }
        }
        // One hot, or (spread) the likeliest of many.
        row_logits[next_token(context, eos_modulus_)] = spread_logits ? 6.0f : 10.0f;
        if (non_finite_logits) {
          row_logits[next_token(context, eos_modulus_)] = std::numeric_limits<float>::infinity();
          row_logits[0] = std::numeric_limits<float>::quiet_NaN();
        }
        ++row;
      }
    }
    return absl::OkStatus();
  }

  bool can_sample_on_device() const override { return device_sampling; }
  bool overlaps_host_work() const override { return takes_overlapped_work; }

  absl::Status forward_sampled(const StepBatch& batch, const KvCache& cache,
                               std::span<const SamplingRow> rows,
                               std::span<int32_t> tokens) override {
    ++sampled_steps;
    const int64_t n = static_cast<int64_t>(batch.logits_rows.size());
    device_logits_.resize(n * kFakeVocab);
    if (absl::Status s = forward(batch, cache, device_logits_); !s.ok()) return s;
    device_.sample(Tensor(device_logits_.data(), DType::kF32, {n, kFakeVocab}), rows,
                   Tensor(tokens.data(), DType::kI32, {n}));
    if (broken_device_token) std::fill(tokens.begin(), tokens.end(), *broken_device_token);
    return absl::OkStatus();
  }

  // The step's delay, as a device's would show: the host sleeps it out waiting.
  double last_device_wait_seconds() const override {
    return std::chrono::duration<double>(delay_).count();
  }

  bool spread_logits = false;   // logits over the whole vocabulary, not one hot
  bool device_sampling = false;  // offer forward_sampled to the engine
  std::optional<int32_t> broken_device_token;  // forward_sampled answers this id for every row
  bool non_finite_logits = false;  // every sampled row's logits hold a NaN and an inf
  // Run the caller's overlapped work inside forward(), as a device model does (else the
  // executor runs it before the call).
  bool takes_overlapped_work = false;
  std::function<void()> on_forward;  // called in each forward(), after the overlapped work
  int steps = 0;
  int sampled_steps = 0;  // steps that went through forward_sampled
  int64_t tokens_run = 0;  // tokens of every step's batch
  int writes_into_cached_blocks = 0;  // K/V written into a block the prefix cache holds
  int32_t max_tokens_seen = 0;

 private:
  ForwardLimits limits_;
  int eos_modulus_;
  std::chrono::microseconds delay_;
  CpuBackend device_{1};              // the fake "device": its sample op
  std::vector<float> device_logits_;  // [logit rows, vocab] that never reach the engine
};

inline KvCacheShape fake_cache_shape(int32_t num_blocks, int32_t block_size) {
  return KvCacheShape{1, num_blocks, block_size, 1, 1};
}

}  // namespace tessera::testing
