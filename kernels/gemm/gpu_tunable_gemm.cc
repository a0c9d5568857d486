#include "kernels/gemm/gpu_tunable_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/element_dispatch.h"
#include "kernels/fp8_quantize.h"
#include "kernels/gpu_ops.h"
#include "base/half.h"
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "runtime/backend.h"

namespace tessera::gpu {

namespace {

constexpr size_t kAlign = 256;  // what gpuMalloc gives: every operand starts so aligned
constexpr uint64_t kSeedW = 0x7e55e7a1, kSeedX = 0x7e55e7a2;

size_t align_up(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

size_t dtype_bytes(GemmDType t) { return t == GemmDType::kF32 ? 4 : is_fp8(t) ? 1 : 2; }

// `n` seeded uniform values in [lo, hi) of `dtype` (kBF16 or kF16) at `dst`.
gpuError_t fill_operand(GemmDType dtype, void* dst, int64_t n, uint64_t seed, float lo, float hi,
                        gpuStream_t stream) {
  return launch_as(dtype, [&]<typename T>() {
    return fill_uniform(static_cast<T*>(dst), n, seed, lo, hi, stream);
  });
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuTunableGemm>> GpuTunableGemm::create(int device) {
  std::unique_ptr<GpuTunableGemm> t(new GpuTunableGemm(device));
  TESSERA_RETURN_IF_ERROR(t->select_device());
  TESSERA_RETURN_IF_ERROR(Gemm::create(&t->gemm_));
  GPU_CHECK(gpuStreamCreateWithFlags(&t->stream_, gpuStreamNonBlocking));
  gpuDeviceProp prop{};
  GPU_CHECK(gpuGetDeviceProperties(&prop, device));
  t->l2_bytes_ = static_cast<size_t>(prop.l2CacheSize);
  int runtime = 0;
#if defined(TESSERA_HIP)
  GPU_CHECK(hipRuntimeGetVersion(&runtime));
  const std::string arch = prop.gcnArchName;
  std::pair<std::string, std::string> runtime_validator = {std::string(kValidatorRocmVersion),
                                                           std::to_string(runtime)};
#else
  GPU_CHECK(cudaRuntimeGetVersion(&runtime));
  const std::string arch = str_cat("sm_", prop.major, prop.minor);
  std::pair<std::string, std::string> runtime_validator = {
      std::string(kValidatorCudaVersion), str_cat(runtime / 1000, ".", runtime % 1000 / 10)};
#endif
#if defined(TESSERA_VERSION)
  t->validators_.emplace_back(std::string(kValidatorTesseraVersion), TESSERA_VERSION);
#endif
  t->validators_.push_back(std::move(runtime_validator));
  t->validators_.emplace_back(std::string(kValidatorBlasLtVersion), t->gemm_->library_version());
  t->validators_.emplace_back(std::string(kValidatorGpuArch), arch);
  t->validators_.emplace_back(std::string(kValidatorDeviceName), prop.name);
  GPU_CHECK(gpuEventCreate(&t->start_));
  GPU_CHECK(gpuEventCreate(&t->stop_));
  GPU_CHECK(gpuMalloc(reinterpret_cast<void**>(&t->compare_result_), sizeof(OutputCompareResult)));
  return t;
}

GpuTunableGemm::~GpuTunableGemm() {
  {
    std::lock_guard<std::mutex> lock(prefetch_mu_);
    wait_prefetch_locked();
  }
  (void)select_device();
  release();
  lister_.reset();
  if (start_ != nullptr) (void)gpuEventDestroy(start_);
  if (stop_ != nullptr) (void)gpuEventDestroy(stop_);
  for (gpuEvent_t e : events_) (void)gpuEventDestroy(e);
  if (compare_result_ != nullptr) (void)gpuFree(compare_result_);
  gemm_.reset();
  if (stream_ != nullptr) (void)gpuStreamDestroy(stream_);
}

absl::Status GpuTunableGemm::select_device() const {
  GPU_CHECK(gpuSetDevice(device_));
  return absl::OkStatus();
}

absl::StatusOr<GpuTunableGemm::Listing> GpuTunableGemm::list(Gemm& gemm, const GemmShape& shape) {
  Listing l;
  TESSERA_ASSIGN_OR_RETURN(const auto found, gemm.candidates(shape));
  l.names.reserve(found.size());
  for (const auto& c : found) {
    l.names.push_back(c.name);
    // One the library rejects now is resolved again, and reported, when it is run.
    if (absl::StatusOr<Gemm::Solution> s = gemm.resolve(shape, c.name); s.ok()) {
      l.solutions.emplace(c.name, *std::move(s));
    }
  }
  return l;
}

void GpuTunableGemm::wait_prefetch_locked() {
  if (prefetch_.valid()) prefetch_.wait();
}

void GpuTunableGemm::prefetch_candidates(const GemmSignature& sig) {
  absl::StatusOr<GemmShape> shape = shape_of(sig);
  if (!shape.ok()) return;
  std::lock_guard<std::mutex> lock(prefetch_mu_);
  if (prefetch_shape_ == *shape && prefetch_.valid()) return;
  wait_prefetch_locked();  // one listing at a time: lister_ is not shared
  prefetch_ = {};
  prefetch_shape_.reset();
  if (lister_ == nullptr) {
    if (!select_device().ok() || !Gemm::create(&lister_).ok()) {
      lister_.reset();
      return;
    }
  }
  prefetch_shape_ = *shape;
  prefetch_ = std::async(std::launch::async, [this, shape = *shape]() -> absl::StatusOr<Listing> {
    TESSERA_RETURN_IF_ERROR(select_device());
    return list(*lister_, shape);
  });
}

absl::StatusOr<std::vector<std::string>> GpuTunableGemm::candidates(const GemmSignature& sig) {
  TESSERA_ASSIGN_OR_RETURN(const GemmShape shape, shape_of(sig));
  std::future<absl::StatusOr<Listing>> pending;
  {
    std::lock_guard<std::mutex> lock(prefetch_mu_);
    if (prefetch_shape_ == shape && prefetch_.valid()) {
      pending = std::move(prefetch_);
      prefetch_shape_.reset();
    }
  }
  if (pending.valid()) {
    absl::StatusOr<Listing> l = pending.get();
    if (l.ok()) {
      listed_shape_ = shape;
      listed_solutions_ = std::move(l->solutions);
      return std::move(l->names);
    }
  }
  TESSERA_RETURN_IF_ERROR(select_device());
  TESSERA_ASSIGN_OR_RETURN(const auto found, gemm_->candidates(shape));
  std::vector<std::string> names;
  names.reserve(found.size());
  for (const auto& c : found) names.push_back(c.name);
  return names;
}

size_t GpuTunableGemm::operand_bytes(const GemmSignature& sig) const {
  const size_t in = dtype_bytes(sig.dtype), out = dtype_bytes(sig.out_dtype);
  return static_cast<size_t>(sig.m) * sig.k * in + static_cast<size_t>(sig.n) * sig.k * in +
         static_cast<size_t>(sig.m) * sig.n * out;
}

absl::Status GpuTunableGemm::prepare(const GemmSignature& sig, int copies) {
  if (copies < 1) {
    return absl::InvalidArgumentError(str_cat("GEMM tuning: copies is ", copies, ", expected >= 1"));
  }
  TESSERA_ASSIGN_OR_RETURN(const GemmShape shape, shape_of(sig));
  release();
  TESSERA_RETURN_IF_ERROR(select_device());
  shape_ = shape;
  if (listed_shape_ == shape) resolved_ = std::move(listed_solutions_);
  listed_shape_.reset();
  listed_solutions_.clear();
  const size_t w_elems = static_cast<size_t>(shape.n) * shape.k;
  const size_t x_elems = static_cast<size_t>(shape.m) * shape.k;
  const size_t out_bytes = static_cast<size_t>(shape.m) * shape.n * shape.out_element_bytes();
  const size_t in_bytes = shape.in_element_bytes();
  const size_t w_bytes = align_up(w_elems * in_bytes), x_bytes = align_up(x_elems * in_bytes);
  const size_t x_values_bytes = is_fp8(shape.dtype) ? align_up(x_elems * 2) : 0;
  // Weights of the usual initialisation scale (variance 1/k), so that outputs are O(1) and the
  // numerics check's absolute tolerance means the same at every k.
  const float w_max = std::sqrt(3.0f / static_cast<float>(shape.k));
  for (int c = 0; c < copies; ++c) {
    Operands o;
    GPU_CHECK(gpuMalloc(&o.base, w_bytes + x_bytes + align_up(out_bytes) + x_values_bytes));
    copies_.push_back(o);  // owned from here: release() frees it on any later error
    Operands& op = copies_.back();
    op.w = op.base;
    op.x = static_cast<char*>(op.base) + w_bytes;
    op.out = static_cast<char*>(op.base) + w_bytes + x_bytes;
    if (x_values_bytes > 0) op.x_values = static_cast<char*>(op.out) + align_up(out_bytes);
    GPU_CHECK(gpuMemsetAsync(op.out, 0xff, out_bytes, stream_));
  }
  if (is_fp8(shape.dtype)) {
    TESSERA_RETURN_IF_ERROR(fill_fp8_operands(w_elems, x_elems, w_max));
  } else {
    for (Operands& op : copies_) {
      GPU_CHECK(fill_operand(shape.dtype, op.w, static_cast<int64_t>(w_elems), kSeedW, -w_max,
                             w_max, stream_));
      GPU_CHECK(fill_operand(shape.dtype, op.x, static_cast<int64_t>(x_elems), kSeedX, -1.0f,
                             1.0f, stream_));
    }
  }
  GPU_CHECK(gpuStreamSynchronize(stream_));
  prepared_ = true;
  return absl::OkStatus();
}

absl::Status GpuTunableGemm::fill_fp8_operands(size_t w_elems, size_t x_elems, float w_max) {
  // The 16-bit operands' values (of the output dtype, as a layer's are), quantized as the backend
  // does at run time -- per tensor or per row: scale = amax / the largest finite FP8 value --
  // into every operand set, beside x's values for the solutions that read them. Each scale
  // vector (and the scratch) starts on its own 256-byte boundary, as a separate allocation would:
  // cuBLASLt refused (NOT_SUPPORTED) a scale pointer 4 bytes into one.
  const bool rowwise = shape_.rowwise;
  const size_t w_scale_bytes = align_up(4 * (rowwise ? static_cast<size_t>(shape_.n) : 1));
  const size_t x_scale_bytes = align_up(4 * (rowwise ? static_cast<size_t>(shape_.m) : 1));
  GPU_CHECK(gpuMalloc(&scales_, w_scale_bytes + x_scale_bytes + kFp8PerTensorScratchBytes));
  scale_x_offset_ = w_scale_bytes;
  float* const w_scale = static_cast<float*>(scales_);
  float* const x_scale = reinterpret_cast<float*>(static_cast<char*>(scales_) + w_scale_bytes);
  void* const scratch = static_cast<char*>(scales_) + w_scale_bytes + x_scale_bytes;
  void* w_values = nullptr;
  GPU_CHECK(gpuMalloc(&w_values, w_elems * 2));
  struct Free {
    void* p;
    ~Free() { (void)gpuFree(p); }
  } free_values{w_values};
  const Fp8Encoding enc = fp8_encoding_of(shape_.dtype);
  auto quantize = [&](const void* values, int64_t rows, int64_t cols, void* codes, float* scale) {
    return launch_as(shape_.out, [&]<typename T>() {
      const T* v = static_cast<const T*>(values);
      uint8_t* q = static_cast<uint8_t*>(codes);
      return rowwise ? quantize_fp8_per_row(v, rows, cols, enc, q, scale, stream_)
                     : quantize_fp8_per_tensor(v, rows * cols, enc, q, scale, scratch, stream_);
    });
  };
  GPU_CHECK(fill_operand(shape_.out, w_values, static_cast<int64_t>(w_elems), kSeedW, -w_max,
                         w_max, stream_));
  for (Operands& op : copies_) {
    GPU_CHECK(quantize(w_values, shape_.n, shape_.k, op.w, w_scale));
    GPU_CHECK(fill_operand(shape_.out, op.x_values, static_cast<int64_t>(x_elems), kSeedX, -1.0f,
                           1.0f, stream_));
    GPU_CHECK(quantize(op.x_values, shape_.m, shape_.k, op.x, x_scale));
    // x's values become what its codes say, so that solutions reading them (tessera's
    // FP8-weight kernels) and those reading the codes compute the same products: the numerics
    // check compares kernels, not quantization.
    GPU_CHECK(launch_as(shape_.out, [&]<typename T>() {
      return dequantize_fp8(static_cast<const uint8_t*>(op.x), shape_.m, shape_.k, enc, x_scale,
                            rowwise, static_cast<T*>(op.x_values), stream_);
    }));
  }
  // `w_values` is freed on return: the stream must be done with it.
  GPU_CHECK(gpuStreamSynchronize(stream_));
  return absl::OkStatus();
}

GemmScales GpuTunableGemm::scales() const {
  if (scales_ == nullptr) return {};
  const char* const s = static_cast<const char*>(scales_);
  return {.x = reinterpret_cast<const float*>(s + scale_x_offset_),
          .w = reinterpret_cast<const float*>(s)};
}

absl::Status GpuTunableGemm::run_on(const Gemm::Solution& s, const Operands& o) {
  const void* x = Gemm::reads_unquantized_x(s, shape_) ? o.x_values : o.x;
  return gemm_->run(s, shape_, x, o.w, o.out, stream_, scales());
}

absl::Status GpuTunableGemm::check_copy(int copy) const {
  if (!prepared_) return absl::FailedPreconditionError("GEMM tuning: no signature prepared");
  if (copy < 0 || copy >= static_cast<int>(copies_.size())) {
    return absl::OutOfRangeError(str_cat("GEMM tuning: operand set ", copy, " of ",
                                         copies_.size()));
  }
  return absl::OkStatus();
}

absl::StatusOr<const Gemm::Solution*> GpuTunableGemm::solution(std::string_view name) {
  if (auto it = resolved_.find(name); it != resolved_.end()) return &it->second;
  TESSERA_ASSIGN_OR_RETURN(Gemm::Solution s, gemm_->resolve(shape_, name));
  return &resolved_.emplace(std::string(name), std::move(s)).first->second;
}

absl::Status GpuTunableGemm::run(std::string_view name, int copy) {
  TESSERA_RETURN_IF_ERROR(check_copy(copy));
  TESSERA_RETURN_IF_ERROR(select_device());
  TESSERA_ASSIGN_OR_RETURN(const Gemm::Solution* s, solution(name));
  return run_on(*s, copies_[copy]);
}

absl::StatusOr<std::vector<float>> GpuTunableGemm::output(int copy) {
  TESSERA_RETURN_IF_ERROR(check_copy(copy));
  TESSERA_RETURN_IF_ERROR(select_device());
  const Operands& o = copies_[copy];
  // Row-major out[m, n] has the memory layout of column-major C[n_sig = m, m_sig = n]: the
  // signature's C with ldc = out features, as the interface wants it.
  const size_t count = static_cast<size_t>(shape_.m) * shape_.n;
  std::vector<float> values(count);
  if (shape_.out == GemmDType::kF32) {
    GPU_CHECK(gpuMemcpyAsync(values.data(), o.out, count * 4, gpuMemcpyDeviceToHost, stream_));
    GPU_CHECK(gpuStreamSynchronize(stream_));
  } else {
    std::vector<uint16_t> raw(count);
    GPU_CHECK(gpuMemcpyAsync(raw.data(), o.out, count * 2, gpuMemcpyDeviceToHost, stream_));
    GPU_CHECK(gpuStreamSynchronize(stream_));
    const bool f16 = shape_.out == GemmDType::kF16;
    for (size_t i = 0; i < count; ++i) {
      values[i] = f16 ? half_to_float(raw[i]) : bf16_to_float(raw[i]);
    }
  }
  GPU_CHECK(gpuMemsetAsync(o.out, 0xff, count * shape_.out_element_bytes(), stream_));
  return values;
}

absl::StatusOr<double> GpuTunableGemm::time_ms(std::string_view name, int64_t iterations) {
  TESSERA_RETURN_IF_ERROR(check_copy(0));
  if (iterations < 1) {
    return absl::InvalidArgumentError(
        str_cat("GEMM tuning: iterations is ", iterations, ", expected >= 1"));
  }
  TESSERA_RETURN_IF_ERROR(select_device());
  TESSERA_ASSIGN_OR_RETURN(const Gemm::Solution* s, solution(name));
  GPU_CHECK(gpuEventRecord(start_, stream_));
  for (int64_t i = 0; i < iterations; ++i) {
    TESSERA_RETURN_IF_ERROR(run_on(*s, copies_[i % copies_.size()]));
  }
  GPU_CHECK(gpuEventRecord(stop_, stream_));
  GPU_CHECK(gpuEventSynchronize(stop_));
  float ms = 0.0f;
  GPU_CHECK(gpuEventElapsedTime(&ms, start_, stop_));
  return static_cast<double>(ms) / static_cast<double>(iterations);
}

void GpuTunableGemm::release() {
  if (copies_.empty() && reference_ == nullptr && scales_ == nullptr) {
    resolved_.clear();
    prepared_ = false;
    return;
  }
  (void)select_device();
  (void)gpuStreamSynchronize(stream_);
  for (Operands& o : copies_) (void)gpuFree(o.base);
  copies_.clear();
  if (reference_ != nullptr) (void)gpuFree(reference_);
  reference_ = nullptr;
  if (scales_ != nullptr) (void)gpuFree(scales_);
  scales_ = nullptr;
  resolved_.clear();
  prepared_ = false;
}

absl::Status GpuTunableGemm::keep_reference(int copy) {
  TESSERA_RETURN_IF_ERROR(check_copy(copy));
  TESSERA_RETURN_IF_ERROR(select_device());
  const size_t bytes = static_cast<size_t>(shape_.m) * shape_.n * shape_.out_element_bytes();
  if (reference_ == nullptr) GPU_CHECK(gpuMalloc(&reference_, bytes));
  const Operands& o = copies_[copy];
  GPU_CHECK(gpuMemcpyAsync(reference_, o.out, bytes, gpuMemcpyDeviceToDevice, stream_));
  GPU_CHECK(gpuMemsetAsync(o.out, 0xff, bytes, stream_));
  return absl::OkStatus();
}

absl::StatusOr<OutputComparison> GpuTunableGemm::compare_output(int copy, double rtol,
                                                                double atol) {
  TESSERA_RETURN_IF_ERROR(check_copy(copy));
  if (reference_ == nullptr) {
    return absl::FailedPreconditionError("GEMM tuning: no reference output kept");
  }
  TESSERA_RETURN_IF_ERROR(select_device());
  const Operands& o = copies_[copy];
  const int64_t count = shape_.m * shape_.n;
  GPU_CHECK(gpuMemsetAsync(compare_result_, 0, sizeof(OutputCompareResult), stream_));
  GPU_CHECK(gpu::compare_output(o.out, reference_, count, shape_.out == GemmDType::kF32,
                                shape_.out == GemmDType::kF16, static_cast<float>(rtol),
                                static_cast<float>(atol), compare_result_, stream_));
  OutputCompareResult r;
  GPU_CHECK(gpuMemcpyAsync(&r, compare_result_, sizeof(r), gpuMemcpyDeviceToHost, stream_));
  GPU_CHECK(gpuMemsetAsync(o.out, 0xff, static_cast<size_t>(count) * shape_.out_element_bytes(),
                           stream_));
  GPU_CHECK(gpuStreamSynchronize(stream_));
  OutputComparison c;
  float max_error = 0.0f;
  std::memcpy(&max_error, &r.max_error_bits, sizeof(max_error));
  c.max_error = max_error;
  c.within = r.outside == 0;
  return c;
}

std::vector<absl::StatusOr<double>> GpuTunableGemm::time_each(
    const std::vector<std::string>& solutions, int64_t iterations) {
  const size_t n = solutions.size();
  auto all = [n](const absl::Status& s) { return std::vector<absl::StatusOr<double>>(n, s); };
  if (absl::Status s = check_copy(0); !s.ok()) return all(s);
  if (iterations < 1) {
    return all(absl::InvalidArgumentError(
        str_cat("GEMM tuning: iterations is ", iterations, ", expected >= 1")));
  }
  if (absl::Status s = select_device(); !s.ok()) return all(s);
  while (events_.size() < 2 * n) {
    gpuEvent_t e = nullptr;
    if (absl::Status s = GPU_STATUS(gpuEventCreate(&e)); !s.ok()) return all(s);
    events_.push_back(e);
  }
  std::vector<absl::StatusOr<double>> out(n, absl::InternalError("GEMM tuning: not timed"));
  std::vector<bool> launched(n, false);
  const bool may_skip_warm = shape_.m > kWarmDecodeTokens;
  const std::string dtypes =
      str_cat(gemm_dtype_name(shape_.dtype), "/", gemm_dtype_name(shape_.out), "/");
  for (size_t i = 0; i < n; ++i) {
    absl::StatusOr<const Gemm::Solution*> s = solution(solutions[i]);
    if (!s.ok()) {
      out[i] = s.status();
      continue;
    }
    const std::string key = str_cat(dtypes, solutions[i]);
    const bool warm = !may_skip_warm || solutions[i] == kDefaultSolution || warmed_.count(key) == 0;
    absl::Status ran = warm ? run_on(**s, copies_[0]) : absl::OkStatus();
    if (ran.ok()) ran = GPU_STATUS(gpuEventRecord(events_[2 * i], stream_));
    for (int64_t it = 0; ran.ok() && it < iterations; ++it) {
      ran = run_on(**s, copies_[it % copies_.size()]);
    }
    if (ran.ok()) ran = GPU_STATUS(gpuEventRecord(events_[2 * i + 1], stream_));
    if (!ran.ok()) {
      out[i] = ran;
      continue;
    }
    launched[i] = true;
    warmed_.insert(key);
  }
  if (absl::Status s = GPU_STATUS(gpuStreamSynchronize(stream_)); !s.ok()) return all(s);
  for (size_t i = 0; i < n; ++i) {
    if (!launched[i]) continue;
    float ms = 0.0f;
    if (absl::Status s = GPU_STATUS(gpuEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]));
        !s.ok()) {
      out[i] = s;
      continue;
    }
    out[i] = static_cast<double>(ms) / static_cast<double>(iterations);
  }
  return out;
}

}  // namespace tessera::gpu
