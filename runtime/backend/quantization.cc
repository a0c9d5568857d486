#include "runtime/backend/quantization.h"

#include <charconv>

#include "base/str_cat.h"

namespace tessera {

namespace {

constexpr std::array<LinearProjection, kLinearProjections> kProjections = {
    LinearProjection::kQkv, LinearProjection::kO, LinearProjection::kGateUp,
    LinearProjection::kDown};
constexpr uint32_t kAllProjections = (1u << kLinearProjections) - 1;

uint32_t bit(LinearProjection p) { return 1u << static_cast<int>(p); }

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool projection_named(std::string_view name, LinearProjection* out) {
  for (LinearProjection p : kProjections) {
    if (linear_projection_name(p) == name) {
      *out = p;
      return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<std::optional<Quantization>> parse_quantization(std::string_view text) {
  if (text == "auto" || text.empty()) return std::nullopt;
  if (text == "none") return Quantization::kNone;
  if (text == "fp8") return Quantization::kFp8;
  return absl::InvalidArgumentError(
      str_cat("quantization: \"", text, "\" is not a choice: auto, none or fp8"));
}

std::string_view quantization_name(Quantization q) {
  return q == Quantization::kFp8 ? "fp8" : "none";
}

absl::StatusOr<KvCacheDtype> parse_kv_cache_dtype(std::string_view text) {
  if (text == "auto" || text.empty()) return KvCacheDtype::kAuto;
  if (text == "fp8") return KvCacheDtype::kFp8;
  return absl::InvalidArgumentError(
      str_cat("kv_cache_dtype: \"", text, "\" is not a choice: auto or fp8"));
}

std::string_view kv_cache_dtype_name(KvCacheDtype d) {
  return d == KvCacheDtype::kFp8 ? "fp8" : "auto";
}

std::string_view linear_projection_name(LinearProjection p) {
  switch (p) {
    case LinearProjection::kQkv:
      return "qkv";
    case LinearProjection::kO:
      return "o";
    case LinearProjection::kGateUp:
      return "gate_up";
    case LinearProjection::kDown:
      return "down";
  }
  return "?";
}

absl::StatusOr<QuantizationKeep> QuantizationKeep::parse(std::string_view list) {
  QuantizationKeep keep;
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view entry = trimmed(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
    if (entry.empty()) continue;
    auto bad = [&](std::string_view why) {
      return absl::InvalidArgumentError(str_cat(
          "quantization_keep: \"", entry, "\" ", why,
          " (expected qkv, o, gate_up, down, layers.N or layers.N.<one of those>)"));
    };
    Rule rule{-1, 0, std::string(entry)};
    LinearProjection p{};
    if (projection_named(entry, &p)) {
      rule.projections = bit(p);
    } else if (entry.substr(0, 7) == "layers.") {
      const std::string_view rest = entry.substr(7);
      const size_t dot = rest.find('.');
      const std::string_view index = rest.substr(0, dot);
      const auto [end, ec] = std::from_chars(index.data(), index.data() + index.size(), rule.layer);
      if (ec != std::errc() || end != index.data() + index.size() || index.empty() ||
          rule.layer < 0) {
        return bad(str_cat("has no layer index ('", index, "')"));
      }
      if (dot == std::string_view::npos) {
        rule.projections = kAllProjections;
      } else if (projection_named(rest.substr(dot + 1), &p)) {
        rule.projections = bit(p);
      } else {
        return bad(str_cat("names no projection ('", rest.substr(dot + 1), "')"));
      }
    } else {
      return bad("is not a projection or a layer");
    }
    keep.rules_.push_back(std::move(rule));
  }
  return keep;
}

bool QuantizationKeep::keeps(int64_t layer, LinearProjection projection) const {
  for (const Rule& r : rules_) {
    if ((r.layer < 0 || r.layer == layer) && (r.projections & bit(projection)) != 0) return true;
  }
  return false;
}

std::array<int64_t, kLinearProjections> QuantizationKeep::kept_layers(int64_t num_layers) const {
  std::array<int64_t, kLinearProjections> kept{};
  for (int64_t l = 0; l < num_layers; ++l) {
    for (LinearProjection p : kProjections) kept[static_cast<int>(p)] += keeps(l, p) ? 1 : 0;
  }
  return kept;
}

absl::Status QuantizationKeep::check_layers(int64_t num_layers) const {
  for (const Rule& r : rules_) {
    if (r.layer >= num_layers) {
      return absl::InvalidArgumentError(str_cat("quantization_keep: \"", r.entry, "\" names layer ",
                                                r.layer, "; the model has ", num_layers,
                                                " (0 .. ", num_layers - 1, ")"));
    }
  }
  return absl::OkStatus();
}

std::string QuantizationKeep::text() const {
  std::string out;
  for (const Rule& r : rules_) out += (out.empty() ? "" : ",") + r.entry;
  return out;
}

}  // namespace tessera
