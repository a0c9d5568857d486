// The CPU backend's GEMM algorithms for a linear layer, out [m, n] = x [m, k] @ w [n, k]^T
// (m tokens, n output features; the tuner's signature calls them n and m). The tuner picks one
// per shape (cpu_tunable_gemm.h); linear() runs the one its solution source names.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera::cpu {

enum class GemmAlgo {
  kDefault,   // sgemv for one token, sgemm otherwise (what linear() always did)
  kSgemm,     // sgemm even for one token
  kGemvRows,  // one sgemv per token: reads the weight once per token, no packing
  kSplitOut,  // output features split into one block per OpenMP thread, a single-threaded
              // sgemm per block: no packing shared across threads, each reads its slice of w
};

// The solution names the results file holds: "Default", "cpu_sgemm", "cpu_gemv_rows",
// "cpu_split_out".
std::string_view gemm_algo_name(GemmAlgo algo);
std::optional<GemmAlgo> parse_gemm_algo(std::string_view name);

void linear_with(GemmAlgo algo, const float* x, const float* w, int64_t m, int64_t n, int64_t k,
                 float* out);

}  // namespace tessera::cpu
