#include "runtime/tuning/warmup_plan.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "base/str_cat.h"

namespace tessera {
namespace {

// {pad(n) : 1 <= n <= max}, ascending. `pad` is non-decreasing with pad(n) >= n, so every n in
// [n, pad(n)] pads to pad(n) and the loop visits each value once.
std::vector<int64_t> padded_values(int64_t max, const std::function<int64_t(int64_t)>& pad) {
  std::vector<int64_t> out;
  for (int64_t n = 1; n <= max;) {
    const int64_t p = pad(n);
    out.push_back(p);
    n = p + 1;
  }
  return out;
}

absl::Status check_positive(std::string_view what, int64_t v) {
  if (v < 1) return absl::InvalidArgumentError(str_cat(what, " is ", v, " (must be positive)"));
  return absl::OkStatus();
}

}  // namespace

std::vector<int64_t> layer_token_counts(const TokenBuckets& buckets, const WarmupLimits& limits) {
  std::set<int64_t> counts;
  const int64_t max_decode = std::min(limits.max_batch_tokens, limits.max_logit_rows);
  for (int64_t t :
       padded_values(max_decode, [&](int64_t n) { return decode_bucket(buckets, n); })) {
    counts.insert(t);
  }
  for (int64_t t : padded_values(limits.max_batch_tokens,
                                 [&](int64_t n) { return prefill_padded(buckets, n); })) {
    counts.insert(t);
  }
  return {counts.begin(), counts.end()};
}

std::vector<int64_t> logit_row_counts(const TokenBuckets& buckets, const WarmupLimits& limits) {
  return padded_values(limits.max_logit_rows, [&](int64_t n) { return decode_bucket(buckets, n); });
}

absl::StatusOr<std::vector<WarmupGemm>> plan_warmup_gemms(const GemmModelShape& model,
                                                          const TokenBuckets& buckets,
                                                          const WarmupLimits& limits) {
  const std::pair<std::string_view, int64_t> dims[] = {
      {"hidden", model.hidden},
      {"intermediate", model.intermediate},
      {"num_heads", model.num_heads},
      {"num_kv_heads", model.num_kv_heads},
      {"head_dim", model.head_dim},
      {"vocab", model.vocab},
      {"num_layers", model.num_layers},
      {"max_batch_tokens", limits.max_batch_tokens},
      {"max_logit_rows", limits.max_logit_rows}};
  for (const auto& [what, v] : dims) {
    if (absl::Status s = check_positive(what, v); !s.ok()) {
      return absl::InvalidArgumentError(str_cat("warmup plan: ", s.message()));
    }
  }
  if (absl::Status s = buckets.validate(); !s.ok()) {
    return absl::InvalidArgumentError(str_cat("warmup plan: ", s.message()));
  }

  struct Projection {
    std::string_view name;
    int64_t out_features;
    int64_t in_features;
  };
  const int64_t q_dim = model.num_heads * model.head_dim;
  // In LinearProjection's order (model.kept_layers).
  const Projection layer_projections[kLinearProjections] = {
      {"qkv_proj", (model.num_heads + 2 * model.num_kv_heads) * model.head_dim, model.hidden},
      {"o_proj", model.hidden, q_dim},
      {"gate_up", 2 * model.intermediate, model.hidden},
      {"down", model.hidden, model.intermediate},
  };

  const std::vector<int64_t> layer_counts = layer_token_counts(buckets, limits);
  const std::vector<int64_t> logit_counts = logit_row_counts(buckets, limits);
  std::set<int64_t> all(layer_counts.begin(), layer_counts.end());
  all.insert(logit_counts.begin(), logit_counts.end());
  const std::set<int64_t> layer_set(layer_counts.begin(), layer_counts.end());
  const std::set<int64_t> logit_set(logit_counts.begin(), logit_counts.end());

  std::vector<WarmupGemm> plan;
  std::map<GemmSignature, size_t> index;
  auto add = [&](std::string_view name, const GemmSignature& sig, int64_t tokens, int64_t calls) {
    if (auto it = index.find(sig); it != index.end()) {
      WarmupGemm& g = plan[it->second];
      g.used_by = str_cat(g.used_by, "+", name);
      g.per_step += calls;
      return;
    }
    index.emplace(sig, plan.size());
    plan.push_back(WarmupGemm{sig, std::string(name), tokens, calls});
  };
  for (int64_t tokens : all) {
    if (layer_set.count(tokens) != 0) {
      for (int i = 0; i < kLinearProjections; ++i) {
        const Projection& p = layer_projections[i];
        // FP8 layers' GEMMs, and the compute dtype's where any layer keeps the projection in it.
        const int64_t kept = model.layer_dtype ? model.kept_layers[i] : model.num_layers;
        if (model.layer_dtype && kept < model.num_layers) {
          add(p.name,
              GemmSignature::for_linear(tokens, p.out_features, p.in_features, *model.layer_dtype,
                                        model.dtype, /*rowwise=*/true),
              tokens, model.num_layers - kept);
        }
        if (kept > 0) {
          add(p.name,
              GemmSignature::for_linear(tokens, p.out_features, p.in_features, model.dtype,
                                        model.dtype),
              tokens, kept);
        }
      }
    }
    if (logit_set.count(tokens) != 0) {
      add("lm_head",
          GemmSignature::for_linear(tokens, model.vocab, model.hidden, model.dtype,
                                    GemmDType::kF32),
          tokens, 1);
    }
  }
  return plan;
}

}  // namespace tessera
