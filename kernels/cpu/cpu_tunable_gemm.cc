#include "kernels/cpu/cpu_tunable_gemm.h"

#include <cblas.h>
#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <new>
#include <random>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_gemm_algos.h"
#include "runtime/backend.h"

namespace tessera {

namespace {

constexpr uint32_t kSeed = 0x7e55e7a;
constexpr size_t kFallbackCacheBytes = size_t{32} << 20;

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t begin = line.find_first_not_of(" \t", colon + 1);
    const size_t end = line.find_last_not_of(" \t\r");
    if (begin == std::string::npos) break;
    return line.substr(begin, end - begin + 1);
  }
  return "unknown";
}

std::string trimmed(std::string s) {
  const size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "unknown";
  const size_t end = s.find_last_not_of(" \t\r\n");
  return s.substr(begin, end - begin + 1);
}

absl::StatusOr<cpu::GemmAlgo> algo_of(std::string_view solution) {
  std::optional<cpu::GemmAlgo> algo = cpu::parse_gemm_algo(solution);
  if (!algo) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cpu: unknown GEMM solution '", std::string(solution),
        "' (known: Default, cpu_sgemm, cpu_gemv_rows, cpu_split_out)"));
  }
  return *algo;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> CpuTunableGemm::validators() const {
  return {{std::string(kValidatorTesseraVersion), TESSERA_VERSION},
          {"CPU_MODEL", cpu_model()},
          {"OPENBLAS_CONFIG", trimmed(openblas_get_config())},
          {"CPU_THREADS", std::to_string(threads_)}};
}

absl::StatusOr<std::vector<std::string>> CpuTunableGemm::candidates(const GemmSignature& sig) {
  const GemmSignature linear =
      GemmSignature::for_linear(sig.n, sig.m, sig.k, GemmDType::kF32, GemmDType::kF32);
  if (sig != linear) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cpu: ", sig.key(), " is not tunable: the CPU backend runs float TN GEMMs with packed "
        "leading dimensions (linear layers) only"));
  }
  std::vector<std::string> out = {std::string(cpu::gemm_algo_name(cpu::GemmAlgo::kDefault))};
  out.emplace_back(cpu::gemm_algo_name(sig.n == 1 ? cpu::GemmAlgo::kSgemm
                                                  : cpu::GemmAlgo::kGemvRows));
  out.emplace_back(cpu::gemm_algo_name(cpu::GemmAlgo::kSplitOut));
  return out;
}

size_t CpuTunableGemm::operand_bytes(const GemmSignature& sig) const {
  return static_cast<size_t>(sig.m * sig.k + sig.k * sig.n + sig.m * sig.n) * sizeof(float);
}

size_t CpuTunableGemm::cache_bytes() const {
  for (int name : {_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}) {
    const long bytes = sysconf(name);
    if (bytes > 0) return static_cast<size_t>(bytes);
  }
  return kFallbackCacheBytes;
}

absl::Status CpuTunableGemm::prepare(const GemmSignature& sig, int copies) {
  if (absl::StatusOr<std::vector<std::string>> c = candidates(sig); !c.ok()) return c.status();
  if (copies < 1) {
    return absl::InvalidArgumentError(absl::StrCat("cpu: ", copies, " operand sets requested"));
  }
  release();
  tokens_ = sig.n;
  out_features_ = sig.m;
  in_features_ = sig.k;
  try {
    Operands first;
    first.x.resize(static_cast<size_t>(tokens_ * in_features_));
    first.w.resize(static_cast<size_t>(out_features_ * in_features_));
    first.out.assign(static_cast<size_t>(tokens_ * out_features_), 0.0f);
    // Weights scaled as initialized models are (1/sqrt(in)), so that outputs stay near 1 and
    // the candidates' rounding differences stay far below the fp32 tolerance.
    std::mt19937 rng(kSeed);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    const float scale = 1.0f / std::sqrt(static_cast<float>(in_features_));
    for (float& v : first.x) v = unit(rng);
    for (float& v : first.w) v = unit(rng) * scale;
    sets_.reserve(static_cast<size_t>(copies));
    for (int i = 1; i < copies; ++i) sets_.push_back(first);
    sets_.push_back(std::move(first));
  } catch (const std::bad_alloc&) {
    release();
    return absl::ResourceExhaustedError(absl::StrCat("cpu: no memory for ", copies,
                                                     " operand sets of ", sig.key(), " (",
                                                     operand_bytes(sig), " bytes each)"));
  }
  return absl::OkStatus();
}

absl::Status CpuTunableGemm::check_copy(int copy) const {
  if (copy < 0 || copy >= static_cast<int>(sets_.size())) {
    return absl::OutOfRangeError(absl::StrCat("cpu: operand set ", copy, " of ", sets_.size(),
                                              " prepared"));
  }
  return absl::OkStatus();
}

absl::Status CpuTunableGemm::run(std::string_view solution, int copy) {
  omp_set_num_threads(threads_);
  absl::StatusOr<cpu::GemmAlgo> algo = algo_of(solution);
  if (!algo.ok()) return algo.status();
  if (absl::Status s = check_copy(copy); !s.ok()) return s;
  Operands& o = sets_[static_cast<size_t>(copy)];
  cpu::linear_with(*algo, o.x.data(), o.w.data(), tokens_, out_features_, in_features_,
                   o.out.data());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> CpuTunableGemm::output(int copy) {
  if (absl::Status s = check_copy(copy); !s.ok()) return s;
  // Row-major [tokens, out] is column-major [out, tokens]: the signature's C as it is.
  return sets_[static_cast<size_t>(copy)].out;
}

absl::StatusOr<double> CpuTunableGemm::time_ms(std::string_view solution, int64_t iterations) {
  omp_set_num_threads(threads_);
  absl::StatusOr<cpu::GemmAlgo> algo = algo_of(solution);
  if (!algo.ok()) return algo.status();
  if (sets_.empty()) return absl::FailedPreconditionError("cpu: time_ms before prepare");
  if (iterations < 1) {
    return absl::InvalidArgumentError(absl::StrCat("cpu: ", iterations, " timing iterations"));
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iterations; ++i) {
    Operands& o = sets_[static_cast<size_t>(i) % sets_.size()];
    cpu::linear_with(*algo, o.x.data(), o.w.data(), tokens_, out_features_, in_features_,
                     o.out.data());
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return ms / static_cast<double>(iterations);
}

void CpuTunableGemm::release() {
  sets_.clear();
  sets_.shrink_to_fit();
  tokens_ = out_features_ = in_features_ = 0;
}

}  // namespace tessera
