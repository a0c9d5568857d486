#include "runtime/tuning/tuning_config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>

#include "base/str_cat.h"
#include "base/text_fields.h"

namespace tessera {
namespace {

constexpr std::string_view kTessera = "TESSERA_TUNABLEOP_";
constexpr std::string_view kPytorch = "PYTORCH_TUNABLEOP_";

// One variable's value and its full name, for messages.
struct EnvValue {
  std::string name;
  std::string value;
};

// TESSERA_TUNABLEOP_<suffix> if set (non-empty), else PYTORCH_TUNABLEOP_<suffix> (when
// `with_pytorch`), else nothing.
std::optional<EnvValue> lookup(const GetEnv& getenv, std::string_view suffix,
                               bool with_pytorch = true) {
  for (std::string_view prefix : {kTessera, kPytorch}) {
    if (prefix == kPytorch && !with_pytorch) break;
    std::string name = str_cat(prefix, suffix);
    const char* v = getenv(name.c_str());
    if (v != nullptr && *v != '\0') return EnvValue{std::move(name), v};
  }
  return std::nullopt;
}

absl::Status bad_value(const EnvValue& e, std::string_view allowed) {
  return absl::InvalidArgumentError(
      str_cat("environment variable ", e.name, "='", e.value, "' is invalid: expected ", allowed));
}

absl::StatusOr<bool> parse_bool(const EnvValue& e) {
  std::string v(tuning_text::trim(e.value));
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  if (v == "1" || v == "true") return true;
  if (v == "0" || v == "false") return false;
  return bad_value(e, "0 or 1 (or true/false)");
}

absl::StatusOr<int64_t> parse_int_at_least(const EnvValue& e, int64_t min,
                                           std::string_view allowed) {
  const std::optional<int64_t> v = tuning_text::parse_int(tuning_text::trim(e.value));
  if (!v || *v < min) return bad_value(e, allowed);
  return *v;
}

// Reads an optional boolean variable.
absl::StatusOr<std::optional<bool>> read_bool(const GetEnv& getenv, std::string_view suffix) {
  const std::optional<EnvValue> e = lookup(getenv, suffix);
  if (!e) return std::optional<bool>();
  absl::StatusOr<bool> b = parse_bool(*e);
  if (!b.ok()) return b.status();
  return std::optional<bool>(*b);
}

}  // namespace

std::string_view tuning_mode_name(TuningMode mode) {
  switch (mode) {
    case TuningMode::kOff:
      return "off";
    case TuningMode::kUse:
      return "use";
    case TuningMode::kTune:
      return "tune";
    case TuningMode::kWarmup:
      return "warmup";
  }
  return "unknown";
}

absl::StatusOr<TuningMode> parse_tuning_mode(std::string_view text) {
  for (TuningMode m :
       {TuningMode::kOff, TuningMode::kUse, TuningMode::kTune, TuningMode::kWarmup}) {
    if (tuning_mode_name(m) == text) return m;
  }
  return absl::InvalidArgumentError(
      str_cat("tuning mode '", text, "' is not one of off, use, tune, warmup"));
}

absl::Status TuningConfig::validate() const {
  if (verbose < 0 || verbose > 3) {
    return absl::InvalidArgumentError(str_cat("tuning verbose is ", verbose, " (allowed: 0..3)"));
  }
  if (max_tuning_duration_ms < 0) {
    return absl::InvalidArgumentError(str_cat("max_tuning_duration_ms is ", max_tuning_duration_ms,
                                              " (must be >= 0; 0 = no time limit)"));
  }
  if (max_tuning_iterations < 0) {
    return absl::InvalidArgumentError(str_cat("max_tuning_iterations is ", max_tuning_iterations,
                                              " (must be >= 0; 0 = no iteration limit)"));
  }
  if (max_tuning_duration_ms == 0 && max_tuning_iterations == 0) {
    return absl::InvalidArgumentError(
        "max_tuning_duration_ms and max_tuning_iterations are both 0: tuning a candidate would "
        "never stop; set at least one");
  }
  if (rotating_buffer_size_mb < -1) {
    return absl::InvalidArgumentError(str_cat("rotating_buffer_size_mb is ",
                                              rotating_buffer_size_mb,
                                              " (allowed: -1 = L2 cache size, 0 = off, > 0 MiB)"));
  }
  const std::pair<const char*, const NumericsTolerance*> tols[] = {
      {"bf16", &bf16_tolerance},
      {"f16", &f16_tolerance},
      {"f32", &f32_tolerance},
      {"fp8", &fp8_tolerance}};
  for (const auto& [name, t] : tols) {
    if (!(t->rtol >= 0) || !(t->atol >= 0) || !std::isfinite(t->rtol) || !std::isfinite(t->atol)) {
      return absl::InvalidArgumentError(str_cat(name, " tolerance rtol=", t->rtol,
                                                " atol=", t->atol, " (must be finite and >= 0)"));
    }
  }
  return buckets.validate();
}

const NumericsTolerance& TuningConfig::tolerance(GemmDType input_dtype) const {
  switch (input_dtype) {
    case GemmDType::kBF16:
      return bf16_tolerance;
    case GemmDType::kF16:
      return f16_tolerance;
    case GemmDType::kF32:
      return f32_tolerance;
    case GemmDType::kF8E4M3FN:
    case GemmDType::kF8E4M3FNUZ:
      return fp8_tolerance;
  }
  return f32_tolerance;
}

absl::Status apply_environment(const GetEnv& getenv, TuningConfig* config) {
  // Mode: read all three first so that a bad value is reported even when MODE decides.
  std::optional<TuningMode> mode;
  if (std::optional<EnvValue> e = lookup(getenv, "MODE", /*with_pytorch=*/false)) {
    absl::StatusOr<TuningMode> m = parse_tuning_mode(tuning_text::trim(e->value));
    if (!m.ok()) return bad_value(*e, "off, use, tune or warmup");
    mode = *m;
  }
  absl::StatusOr<std::optional<bool>> enabled = read_bool(getenv, "ENABLED");
  if (!enabled.ok()) return enabled.status();
  absl::StatusOr<std::optional<bool>> tuning = read_bool(getenv, "TUNING");
  if (!tuning.ok()) return tuning.status();

  if (mode) {
    config->mode = *mode;
  } else if (enabled->has_value()) {
    if (!**enabled) {
      config->mode = TuningMode::kOff;
    } else if (tuning->has_value() && !**tuning) {
      config->mode = TuningMode::kUse;
    } else if (config->mode != TuningMode::kWarmup) {
      config->mode = TuningMode::kTune;
    }
  } else if (tuning->has_value() && config->mode != TuningMode::kOff) {
    if (!**tuning) {
      config->mode = TuningMode::kUse;
    } else if (config->mode == TuningMode::kUse) {
      config->mode = TuningMode::kTune;
    }
  }

  if (std::optional<EnvValue> e = lookup(getenv, "FILENAME")) config->filename = e->value;
  if (std::optional<EnvValue> e = lookup(getenv, "VERBOSE")) {
    absl::StatusOr<int64_t> v = parse_int_at_least(*e, 0, "an integer 0..3");
    if (!v.ok()) return v.status();
    if (*v > 3) return bad_value(*e, "an integer 0..3");
    config->verbose = static_cast<int>(*v);
  }
  if (std::optional<EnvValue> e = lookup(getenv, "MAX_TUNING_DURATION_MS")) {
    absl::StatusOr<int64_t> v =
        parse_int_at_least(*e, 0, "milliseconds, an integer >= 0 (0 = no time limit)");
    if (!v.ok()) return v.status();
    config->max_tuning_duration_ms = *v;
  }
  if (std::optional<EnvValue> e = lookup(getenv, "MAX_TUNING_ITERATIONS")) {
    absl::StatusOr<int64_t> v =
        parse_int_at_least(*e, 0, "an integer >= 0 (0 = no iteration limit)");
    if (!v.ok()) return v.status();
    config->max_tuning_iterations = *v;
  }
  if (std::optional<EnvValue> e = lookup(getenv, "ROTATING_BUFFER_SIZE")) {
    absl::StatusOr<int64_t> v =
        parse_int_at_least(*e, std::numeric_limits<int64_t>::min(),
                           "MiB, an integer (negative = L2 cache size, 0 = off)");
    if (!v.ok()) return v.status();
    config->rotating_buffer_size_mb = *v < 0 ? -1 : *v;
  }
  absl::StatusOr<std::optional<bool>> check = read_bool(getenv, "NUMERICAL_CHECK");
  if (!check.ok()) return check.status();
  if (check->has_value()) config->numerical_check = **check;

  if (absl::Status s = config->validate(); !s.ok()) {
    return absl::InvalidArgumentError(
        str_cat("tuning settings after the environment: ", s.message()));
  }
  return absl::OkStatus();
}

std::string results_path_for_device(const TuningConfig& config, TuningDeviceKind kind,
                                    int ordinal) {
  std::string f = config.filename;
  if (f.empty()) f = kind == TuningDeviceKind::kCpu ? kCpuResultsFilename : kGpuResultsFilename;
  const std::string ord = std::to_string(ordinal);
  if (const size_t pct = f.find("%d"); pct != std::string::npos) {
    return f.substr(0, pct) + ord + f.substr(pct + 2);
  }
  const size_t slash = f.rfind('/');
  const size_t base = slash == std::string::npos ? 0 : slash + 1;
  const size_t dot = f.rfind('.');
  // A leading dot (".results") names a hidden file, not an extension.
  if (dot == std::string::npos || dot <= base) return f + ord;
  return f.substr(0, dot) + ord + f.substr(dot);
}

int64_t timed_iterations(const TuningConfig& config, double ms_per_iteration) {
  int64_t n = config.max_tuning_iterations > 0 ? config.max_tuning_iterations
                                               : std::numeric_limits<int64_t>::max();
  if (config.max_tuning_duration_ms > 0 && ms_per_iteration > 0 &&
      std::isfinite(ms_per_iteration)) {
    const double fit = static_cast<double>(config.max_tuning_duration_ms) / ms_per_iteration;
    if (fit < static_cast<double>(n)) n = static_cast<int64_t>(fit);
  }
  if (n == std::numeric_limits<int64_t>::max()) n = 1;  // no usable limit: one iteration
  return std::max<int64_t>(n, 1);
}

}  // namespace tessera
