#include "kernels/cpu/cpu_backend.h"

#include <omp.h>
#include <unistd.h>

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_ops.h"

namespace tessera {

namespace {

constexpr size_t kAlignment = 64;  // cache line; also what AVX-512 loads like

}  // namespace

CpuBackend::CpuBackend(int threads, int device)
    : name_(device == 0 ? std::string("cpu") : absl::StrCat("cpu:", device)),
      threads_(threads > 0 ? threads : omp_get_max_threads()),
      tunable_gemm_(threads_) {
  // OpenBLAS's setting is process-wide; OpenMP's belongs to the calling thread (begin_step).
  openblas_set_num_threads(threads_);
  omp_set_num_threads(threads_);
}

void CpuBackend::begin_step(const StepBatch& batch) {
  omp_set_num_threads(threads_);
  batch_ = &batch;
}

absl::StatusOr<DeviceBuffer> CpuBackend::allocate(size_t bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(name_, ": cannot allocate ", bytes,
                                                     " bytes (host memory free: ", free_memory(),
                                                     " bytes)"));
  }
  return DeviceBuffer(this, p, bytes);
}

void CpuBackend::free(void* data) { std::free(data); }

void CpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

void CpuBackend::copy_to(Backend& /*to*/, void* dst, const void* src, size_t bytes) {
  // Every CPU "device" is host memory, and `to` runs its ops after this call returns.
  std::memcpy(dst, src, bytes);
}

size_t CpuBackend::free_memory() const {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return static_cast<size_t>(sysconf(_SC_AVPHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

absl::Status CpuBackend::load_weight(const WeightSource& weights, std::string_view name,
                                     const Tensor& dst) {
  if (!check_dtype(dst, DType::kF32, "load_weight", "dst")) return take_step_error();
  std::span<const int64_t> shape(dst.shape.data(), dst.rank);
  return weights.read_f32(name, shape, std::span<float>(dst.as<float>(), dst.numel()));
}

void CpuBackend::upload_f32(std::span<const float> src, const Tensor& dst) {
  if (!check_dtype(dst, DType::kF32, "upload_f32", "dst")) return;
  std::memcpy(dst.data, src.data(), src.size_bytes());
}

void CpuBackend::upload_bytes(std::span<const uint8_t> src, const Tensor& dst) {
  if (src.size() != dst.nbytes()) {
    return record_error(absl::InvalidArgumentError(absl::StrCat(
        name(), ": upload_bytes: ", src.size(), " bytes for a tensor of ", dst.nbytes())));
  }
  std::memcpy(dst.data, src.data(), src.size());
}

void CpuBackend::embedding(const Tensor& table, int64_t first_id, float scale, const Tensor& out) {
  if (!f32(table, "embedding", "table") || !f32(out, "embedding", "out")) return;
  cpu::embedding(table.as<float>(), first_id, table.dim(0), table.dim(1), batch_->token_ids.data(),
                 batch_->num_tokens(), scale, out.as<float>());
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& w, NormSpec norm, const Tensor& out) {
  if (!f32(x, "rms_norm", "x") || !f32(w, "rms_norm", "w") || !f32(out, "rms_norm", "out")) return;
  cpu::rms_norm(x.as<float>(), w.as<float>(), x.dim(0), x.dim(1), norm, out.as<float>());
}

void CpuBackend::add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& w,
                              NormSpec norm, const Tensor& out) {
  if (!f32(residual, "add_rms_norm", "residual") || !f32(x, "add_rms_norm", "x") ||
      !f32(w, "add_rms_norm", "w") || !f32(out, "add_rms_norm", "out")) {
    return;
  }
  cpu::add_rms_norm(residual.as<float>(), x.as<float>(), w.as<float>(), x.dim(0), x.dim(1), norm,
                    out.as<float>());
}

void CpuBackend::linear(const Tensor& x, const Tensor& w, const Tensor& out) {
  if (!f32(x, "linear", "x") || !f32(w, "linear", "w") || !f32(out, "linear", "out")) return;
  const int64_t m = x.dim(0), n = w.dim(0), k = w.dim(1);
  const cpu::GemmAlgo algo = gemm_solutions_ != nullptr
                                 ? gemm_selector_.select(*gemm_solutions_, m, n, k)
                                 : cpu::GemmAlgo::kDefault;
  cpu::linear_with(algo, x.as<float>(), w.as<float>(), m, n, k, out.as<float>());
}

void CpuBackend::rope_and_cache(const Tensor& qkv, const Tensor& inv_freq, AttentionShape shape,
                                const QkvPrologue& prologue, const KvLayerView& cache) {
  if (!f32(qkv, "rope_and_cache", "qkv") || !f32(inv_freq, "rope_and_cache", "inv_freq") ||
      !f32(cache.k, "rope_and_cache", "k cache") || !f32(cache.v, "rope_and_cache", "v cache")) {
    return;
  }
  bool ok = true;
  const auto data = [&](const Tensor* t, const char* what) -> const float* {
    if (t == nullptr) return nullptr;
    ok = f32(*t, "rope_and_cache", what) && ok;
    return t->as<float>();
  };
  const cpu::QkvPrologueData p{data(prologue.bias, "bias"), data(prologue.q_norm, "q_norm"),
                               data(prologue.k_norm, "k_norm"), prologue.norm};
  if (!ok) return;
  cpu::rope_and_cache(qkv.as<float>(), inv_freq.as<float>(), *batch_, shape, p,
                      cache.k.as<float>(), cache.v.as<float>());
  if (cache.amax == nullptr) return;
  // A calibration step: the largest |k| and |v| just written.
  const int64_t row = static_cast<int64_t>(shape.num_kv_heads) * shape.head_dim;
  for (const int32_t slot : batch_->slot_mapping) {
    if (slot < 0) continue;
    for (int64_t i = 0; i < row; ++i) {
      cache.amax[0] = std::max(cache.amax[0], std::fabs(cache.k.as<float>()[slot * row + i]));
      cache.amax[1] = std::max(cache.amax[1], std::fabs(cache.v.as<float>()[slot * row + i]));
    }
  }
}

void CpuBackend::attention(const Tensor& qkv, const KvLayerView& cache, AttentionShape shape,
                           const AttentionSpec& spec, const Tensor& out) {
  if (!f32(qkv, "attention", "qkv") || !f32(cache.k, "attention", "k cache") ||
      !f32(cache.v, "attention", "v cache") || !f32(out, "attention", "out")) {
    return;
  }
  cpu::attention(qkv.as<float>(), cache.k.as<float>(), cache.v.as<float>(), cache.block_size(),
                 *batch_, shape, spec, out.as<float>());
}

void CpuBackend::gated_activation(const Tensor& gate_up, Activation act, const Tensor& out) {
  if (!f32(gate_up, "gated_activation", "gate_up") || !f32(out, "gated_activation", "out")) return;
  cpu::gated_activation(gate_up.as<float>(), gate_up.dim(0), out.dim(1), act, out.as<float>());
}

void CpuBackend::soft_cap(const Tensor& x, float cap) {
  if (!f32(x, "soft_cap", "x")) return;
  cpu::soft_cap(x.as<float>(), x.numel(), cap);
}

void CpuBackend::gather_logit_rows(const Tensor& x, const Tensor& out) {
  if (!f32(x, "gather_logit_rows", "x") || !f32(out, "gather_logit_rows", "out")) return;
  const int64_t hidden = x.dim(1);
  for (size_t i = 0; i < batch_->logits_rows.size(); ++i) {
    std::memcpy(out.as<float>() + i * hidden, x.as<float>() + batch_->logits_rows[i] * hidden,
                hidden * sizeof(float));
  }
}

void CpuBackend::sample(const Tensor& logits, std::span<const SamplingRow> rows,
                        const Tensor& tokens) {
  if (!f32(logits, "sample", "logits") || !check_dtype(tokens, DType::kI32, "sample", "tokens")) {
    return;
  }
  const int64_t vocab = logits.dim(1);
  for (size_t r = 0; r < rows.size(); ++r) {
    const std::span<const float> row(logits.as<float>() + r * vocab, vocab);
    tokens.as<int32_t>()[r] = sample_reference(row, rows[r], sampling_scratch_).token;
  }
}

}  // namespace tessera
