#include "kernels/gemm/blaslt_algos.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <set>
#include <tuple>

#include "kernels/gemm/blaslt.h"
#include "base/status_macros.h"

#if defined(TESSERA_HIP)
#include <hipblaslt/hipblaslt-ext.hpp>
#endif

namespace tessera::gpu {

static_assert(sizeof(blasLtMatmulAlgo_t) <= sizeof(BlasAlgo::storage));

namespace {

constexpr int kHeuristicCount = 64;

blasLtMatmulAlgo_t& algo_of(BlasAlgo& a) {
  return *reinterpret_cast<blasLtMatmulAlgo_t*>(a.storage.data());
}
const blasLtMatmulAlgo_t& algo_of(const BlasAlgo& a) {
  return *reinterpret_cast<const blasLtMatmulAlgo_t*>(a.storage.data());
}

// The heuristic's list for `shape`, in the library's order (fastest estimate first).
absl::StatusOr<std::vector<blasLtMatmulHeuristicResult_t>> heuristic_list(
    blasLtHandle_t handle, const MatmulDescriptors& d, size_t workspace_bytes) {
  blasLtMatmulPreference_t pref = nullptr;
  BLAS_CHECK(blasLtMatmulPreferenceCreate(&pref));
  struct PrefGuard {
    blasLtMatmulPreference_t p;
    ~PrefGuard() { blasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  BLAS_CHECK(blasLtMatmulPreferenceSetAttribute(pref, BLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                &workspace_bytes, sizeof(workspace_bytes)));
  std::vector<blasLtMatmulHeuristicResult_t> results(kHeuristicCount);
  int found = 0;
  BLAS_CHECK(blasLtMatmulAlgoGetHeuristic(handle, d.op, d.a, d.b, d.d, d.d, pref, kHeuristicCount,
                                          results.data(), &found));
  results.resize(found);
  return results;
}

#if defined(TESSERA_HIP)

// hipBLASLt: uncompiled on the build host (hipBLASLt is not packaged for Debian); written
// against hipblaslt-ext.hpp (getAllAlgos, getIndexFromAlgo, getAlgosFromIndex,
// matmulIsAlgoSupported). Kept minimal: the solution index is the whole name.

constexpr std::string_view kPrefix = "hipblaslt_sol";

std::string name_of(blasLtMatmulAlgo_t& algo) {
  return str_cat(kPrefix, hipblaslt_ext::getIndexFromAlgo(algo));
}

// The workspace `algo` needs for `shape`, or NotFound when hipBLASLt rejects it.
absl::StatusOr<size_t> check(blasLtHandle_t handle, const MatmulDescriptors& d,
                             blasLtMatmulAlgo_t& algo, std::string_view name) {
  const float alpha = 1.0f, beta = 0.0f;
  size_t workspace = 0;
  if (hipblaslt_ext::matmulIsAlgoSupported(handle, d.op, &alpha, d.a, d.b, &beta, d.d, d.d, algo,
                                           workspace) != HIPBLAS_STATUS_SUCCESS) {
    return absl::NotFoundError(str_cat("hipBLASLt rejects ", name, " for this GEMM"));
  }
  return workspace;
}

#else  // cuBLASLt

constexpr std::string_view kPrefix = "lt_";
// Enumeration bounds: split-K counts tried, configurations checked and kept per shape.
constexpr int kSplitKs[] = {2, 4, 8, 16};
constexpr int kMaxAlgoIds = 64;
constexpr int kMaxChecks = 4096;
constexpr int kMaxEnumerated = 256;

// Every configuration attribute of a cublasLtMatmulAlgo_t, in the types the library stores.
struct LtConfig {
  int32_t algo = 0;
  uint32_t tile = 0, stages = 0;
  int32_t splitk = 1;
  uint32_t reduction = 0, swizzle = 0, custom = 0;
  uint16_t inner = 0, cluster = 0;
};

std::string name_of(const LtConfig& c) {
  return str_cat("lt_algo", c.algo, "_tile", c.tile, "_stages", c.stages, "_splitk", c.splitk,
                 "_red", c.reduction, "_swz", c.swizzle, "_cust", c.custom, "_inner", c.inner,
                 "_cluster", c.cluster);
}

absl::StatusOr<LtConfig> parse(std::string_view name) {
  const std::string s(name);
  LtConfig c;
  unsigned inner = 0, cluster = 0;
  int consumed = 0;
  const int fields = std::sscanf(
      s.c_str(), "lt_algo%" SCNd32 "_tile%" SCNu32 "_stages%" SCNu32 "_splitk%" SCNd32
                 "_red%" SCNu32 "_swz%" SCNu32 "_cust%" SCNu32 "_inner%u_cluster%u%n",
      &c.algo, &c.tile, &c.stages, &c.splitk, &c.reduction, &c.swizzle, &c.custom, &inner,
      &cluster, &consumed);
  if (fields != 9 || consumed != static_cast<int>(s.size()) || inner > UINT16_MAX ||
      cluster > UINT16_MAX || name_of({c.algo, c.tile, c.stages, c.splitk, c.reduction, c.swizzle,
                                       c.custom, static_cast<uint16_t>(inner),
                                       static_cast<uint16_t>(cluster)}) != s) {
    return absl::InvalidArgumentError(str_cat(
        "GEMM solution \"", name,
        "\" is not a cuBLASLt algorithm name (lt_algo<id>_tile<t>_stages<s>_splitk<k>_red<r>"
        "_swz<w>_cust<c>_inner<i>_cluster<l>)"));
  }
  c.inner = static_cast<uint16_t>(inner);
  c.cluster = static_cast<uint16_t>(cluster);
  return c;
}

template <typename T>
absl::Status get_config(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr,
                        T* value) {
  size_t written = 0;
  BLAS_CHECK(cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, value, sizeof(T), &written));
  return absl::OkStatus();
}

template <typename T>
absl::Status set_config(cublasLtMatmulAlgo_t* algo, cublasLtMatmulAlgoConfigAttributes_t attr,
                        T value) {
  BLAS_CHECK(cublasLtMatmulAlgoConfigSetAttribute(algo, attr, &value, sizeof(T)));
  return absl::OkStatus();
}

absl::StatusOr<LtConfig> config_of(const cublasLtMatmulAlgo_t& algo) {
  LtConfig c;
  TESSERA_RETURN_IF_ERROR(get_config(algo, CUBLASLT_ALGO_CONFIG_ID, &c.algo));
  TESSERA_RETURN_IF_ERROR(get_config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &c.tile));
  TESSERA_RETURN_IF_ERROR(get_config(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &c.stages));
  TESSERA_RETURN_IF_ERROR(get_config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &c.splitk));
  TESSERA_RETURN_IF_ERROR(get_config(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &c.reduction));
  TESSERA_RETURN_IF_ERROR(get_config(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &c.swizzle));
  TESSERA_RETURN_IF_ERROR(get_config(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &c.custom));
  TESSERA_RETURN_IF_ERROR(get_config(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, &c.inner));
  TESSERA_RETURN_IF_ERROR(get_config(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &c.cluster));
  return c;
}

absl::Status init_algo(cublasLtHandle_t handle, const GemmShape& shape, int32_t id,
                       cublasLtMatmulAlgo_t* algo) {
  BLAS_CHECK(cublasLtMatmulAlgoInit(handle, CUBLAS_COMPUTE_32F, CUDA_R_32F, blas_input_type(shape),
                                    blas_input_type(shape), blas_output_type(shape),
                                    blas_output_type(shape), id, algo));
  return absl::OkStatus();
}

absl::Status build(cublasLtHandle_t handle, const GemmShape& shape, const LtConfig& c,
                   cublasLtMatmulAlgo_t* algo) {
  TESSERA_RETURN_IF_ERROR(init_algo(handle, shape, c.algo, algo));
  TESSERA_RETURN_IF_ERROR(set_config(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, c.tile));
  TESSERA_RETURN_IF_ERROR(set_config(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, c.stages));
  TESSERA_RETURN_IF_ERROR(set_config(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, c.splitk));
  TESSERA_RETURN_IF_ERROR(set_config(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, c.reduction));
  TESSERA_RETURN_IF_ERROR(set_config(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, c.swizzle));
  TESSERA_RETURN_IF_ERROR(set_config(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, c.custom));
  TESSERA_RETURN_IF_ERROR(set_config(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID, c.inner));
  TESSERA_RETURN_IF_ERROR(set_config(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, c.cluster));
  return absl::OkStatus();
}

// The workspace `algo` needs for the shape, or NotFound when cuBLASLt rejects it.
absl::StatusOr<size_t> check(cublasLtHandle_t handle, const MatmulDescriptors& d,
                             const cublasLtMatmulAlgo_t& algo, std::string_view name) {
  cublasLtMatmulHeuristicResult_t result{};
  const cublasStatus_t st =
      cublasLtMatmulAlgoCheck(handle, d.op, d.a, d.b, d.d, d.d, &algo, &result);
  if (st != CUBLAS_STATUS_SUCCESS || result.state != CUBLAS_STATUS_SUCCESS) {
    return absl::NotFoundError(str_cat("cuBLASLt rejects ", name, " for this GEMM (status ",
                                       static_cast<int>(st != CUBLAS_STATUS_SUCCESS ? st : result.state),
                                       ")"));
  }
  return result.workspaceSize;
}

// The largest alignment the algorithm asks of A, B, C or D (256 when the library does not say).
uint32_t min_alignment(const cublasLtMatmulAlgo_t& algo) {
  uint32_t most = 0;
  for (auto attr : {CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_A_BYTES, CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_B_BYTES,
                    CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_C_BYTES, CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_D_BYTES}) {
    uint32_t v = 0;
    size_t written = 0;
    if (cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof(v), &written) !=
        CUBLAS_STATUS_SUCCESS) {
      return 256;
    }
    most = std::max(most, v);
  }
  return most == 0 ? 256 : most;
}

// A uint32 array capability (tile or stage ids); {0} (undefined: the library picks) when the
// algorithm lists none.
absl::StatusOr<std::vector<uint32_t>> cap_ids(const cublasLtMatmulAlgo_t& algo,
                                              cublasLtMatmulAlgoCapAttributes_t attr) {
  size_t bytes = 0;
  BLAS_CHECK(cublasLtMatmulAlgoCapGetAttribute(&algo, attr, nullptr, 0, &bytes));
  std::vector<uint32_t> ids(bytes / sizeof(uint32_t));
  if (!ids.empty()) {
    BLAS_CHECK(cublasLtMatmulAlgoCapGetAttribute(&algo, attr, ids.data(), bytes, &bytes));
  }
  if (ids.empty()) ids.push_back(0);
  return ids;
}

template <typename T>
absl::StatusOr<T> cap_value(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoCapAttributes_t attr) {
  T v{};
  size_t written = 0;
  BLAS_CHECK(cublasLtMatmulAlgoCapGetAttribute(&algo, attr, &v, sizeof(v), &written));
  return v;
}

// The configuration space of one algorithm id: tiles x stages x (split-K, reduction) x swizzle,
// walked in a scattered order (index * stride mod size, stride coprime to size) so that a walk
// cut short by the bounds still varies every dimension.
struct AlgoSpace {
  int32_t id = 0;
  std::vector<uint32_t> tiles, stages;
  std::vector<std::pair<int32_t, uint32_t>> splits;  // (split-K count, reduction scheme)
  uint32_t swizzles = 1;
  uint64_t size = 0, stride = 1, next = 0;

  LtConfig at(uint64_t i) const {
    LtConfig c;
    c.algo = id;
    c.tile = tiles[i % tiles.size()];
    i /= tiles.size();
    c.stages = stages[i % stages.size()];
    i /= stages.size();
    std::tie(c.splitk, c.reduction) = splits[i % splits.size()];
    i /= splits.size();
    c.swizzle = static_cast<uint32_t>(i % swizzles);
    return c;
  }
};

absl::StatusOr<AlgoSpace> space_of(cublasLtHandle_t handle, const GemmShape& shape, int32_t id) {
  AlgoSpace s;
  s.id = id;
  cublasLtMatmulAlgo_t algo;
  TESSERA_RETURN_IF_ERROR(init_algo(handle, shape, id, &algo));
  TESSERA_ASSIGN_OR_RETURN(s.tiles, cap_ids(algo, CUBLASLT_ALGO_CAP_TILE_IDS));
  TESSERA_ASSIGN_OR_RETURN(s.stages, cap_ids(algo, CUBLASLT_ALGO_CAP_STAGES_IDS));
  TESSERA_ASSIGN_OR_RETURN(const int32_t splitk, cap_value<int32_t>(algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT));
  TESSERA_ASSIGN_OR_RETURN(const uint32_t reductions,
                           cap_value<uint32_t>(algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK));
  TESSERA_ASSIGN_OR_RETURN(const uint32_t swizzle,
                           cap_value<uint32_t>(algo, CUBLASLT_ALGO_CAP_CTA_SWIZZLING_SUPPORT));
  s.splits.emplace_back(1, CUBLASLT_REDUCTION_SCHEME_NONE);
  // With 16-bit output, only the fp32 (compute type) reduction: the in-place and output-type ones
  // sum the split-K partials in the 16-bit type, and on an H100 they failed the numerics check
  // against Default (bf16: 21 of 277 candidates of a 4096x4096 decode GEMM) -- tuning time spent
  // on losers.
  std::vector<uint32_t> schemes = {CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE};
  if (shape.out == GemmDType::kF32) {
    schemes.insert(schemes.begin(), CUBLASLT_REDUCTION_SCHEME_INPLACE);
    schemes.push_back(CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE);
  }
  if (splitk != 0) {
    for (int k : kSplitKs) {
      for (uint32_t r : schemes) {
        if ((reductions & r) != 0) s.splits.emplace_back(k, r);
      }
    }
  }
  s.swizzles = swizzle != 0 ? 2 : 1;
  // Custom options are left at 0: their meaning differs per algorithm, and the heuristic's list
  // brings the ones it rates.
  s.size = static_cast<uint64_t>(s.tiles.size()) * s.stages.size() * s.splits.size() * s.swizzles;
  for (uint64_t p : {7919u, 7927u, 7933u}) {
    if (std::gcd(p, s.size) == 1) {
      s.stride = p;
      break;
    }
  }
  return s;
}

#endif  // TESSERA_HIP

}  // namespace

bool is_blaslt_name(std::string_view name) { return name.substr(0, kPrefix.size()) == kPrefix; }

#if defined(TESSERA_HIP)

absl::StatusOr<std::vector<std::pair<std::string, CandidateOrigin>>> blaslt_candidates(
    void* handle_ptr, const GemmShape& shape, size_t workspace_bytes,
    const void* scale_placeholder) {
  auto handle = static_cast<blasLtHandle_t>(handle_ptr);
  MatmulDescriptors d;
  TESSERA_RETURN_IF_ERROR(d.create(shape, scale_placeholder));
  std::vector<std::pair<std::string, CandidateOrigin>> out;
  std::set<std::string> seen;
  auto keep = [&](blasLtMatmulAlgo_t& algo, CandidateOrigin origin) {
    std::string name = name_of(algo);
    auto ws = check(handle, d, algo, name);
    if (ws.ok() && *ws <= workspace_bytes && seen.insert(name).second) {
      out.emplace_back(std::move(name), origin);
    }
  };
  TESSERA_ASSIGN_OR_RETURN(auto heuristic, heuristic_list(handle, d, workspace_bytes));
  for (auto& r : heuristic) keep(r.algo, CandidateOrigin::kHeuristic);
  // hipBLASLt's whole solution list for the types, as PyTorch TunableOp tunes over it.
  std::vector<hipblasLtMatmulHeuristicResult_t> all;
  BLAS_CHECK(hipblaslt_ext::getAllAlgos(handle, hipblaslt_ext::GemmType::HIPBLASLT_GEMM, BLAS_OP_T,
                                        BLAS_OP_N, blas_input_type(shape), blas_input_type(shape),
                                        blas_output_type(shape), blas_output_type(shape),
                                        BLAS_COMPUTE_32F, all));
  for (auto& r : all) keep(r.algo, CandidateOrigin::kEnumerated);
  return out;
}

absl::StatusOr<BlasAlgo> blaslt_algo(void* handle_ptr, const GemmShape& shape,
                                     std::string_view name, size_t workspace_bytes,
                                     const void* scale_placeholder) {
  auto handle = static_cast<blasLtHandle_t>(handle_ptr);
  const std::string digits(name.substr(std::min(name.size(), kPrefix.size())));
  if (!is_blaslt_name(name) || digits.empty() ||
      digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) {
    return absl::InvalidArgumentError(
        str_cat("GEMM solution \"", name, "\" is not a hipBLASLt solution name (hipblaslt_sol<index>)"));
  }
  std::vector<int> index = {std::stoi(digits)};
  std::vector<hipblasLtMatmulHeuristicResult_t> found;
  if (hipblaslt_ext::getAlgosFromIndex(handle, index, found) != HIPBLAS_STATUS_SUCCESS ||
      found.empty()) {
    return absl::NotFoundError(str_cat("hipBLASLt has no solution ", name));
  }
  MatmulDescriptors d;
  TESSERA_RETURN_IF_ERROR(d.create(shape, scale_placeholder));
  TESSERA_ASSIGN_OR_RETURN(const size_t ws, check(handle, d, found[0].algo, name));
  if (ws > workspace_bytes) {
    return absl::NotFoundError(str_cat(name, " needs ", ws, " bytes of workspace, over the ",
                                       workspace_bytes, " available"));
  }
  BlasAlgo a;
  a.name = std::string(name);
  algo_of(a) = found[0].algo;
  a.min_alignment = 16;  // hipBLASLt's documented requirement for its buffers
  return a;
}

absl::StatusOr<std::string> blaslt_name_of(const BlasAlgo& algo) {
  blasLtMatmulAlgo_t copy = algo_of(algo);  // getIndexFromAlgo takes a non-const reference
  return name_of(copy);
}

#else  // cuBLASLt

absl::StatusOr<std::vector<std::pair<std::string, CandidateOrigin>>> blaslt_candidates(
    void* handle_ptr, const GemmShape& shape, size_t workspace_bytes,
    const void* scale_placeholder) {
  auto handle = static_cast<cublasLtHandle_t>(handle_ptr);
  MatmulDescriptors d;
  TESSERA_RETURN_IF_ERROR(d.create(shape, scale_placeholder));
  std::vector<std::pair<std::string, CandidateOrigin>> out;
  std::set<std::string> seen;
  // Keeps `c` when its name rebuilds an algorithm that passes the check within the workspace.
  auto keep = [&](const LtConfig& c, CandidateOrigin origin) -> bool {
    std::string name = name_of(c);
    if (seen.count(name) != 0) return false;
    cublasLtMatmulAlgo_t algo;
    if (!build(handle, shape, c, &algo).ok()) return false;
    auto ws = check(handle, d, algo, name);
    if (!ws.ok() || *ws > workspace_bytes) return false;
    seen.insert(name);
    out.emplace_back(std::move(name), origin);
    return true;
  };

  TESSERA_ASSIGN_OR_RETURN(auto heuristic, heuristic_list(handle, d, workspace_bytes));
  for (const auto& r : heuristic) {
    TESSERA_ASSIGN_OR_RETURN(const LtConfig c, config_of(r.algo));
    keep(c, CandidateOrigin::kHeuristic);
  }

  int ids[kMaxAlgoIds];
  int n_ids = 0;
  BLAS_CHECK(cublasLtMatmulAlgoGetIds(handle, CUBLAS_COMPUTE_32F, CUDA_R_32F,
                                      blas_input_type(shape), blas_input_type(shape),
                                      blas_output_type(shape), blas_output_type(shape),
                                      kMaxAlgoIds, ids, &n_ids));
  std::vector<AlgoSpace> spaces;
  for (int i = 0; i < n_ids; ++i) {
    // An id whose capabilities cannot be read is skipped: the others are still candidates.
    if (auto s = space_of(handle, shape, ids[i]); s.ok()) spaces.push_back(*std::move(s));
  }
  // Round-robin over the ids, one configuration each per round, within the bounds.
  int checks = 0, kept = 0;
  bool more = true;
  while (more && checks < kMaxChecks && kept < kMaxEnumerated) {
    more = false;
    for (AlgoSpace& s : spaces) {
      if (s.next >= s.size || checks >= kMaxChecks || kept >= kMaxEnumerated) continue;
      more = true;
      const LtConfig c = s.at((s.next++ * s.stride) % s.size);
      ++checks;
      if (keep(c, CandidateOrigin::kEnumerated)) ++kept;
    }
  }
  return out;
}

absl::StatusOr<BlasAlgo> blaslt_algo(void* handle_ptr, const GemmShape& shape,
                                     std::string_view name, size_t workspace_bytes,
                                     const void* scale_placeholder) {
  auto handle = static_cast<cublasLtHandle_t>(handle_ptr);
  TESSERA_ASSIGN_OR_RETURN(const LtConfig c, parse(name));
  BlasAlgo a;
  a.name = std::string(name);
  cublasLtMatmulAlgo_t& algo = algo_of(a);
  if (absl::Status s = build(handle, shape, c, &algo); !s.ok()) {
    return absl::NotFoundError(str_cat("cuBLASLt cannot build ", name, ": ", s.message()));
  }
  MatmulDescriptors d;
  TESSERA_RETURN_IF_ERROR(d.create(shape, scale_placeholder));
  TESSERA_ASSIGN_OR_RETURN(const size_t ws, check(handle, d, algo, name));
  if (ws > workspace_bytes) {
    return absl::NotFoundError(str_cat(name, " needs ", ws, " bytes of workspace, over the ",
                                       workspace_bytes, " available"));
  }
  a.min_alignment = min_alignment(algo);
  return a;
}

absl::StatusOr<std::string> blaslt_name_of(const BlasAlgo& algo) {
  TESSERA_ASSIGN_OR_RETURN(const LtConfig c, config_of(algo_of(algo)));
  return name_of(c);
}

#endif  // TESSERA_HIP

}  // namespace tessera::gpu
