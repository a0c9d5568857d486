#include "runtime/kv_cache_scales.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/fp8.h"
#include "base/status_macros.h"
#include "base/str_cat.h"

namespace tessera {

namespace {

// Where a checkpoint keeps layer `i`'s KV scales, in order of preference: K's and V's names (the
// same name for both when one scale serves both).
struct ScaleNames {
  std::string k, v;
};

std::vector<ScaleNames> scale_names(int32_t i) {
  const std::string attn = str_cat("model.layers.", i, ".self_attn.");
  return {{attn + "k_scale", attn + "v_scale"},
          {attn + "k_proj.output_scale", attn + "v_proj.output_scale"},
          {attn + "kv_scale", attn + "kv_scale"}};
}

absl::StatusOr<float> read_scale(const WeightSource& weights, const std::string& name) {
  TESSERA_ASSIGN_OR_RETURN(const RawTensor raw, weights.raw(name));
  int64_t count = 1;
  for (const int64_t d : raw.info.shape) count *= d;
  if (count != 1) {
    return absl::InvalidArgumentError(str_cat(weights.path(), ": ", name, ": a KV cache scale is ",
                                              "one value per layer; this one holds ", count));
  }
  float value = 0.0f;
  TESSERA_RETURN_IF_ERROR(weights.read_f32(name, raw.info.shape, std::span<float>(&value, 1)));
  if (!(value > 0.0f) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(str_cat(weights.path(), ": ", name, ": a KV cache scale ",
                                              "must be finite and positive, not ", value));
  }
  return value;
}

}  // namespace

absl::StatusOr<std::optional<std::vector<LayerKvScales>>> read_checkpoint_kv_scales(
    const WeightSource& weights, int32_t num_layers) {
  std::vector<LayerKvScales> scales(static_cast<size_t>(num_layers));
  int32_t found = 0;
  std::string first_missing;
  for (int32_t i = 0; i < num_layers; ++i) {
    bool have = false;
    for (const ScaleNames& names : scale_names(i)) {
      if (!weights.has(names.k) || !weights.has(names.v)) continue;
      TESSERA_ASSIGN_OR_RETURN(scales[i].k, read_scale(weights, names.k));
      TESSERA_ASSIGN_OR_RETURN(scales[i].v, read_scale(weights, names.v));
      have = true;
      break;
    }
    if (have) {
      ++found;
    } else if (first_missing.empty()) {
      first_missing = scale_names(i).front().k;
    }
  }
  if (found == 0) return std::nullopt;
  if (found < num_layers) {
    return absl::InvalidArgumentError(str_cat(
        weights.path(), ": KV cache scales for ", found, " of ", num_layers,
        " layers; missing ", first_missing, " (or its v_scale / output_scale / kv_scale forms)"));
  }
  return scales;
}

absl::StatusOr<std::vector<LayerKvScales>> calibrate_kv_scales(ForwardModel& model, KvCache& cache,
                                                               std::span<const int32_t> tokens) {
  const int32_t block_size = cache.block_size();
  const int32_t len = static_cast<int32_t>(tokens.size());
  if (len == 0) return absl::InvalidArgumentError("kv cache calibration: no tokens");
  BlockTable table;
  if (!table.reserve(len, block_size, cache.allocator())) {
    return absl::ResourceExhaustedError(str_cat(
        "kv cache calibration: ", len, " tokens do not fit the KV cache (",
        cache.allocator().num_free(), " free blocks of ", block_size, " tokens)"));
  }
  const int32_t chunk = std::max(1, model.limits().max_batch_tokens);
  // The prefill (no logits wanted), measuring each layer's largest |k| and |v| before they are
  // quantized.
  auto measure = [&]() -> absl::StatusOr<std::vector<std::pair<float, float>>> {
    TESSERA_RETURN_IF_ERROR(cache.start_calibration());
    absl::Status status;
    for (int32_t first = 0; first < len && status.ok(); first += chunk) {
      const int32_t count = std::min(chunk, len - first);
      status = model.forward(sequence_chunk(table, block_size, tokens, first, count), cache, {});
    }
    absl::StatusOr<std::vector<std::pair<float, float>>> amax = cache.finish_calibration();
    TESSERA_RETURN_IF_ERROR(status);
    return amax;
  };
  const float code_max = fp8_max_finite(Fp8Encoding::kE4M3FN);
  std::vector<LayerKvScales> scales(static_cast<size_t>(cache.shape().num_layers));
  // Twice: the first pass attends over codes of scale 1 (saturated or underflowed where a
  // layer's values are far from 1), which shifts every later layer's inputs; the second runs
  // under the first pass's scales, as serving will.
  absl::Status status;
  for (int pass = 0; pass < 2 && status.ok(); ++pass) {
    absl::StatusOr<std::vector<std::pair<float, float>>> amax = measure();
    if (!amax.ok()) {
      status = amax.status();
      break;
    }
    for (size_t i = 0; i < amax->size() && status.ok(); ++i) {
      const auto [k, v] = (*amax)[i];
      if (!std::isfinite(k) || !std::isfinite(v)) {
        status = absl::InternalError(str_cat("kv cache calibration: layer ", i,
                                             "'s keys or values are not finite (largest |k| ", k,
                                             ", |v| ", v, ")"));
        break;
      }
      // An all-zero layer keeps scale 1: any scale codes zeros exactly.
      scales[i] = LayerKvScales{k > 0.0f ? k * kKvCalibrationHeadroom / code_max : 1.0f,
                                v > 0.0f ? v * kKvCalibrationHeadroom / code_max : 1.0f};
      cache.set_scales(static_cast<int32_t>(i), scales[i].k, scales[i].v);
    }
  }
  table.release(cache.allocator());
  TESSERA_RETURN_IF_ERROR(status);
  return scales;
}

const char kKvCalibrationText[] =
    "The river town wakes slowly in the autumn. Before the light reaches the hills, the baker "
    "has already folded the first batch of dough, and the smell of bread drifts past the "
    "harbour, where two fishermen argue about the weather over mugs of coffee. By seven the "
    "school bus rattles across the old stone bridge, and the children press their faces to the "
    "windows to count the boats.\n\n"
    "Most visitors come for the market on Saturdays. Farmers from the valley bring apples, "
    "pumpkins, honey and cheese, and a man who repairs clocks sets up a table of brass gears "
    "that nobody seems to buy. The librarian runs a stall of second-hand books; she says the "
    "detective novels sell first, then the cookbooks, and the poetry last of all.\n\n"
    "Q: How far is the town from the nearest city?\n"
    "A: About 120 kilometres, or two hours by train. The line opened in 1887 and still runs "
    "four times a day, although the timetable changed in 2019.\n\n"
    "In the evening the council meets in the hall above the post office. Tonight the agenda "
    "lists three items: the budget for repairing the bridge (estimated at 2.4 million), a "
    "proposal to extend the library's opening hours, and a complaint about seagulls. The "
    "debate about the seagulls, as usual, takes the longest.\n\n"
    "def average(values):\n"
    "    return sum(values) / len(values) if values else 0.0\n\n"
    "Later, when the hall is empty, the caretaker switches off the lights one by one, locks "
    "the door, and walks home along the river, listening to the water against the stones.";

}  // namespace tessera
