#include "runtime/backend/gemm_signature.h"

#include <optional>
#include <utility>
#include <vector>

#include "base/str_cat.h"
#include "base/text_fields.h"

namespace tessera {
namespace {

constexpr std::string_view kOpPrefix = "GemmTunableOp_";
constexpr std::string_view kScaledOpPrefix = "ScaledGemmTunableOp_";
constexpr std::string_view kF32OutSuffix = "_F32out";
// What PyTorch's scaled params add: per-tensor (rw_0) or row-wise (rw_1) scales, no bias vector.
constexpr std::string_view kScaledParamsSuffix = "_rw_0_bias_None";
constexpr std::string_view kRowwiseParamsSuffix = "_rw_1_bias_None";

constexpr GemmDType kAllDTypes[] = {GemmDType::kBF16, GemmDType::kF16, GemmDType::kF32,
                                    GemmDType::kF8E4M3FN, GemmDType::kF8E4M3FNUZ};

std::optional<GemmDType> dtype_from_name(std::string_view name) {
  for (GemmDType t : kAllDTypes) {
    if (gemm_dtype_name(t) == name) return t;
  }
  return std::nullopt;
}

// The type whose name followed by '_' starts `*rest` (names contain '_' themselves: the longest
// match wins), consuming both.
std::optional<GemmDType> take_dtype(std::string_view* rest) {
  std::optional<GemmDType> found;
  size_t used = 0;
  for (GemmDType t : kAllDTypes) {
    const std::string_view name = gemm_dtype_name(t);
    if (rest->size() > name.size() && rest->substr(0, name.size()) == name &&
        (*rest)[name.size()] == '_' && name.size() + 1 > used) {
      found = t;
      used = name.size() + 1;
    }
  }
  if (found) rest->remove_prefix(used);
  return found;
}

// Parses two transpose letters, upper case ("TN", op names) or lower case ("tn", params).
std::optional<std::pair<bool, bool>> parse_transposes(std::string_view s, bool upper) {
  if (s.size() != 2) return std::nullopt;
  const char t = upper ? 'T' : 't';
  const char n = upper ? 'N' : 'n';
  bool trans[2];
  for (int i = 0; i < 2; ++i) {
    if (s[i] != t && s[i] != n) return std::nullopt;
    trans[i] = s[i] == t;
  }
  return std::make_pair(trans[0], trans[1]);
}

}  // namespace

GemmDType gemm_dtype_of(DType compute) {
  switch (compute) {
    case DType::kBF16:
      return GemmDType::kBF16;
    case DType::kF16:
      return GemmDType::kF16;
    default:
      return GemmDType::kF32;
  }
}

std::string_view gemm_dtype_name(GemmDType t) {
  switch (t) {
    case GemmDType::kBF16:
      return "BFloat16";
    case GemmDType::kF16:
      return "Half";
    case GemmDType::kF32:
      return "float";
    case GemmDType::kF8E4M3FN:
      return "Float8_e4m3fn";
    case GemmDType::kF8E4M3FNUZ:
      return "Float8_e4m3fnuz";
  }
  return "unknown";
}

GemmSignature GemmSignature::for_linear(int64_t tokens, int64_t out_features, int64_t in_features,
                                        GemmDType dtype, GemmDType out_dtype, bool rowwise) {
  GemmSignature s;
  s.dtype = dtype;
  s.out_dtype = out_dtype;
  s.rowwise = rowwise;
  s.trans_a = true;   // A = w, stored [out, in] row-major = [in, out] column-major
  s.trans_b = false;  // B = x, stored [tokens, in] row-major = [in, tokens] column-major
  s.m = out_features;
  s.n = tokens;
  s.k = in_features;
  s.lda = in_features;
  s.ldb = in_features;
  s.ldc = out_features;  // C = out, [tokens, out] row-major = [out, tokens] column-major
  return s;
}

std::string GemmSignature::op_name() const {
  if (is_fp8(dtype)) {
    return str_cat(kScaledOpPrefix, gemm_dtype_name(dtype), "_", gemm_dtype_name(dtype), "_",
                   gemm_dtype_name(out_dtype), "_", trans_a ? "T" : "N", trans_b ? "T" : "N");
  }
  std::string name =
      str_cat(kOpPrefix, gemm_dtype_name(dtype), "_", trans_a ? "T" : "N", trans_b ? "T" : "N");
  if (out_dtype != dtype && out_dtype == GemmDType::kF32) name += kF32OutSuffix;
  return name;
}

std::string GemmSignature::params() const {
  return str_cat(trans_a ? "t" : "n", trans_b ? "t" : "n", "_", m, "_", n, "_", k, "_ld_", lda, "_",
                 ldb, "_", ldc,
                 !is_fp8(dtype) ? "" : rowwise ? kRowwiseParamsSuffix : kScaledParamsSuffix);
}

std::string GemmSignature::key() const {
  return str_cat(op_name(), ",", params());
}

absl::Status GemmSignature::validate() const {
  if (is_fp8(dtype)) {
    if (out_dtype != GemmDType::kBF16 && out_dtype != GemmDType::kF16) {
      return absl::InvalidArgumentError(str_cat("scaled GEMM with ", gemm_dtype_name(dtype),
                                                " inputs cannot write ", gemm_dtype_name(out_dtype),
                                                " (output is BFloat16 or Half)"));
    }
  } else if (rowwise) {
    return absl::InvalidArgumentError(str_cat("row-wise scales on a ", gemm_dtype_name(dtype),
                                              " GEMM (only FP8 inputs are scaled)"));
  } else if (out_dtype != dtype &&
             !(out_dtype == GemmDType::kF32 && dtype != GemmDType::kF32)) {
    return absl::InvalidArgumentError(str_cat("GEMM with ", gemm_dtype_name(dtype),
                                              " inputs cannot write ", gemm_dtype_name(out_dtype),
                                              " (output is the input dtype, or float)"));
  }
  if (m < 1 || n < 1 || k < 1) {
    return absl::InvalidArgumentError(
        str_cat("GEMM sizes must be positive: m=", m, " n=", n, " k=", k));
  }
  const int64_t min_lda = trans_a ? k : m;
  const int64_t min_ldb = trans_b ? n : k;
  if (lda < min_lda) {
    return absl::InvalidArgumentError(
        str_cat("lda=", lda, " is less than ", min_lda, " (", trans_a ? "k" : "m", ")"));
  }
  if (ldb < min_ldb) {
    return absl::InvalidArgumentError(
        str_cat("ldb=", ldb, " is less than ", min_ldb, " (", trans_b ? "n" : "k", ")"));
  }
  if (ldc < m) {
    return absl::InvalidArgumentError(str_cat("ldc=", ldc, " is less than ", m, " (m)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<GemmSignature> GemmSignature::parse(std::string_view op, std::string_view params) {
  const bool scaled = op.substr(0, kScaledOpPrefix.size()) == kScaledOpPrefix;
  auto bad_op = [&](std::string_view why) {
    return absl::InvalidArgumentError(str_cat(
        "GEMM op name '", op, "': ", why,
        scaled ? " (expected ScaledGemmTunableOp_<Float8_e4m3fn|Float8_e4m3fnuz>_<the same>_"
                 "<BFloat16|Half>_<NN|NT|TN|TT>)"
               : " (expected GemmTunableOp_<BFloat16|Half|float>_<NN|NT|TN|TT>[_F32out])"));
  };
  if (!scaled && op.substr(0, kOpPrefix.size()) != kOpPrefix)
    return bad_op("does not start with GemmTunableOp_ or ScaledGemmTunableOp_");
  std::string_view rest = op.substr(scaled ? kScaledOpPrefix.size() : kOpPrefix.size());
  GemmSignature s;
  std::string_view op_trans;
  if (scaled) {
    const std::optional<GemmDType> a = take_dtype(&rest);
    const std::optional<GemmDType> b = a ? take_dtype(&rest) : std::nullopt;
    const std::optional<GemmDType> c = b ? take_dtype(&rest) : std::nullopt;
    if (!c) return bad_op("expected three type names");
    if (!is_fp8(*a) || *b != *a) {
      return bad_op(str_cat("inputs ", gemm_dtype_name(*a), " and ", gemm_dtype_name(*b),
                            " (tessera runs one FP8 type for both)"));
    }
    s.dtype = *a;
    s.out_dtype = *c;
    op_trans = rest;
  } else {
    bool f32_out = false;
    if (rest.size() >= kF32OutSuffix.size() &&
        rest.substr(rest.size() - kF32OutSuffix.size()) == kF32OutSuffix) {
      f32_out = true;
      rest.remove_suffix(kF32OutSuffix.size());
    }
    const size_t us = rest.rfind('_');
    if (us == std::string_view::npos) return bad_op("no _<transposes> part");
    const std::optional<GemmDType> dtype = dtype_from_name(rest.substr(0, us));
    if (!dtype) return bad_op(str_cat("unknown type '", rest.substr(0, us), "'"));
    if (is_fp8(*dtype)) return bad_op("FP8 GEMMs are ScaledGemmTunableOp_");
    if (f32_out && *dtype == GemmDType::kF32) return bad_op("_F32out on a float GEMM");
    s.dtype = *dtype;
    s.out_dtype = f32_out ? GemmDType::kF32 : *dtype;
    op_trans = rest.substr(us + 1);
  }
  const auto op_t = parse_transposes(op_trans, /*upper=*/true);
  if (!op_t) return bad_op(str_cat("bad transposes '", op_trans, "'"));
  s.trans_a = op_t->first;
  s.trans_b = op_t->second;

  auto bad_params = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        str_cat("GEMM params '", params, "' of ", op, ": ", why,
                scaled ? " (expected <tn|nt|..>_M_N_K_ld_LDA_LDB_LDC_rw_<0|1>_bias_None)"
                       : " (expected <tn|nt|..>_M_N_K_ld_LDA_LDB_LDC)"));
  };
  std::string_view dims_text = params;
  if (scaled) {
    const size_t rw = params.rfind("_rw_");
    if (rw == std::string_view::npos) return bad_params("no _rw_<0|1>_bias_<type> part");
    if (params.substr(rw) != kScaledParamsSuffix && params.substr(rw) != kRowwiseParamsSuffix) {
      return bad_params(str_cat("'", params.substr(rw + 1),
                                "' (tessera runs per-tensor or row-wise scales without a bias: ",
                                kScaledParamsSuffix.substr(1), " or ",
                                kRowwiseParamsSuffix.substr(1), ")"));
    }
    s.rowwise = params.substr(rw) == kRowwiseParamsSuffix;
    dims_text = params.substr(0, rw);
  }
  const std::vector<std::string_view> parts = tuning_text::split(dims_text, '_');
  if ((scaled || parts.size() != 4) && parts.size() != 8) {
    return bad_params("wrong number of fields");
  }
  const auto par_t = parse_transposes(parts[0], /*upper=*/false);
  if (!par_t) return bad_params(str_cat("bad transposes '", parts[0], "'"));
  if (*par_t != *op_t) {
    return bad_params(
        str_cat("transposes '", parts[0], "' differ from the op name's '", op_trans, "'"));
  }
  int64_t dims[6] = {0, 0, 0, 0, 0, 0};
  static constexpr const char* kDimNames[6] = {"M", "N", "K", "LDA", "LDB", "LDC"};
  for (int i = 0; i < 3; ++i) {
    const std::optional<int64_t> v = tuning_text::parse_int(parts[1 + i]);
    if (!v) return bad_params(str_cat(kDimNames[i], " '", parts[1 + i], "' is not an integer"));
    dims[i] = *v;
  }
  s.m = dims[0];
  s.n = dims[1];
  s.k = dims[2];
  if (parts.size() == 8) {
    if (parts[4] != "ld") return bad_params(str_cat("expected 'ld', found '", parts[4], "'"));
    for (int i = 3; i < 6; ++i) {
      const std::optional<int64_t> v = tuning_text::parse_int(parts[2 + i]);
      if (!v) return bad_params(str_cat(kDimNames[i], " '", parts[2 + i], "' is not an integer"));
      dims[i] = *v;
    }
    s.lda = dims[3];
    s.ldb = dims[4];
    s.ldc = dims[5];
  } else {
    // PyTorch before leading dimensions: the packed (smallest) ones.
    s.lda = s.trans_a ? s.k : s.m;
    s.ldb = s.trans_b ? s.n : s.k;
    s.ldc = s.m;
  }
  if (absl::Status st = s.validate(); !st.ok()) return bad_params(std::string(st.message()));
  return s;
}

}  // namespace tessera
