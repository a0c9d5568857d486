#include "kernels/gpu_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

#include "kernels/dequant_gpu.h"
#include "kernels/element_dispatch.h"
#include "kernels/fp8_quantize.h"
#include "base/dtype.h"
#include "base/status_macros.h"
#include "base/str_cat.h"
#include "spdlog/spdlog.h"

namespace tessera {

namespace {

using gpu::launch_as;

template <typename T>
T* elements(const Tensor& t) {
  return static_cast<T*>(t.data);
}

// The stored-order index of element `hf_element` of read_f32's output (HF layout): they differ
// only for GGUF's permuted q/k rows, where HF row h * d + t * d / 2 + j is stored row
// h * d + 2j + t (the inverse of qk_unpermuted_row).
int64_t stored_element(const RawTensor& t, int64_t hf_element) {
  if (!t.qk_permuted || t.qk_head_dim <= 0 || t.info.shape.empty() || t.info.shape[0] <= 0) {
    return hf_element;
  }
  int64_t numel = 1;
  for (int64_t d : t.info.shape) numel *= d;
  const int64_t row_elems = numel / t.info.shape[0];
  const int64_t hf_row = hf_element / row_elems, d = t.qk_head_dim;
  const int64_t r = hf_row % d;
  const int64_t stored_row = hf_row / d * d + 2 * (r % (d / 2)) + r / (d / 2);
  return stored_row * row_elems + hf_element % row_elems;
}

// upload_step's int32 arrays: token ids, positions, slots and sequence of each token; query
// starts (seqs + 1), context lengths, and the prefill and decode sequence lists (seqs together);
// logit rows; block tables.
constexpr size_t metadata_elements(size_t tokens, size_t seqs, size_t logit_rows,
                                   size_t table_entries) {
  return 4 * tokens + 3 * seqs + 1 + logit_rows + table_entries;
}

// Graph steps' metadata starts large enough for a decode step of 256 sequences with 2048-block
// tables (32k tokens of 16-token blocks), so that it rarely moves (which stales recordings).
constexpr size_t kGraphStepMinElements = metadata_elements(256, 256, 256, 256 * 2048);

}  // namespace

int GpuBackend::device_count() {
  int n = 0;
  if (gpuGetDeviceCount(&n) != gpuSuccess) {
    (void)gpuGetLastError();  // no driver or no device: clear the sticky error
    return 0;
  }
  return n;
}

absl::StatusOr<std::unique_ptr<GpuBackend>> GpuBackend::create(int device, DType dtype) {
  if (dtype != DType::kBF16 && dtype != DType::kF16) {
    return absl::InvalidArgumentError(str_cat("gpu: compute dtype ", dtype_name(dtype),
                                              " is not one of BF16, F16"));
  }
  const int n = device_count();
  if (device < 0 || device >= n) {
    return absl::FailedPreconditionError(
        str_cat("gpu: device ", device, " requested but ", n, " GPU(s) are visible"));
  }
  std::unique_ptr<GpuBackend> b(new GpuBackend(device, dtype));
  if (absl::Status s = b->init(); !s.ok()) return s;
  return b;
}

absl::Status GpuBackend::init() {
  GPU_CHECK(gpuSetDevice(device_));
  gpuDeviceProp prop{};
  GPU_CHECK(gpuGetDeviceProperties(&prop, device_));
  name_ = str_cat("gpu:", device_, " (", prop.name, ")");
  multiprocessors_ = prop.multiProcessorCount;
#if defined(TESSERA_CUDA)
  compute_capability_ = prop.major * 10 + prop.minor;
#endif
  GPU_CHECK(gpuStreamCreateWithFlags(&stream_, gpuStreamNonBlocking));
  GPU_CHECK(gpuEventCreateWithFlags(&step_mem_.copied, gpuEventDisableTiming));
  GPU_CHECK(gpuEventCreateWithFlags(&graph_step_mem_.copied, gpuEventDisableTiming));
  GPU_CHECK(gpuEventCreateWithFlags(&hop_done_, gpuEventDisableTiming));
  GPU_CHECK(gpuMalloc(reinterpret_cast<void**>(&scratch_), kScratchFloats * sizeof(float)));
  GPU_CHECK(gpuMalloc(reinterpret_cast<void**>(&first_non_finite_), sizeof(unsigned long long)));
  if (absl::Status s = gpu::Gemm::create(&gemm_); !s.ok()) return s;
  auto tunable = gpu::GpuTunableGemm::create(device_);
  if (!tunable.ok()) return tunable.status();
  tunable_gemm_ = *std::move(tunable);
  if (const char* v = std::getenv("TESSERA_PROFILE_OPS"); v != nullptr && std::string_view(v) == "1") {
    profiler_ = std::make_unique<gpu::OpProfiler>();
    spdlog::info("{}: TESSERA_PROFILE_OPS=1: timing every op (decode graphs off); the table is "
                 "logged at exit", name_);
  }
  return absl::OkStatus();
}

void GpuBackend::mark(std::string_view op) {
  if (profiler_ != nullptr) profiler_->mark(op, stream_);
}

GpuBackend::~GpuBackend() {
  make_current();
  if (stream_ != nullptr) (void)gpuStreamSynchronize(stream_);
  if (profiler_ != nullptr && profiler_->collect().ok()) {
    spdlog::info("{}: {}", name_, profiler_->report());
  }
  profiler_.reset();
  for (auto& [key, graph] : graphs_) drop_graph(graph);
  tunable_gemm_.reset();
  gemm_.reset();
  if (scratch_ != nullptr) (void)gpuFree(scratch_);
  if (first_non_finite_ != nullptr) (void)gpuFree(first_non_finite_);
  if (decode_part_ != nullptr) (void)gpuFree(decode_part_);
  if (fp8_activations_ != nullptr) (void)gpuFree(fp8_activations_);
  for (StepMemory* mem : {&step_mem_, &graph_step_mem_}) {
    free_step_memory(*mem);
    if (mem->copied != nullptr) (void)gpuEventDestroy(mem->copied);
  }
  if (pinned_ != nullptr) (void)gpuFreeHost(pinned_);
  if (hop_done_ != nullptr) (void)gpuEventDestroy(hop_done_);
  if (stream_ != nullptr) (void)gpuStreamDestroy(stream_);
}

void GpuBackend::make_current() const {
  // Cheap when already current; a failure here shows up as the next call's error.
  (void)gpuSetDevice(device_);
}

// --- memory ---------------------------------------------------------------------------------

absl::StatusOr<DeviceBuffer> GpuBackend::allocate(size_t bytes) {
  make_current();
  void* p = nullptr;
  const gpuError_t err = gpuMalloc(&p, bytes == 0 ? 1 : bytes);
  if (err == gpuErrorMemoryAllocation) {
    (void)gpuGetLastError();
    return absl::ResourceExhaustedError(str_cat(name_, ": cannot allocate ", bytes,
                                                " bytes; ", free_memory(), " bytes free"));
  }
  if (err != gpuSuccess) {
    (void)gpuGetLastError();
    return gpu::status_from(err, "gpuMalloc", __FILE__, __LINE__);
  }
  return DeviceBuffer(this, p, bytes);
}

void GpuBackend::free(void* data) {
  make_current();
  record_error(GPU_STATUS(gpuFree(data)));
}

void GpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  make_current();
  record_error(GPU_STATUS(gpuMemcpyAsync(dst, src, bytes, gpuMemcpyDeviceToHost, stream_)));
  record_error(GPU_STATUS(gpuStreamSynchronize(stream_)));
}

size_t GpuBackend::free_memory() const {
  make_current();
  size_t free_bytes = 0, total = 0;
  if (gpuMemGetInfo(&free_bytes, &total) != gpuSuccess) {
    (void)gpuGetLastError();
    return 0;
  }
  return free_bytes;
}

absl::Status GpuBackend::ensure_pinned(size_t bytes) {
  if (bytes <= pinned_bytes_) return absl::OkStatus();
  if (pinned_ != nullptr) {
    GPU_CHECK(gpuStreamSynchronize(stream_));
    GPU_CHECK(gpuFreeHost(pinned_));
    pinned_ = nullptr;
    pinned_bytes_ = 0;
  }
  GPU_CHECK(gpuMallocHost(reinterpret_cast<void**>(&pinned_), bytes));
  pinned_bytes_ = bytes;
  return absl::OkStatus();
}

absl::Status GpuBackend::arm_weight_check() {
  GPU_CHECK(gpuMemsetAsync(first_non_finite_, 0xff, sizeof(unsigned long long), stream_));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> GpuBackend::read_weight_check() {
  unsigned long long first = 0;
  GPU_CHECK(gpuMemcpyAsync(&first, first_non_finite_, sizeof(first), gpuMemcpyDeviceToHost,
                           stream_));
  GPU_CHECK(gpuStreamSynchronize(stream_));
  return first == ~0ull ? int64_t{-1} : static_cast<int64_t>(first);
}

absl::Status GpuBackend::upload(const float* src, int64_t n, const Tensor& dst, bool check) {
  if (dst.numel() != n) {
    return absl::InvalidArgumentError(str_cat(name_, ": upload of ", n, " values into a tensor of ",
                                              dst.numel()));
  }
  if (dst.dtype == DType::kF32) {
    GPU_CHECK(gpuMemcpyAsync(dst.data, src, n * sizeof(float), gpuMemcpyHostToDevice, stream_));
    return absl::OkStatus();
  }
  if (dst.dtype != DType::kBF16 && dst.dtype != DType::kF16) {
    return absl::InvalidArgumentError(str_cat(name_, ": cannot upload into ", dtype_name(dst.dtype)));
  }
  for (int64_t done = 0; done < n;) {
    const int64_t count = std::min<int64_t>(n - done, static_cast<int64_t>(kScratchFloats));
    GPU_CHECK(gpuMemcpyAsync(scratch_, src + done, count * sizeof(float), gpuMemcpyHostToDevice,
                             stream_));
    GPU_CHECK(launch_as(dst.dtype, [&]<typename T>() {
      return gpu::convert_f32(scratch_, elements<T>(dst) + done, count, stream_,
                              check ? first_non_finite_ : nullptr, done);
    }));
    done += count;
  }
  return absl::OkStatus();
}

absl::Status GpuBackend::load_weight(const WeightSource& weights, std::string_view name,
                                     const Tensor& dst) {
  make_current();
  absl::StatusOr<bool> on_device = load_weight_on_device(weights, name, dst);
  if (!on_device.ok()) {
    return absl::Status(on_device.status().code(),
                        str_cat(name_, ": loading ", name, ": ", on_device.status().message()));
  }
  if (*on_device) return absl::OkStatus();
  // Everything else: fp32 from the source (converted on the host), uploaded and rounded here.
  std::span<const int64_t> shape(dst.shape.data(), dst.rank);
  const size_t n = static_cast<size_t>(dst.numel());
  if (absl::Status s = ensure_pinned(n * sizeof(float)); !s.ok()) return s;
  // The previous tensor's chunks may still be in flight from the pinned buffer.
  GPU_CHECK(gpuStreamSynchronize(stream_));
  // read_f32 checks the fp32 values; rounding them to 16 bits is checked here (a finite F64 or
  // integer value past fp16's range becomes inf).
  if (absl::Status s = weights.read_f32(name, shape, std::span<float>(pinned_, n)); !s.ok()) {
    return s;
  }
  const bool check = dst.dtype != DType::kF32;
  if (check) {
    if (absl::Status s = arm_weight_check(); !s.ok()) return s;
  }
  if (absl::Status s = upload(pinned_, static_cast<int64_t>(n), dst, check); !s.ok()) return s;
  GPU_CHECK(gpuStreamSynchronize(stream_));
  if (!check) return absl::OkStatus();
  absl::StatusOr<int64_t> bad = read_weight_check();
  if (!bad.ok() || *bad < 0) return bad.status();
  absl::StatusOr<RawTensor> raw = weights.raw(name);
  if (!raw.ok()) return raw.status();
  return non_finite_weight_error(str_cat(weights.path(), ": tensor '", name, "'"), *raw,
                                 stored_element(*raw, *bad), dst.dtype);
}

absl::StatusOr<bool> GpuBackend::load_weight_on_device(const WeightSource& weights,
                                                       std::string_view name, const Tensor& dst) {
  if (dst.dtype != DType::kBF16 && dst.dtype != DType::kF16) return false;
  // Whatever this path does not take (a missing tensor, another type, a shape other than dst's)
  // goes to the host path, whose read_f32 reports the errors.
  absl::StatusOr<RawTensor> raw = weights.raw(name);
  // Scaled weights (FP8 checkpoints) take the host path, which applies the scales: the device
  // conversion knows stored blocks, not per-tensor, per-row or block scales.
  if (!raw.ok() || raw->scales.scaled() || !gpu::dequantizes_on_device(raw->info.dtype)) return false;
  const std::vector<int64_t>& shape = raw->info.shape;
  if (!std::equal(shape.begin(), shape.end(), dst.shape.begin(), dst.shape.begin() + dst.rank)) {
    return false;
  }
  const DTypeTraits* traits = dtype_traits(static_cast<uint32_t>(raw->info.dtype));
  const int64_t n = dst.numel();
  if (n == 0) return false;
  // Rows matter only to the q/k row permutation; otherwise the tensor is one row of blocks.
  const bool permuted = raw->qk_permuted;
  const int64_t row_elems = permuted ? dst.row_size() : n;
  const int64_t rows = n / row_elems;
  const int64_t head_dim = permuted ? raw->qk_head_dim : 0;
  const int64_t block_elems = static_cast<int64_t>(traits->block_elems);
  const int64_t block_bytes = static_cast<int64_t>(traits->block_bytes);
  if (row_elems % block_elems != 0 ||
      raw->nbytes != static_cast<size_t>(n / block_elems * block_bytes) ||
      (permuted && (head_dim <= 0 || head_dim % 2 != 0 || rows % head_dim != 0))) {
    return false;
  }
  // Chunks of whole blocks (not necessarily whole rows) as large as the device scratch, staged
  // through the pinned buffer: the scratch holds the stored bytes until the kernel has read them.
  const int64_t n_blocks = n / block_elems;
  const int64_t chunk_blocks =
      std::min<int64_t>(n_blocks, static_cast<int64_t>(kScratchFloats * sizeof(float)) / block_bytes);
  if (absl::Status s = ensure_pinned(static_cast<size_t>(chunk_blocks * block_bytes)); !s.ok()) {
    return s;
  }
  uint8_t* pinned = reinterpret_cast<uint8_t*>(pinned_);
  uint8_t* staged = reinterpret_cast<uint8_t*>(scratch_);
  if (absl::Status s = arm_weight_check(); !s.ok()) return s;
  for (int64_t first = 0; first < n_blocks; first += chunk_blocks) {
    const int64_t count = std::min(chunk_blocks, n_blocks - first);
    const size_t bytes = static_cast<size_t>(count * block_bytes);
    // The previous chunk (or tensor) has left the pinned buffer and the scratch once this returns.
    GPU_CHECK(gpuStreamSynchronize(stream_));
    std::memcpy(pinned, raw->data + first * block_bytes, bytes);
    GPU_CHECK(gpuMemcpyAsync(staged, pinned, bytes, gpuMemcpyHostToDevice, stream_));
    GPU_CHECK(launch_as(dst.dtype, [&]<typename T>() {
      const gpu::DequantTarget<T> target{elements<T>(dst), row_elems, head_dim,
                                         first_non_finite_};
      return gpu::dequantize(raw->info.dtype, staged, first, count, target, stream_);
    }));
  }
  // Drains the stream, then the one read of the check for this tensor.
  absl::StatusOr<int64_t> bad = read_weight_check();
  if (!bad.ok()) return bad.status();
  if (*bad >= 0) {
    return non_finite_weight_error(str_cat(weights.path(), ": tensor '", name, "'"), *raw, *bad,
                                   dst.dtype);
  }
  return true;
}

void GpuBackend::upload_bytes(std::span<const uint8_t> src, const Tensor& dst) {
  if (src.size() != dst.nbytes()) {
    return record_error(absl::InvalidArgumentError(str_cat(
        name_, ": upload_bytes: ", src.size(), " bytes for a tensor of ", dst.nbytes())));
  }
  make_current();
  // Through the pinned staging in chunks, each copy done before the staging is refilled.
  absl::Status s = GPU_STATUS(gpuStreamSynchronize(stream_));
  constexpr size_t kChunk = size_t{64} << 20;
  for (size_t done = 0; s.ok() && done < src.size(); done += kChunk) {
    const size_t n = std::min(kChunk, src.size() - done);
    s = ensure_pinned(n);
    if (!s.ok()) break;
    std::memcpy(pinned_, src.data() + done, n);
    s = GPU_STATUS(gpuMemcpyAsync(static_cast<uint8_t*>(dst.data) + done, pinned_, n,
                                  gpuMemcpyHostToDevice, stream_));
    if (s.ok()) s = GPU_STATUS(gpuStreamSynchronize(stream_));
  }
  record_error(std::move(s));
}

void GpuBackend::upload_f32(std::span<const float> src, const Tensor& dst) {
  make_current();
  // Small host tables (inv_freq): stage through pinned memory so the copy is truly async-safe.
  absl::Status s = ensure_pinned(src.size_bytes());
  if (s.ok()) s = GPU_STATUS(gpuStreamSynchronize(stream_));
  if (s.ok()) {
    std::memcpy(pinned_, src.data(), src.size_bytes());
    s = upload(pinned_, static_cast<int64_t>(src.size()), dst);
  }
  if (s.ok()) s = GPU_STATUS(gpuStreamSynchronize(stream_));
  record_error(std::move(s));
}

void GpuBackend::enable_peer_access(int peer) {
  if (std::find(peers_enabled_.begin(), peers_enabled_.end(), peer) != peers_enabled_.end()) return;
  peers_enabled_.push_back(peer);
  int can = 0;
  if (gpuDeviceCanAccessPeer(&can, device_, peer) != gpuSuccess || can == 0) {
    (void)gpuGetLastError();
    return;
  }
  const gpuError_t err = gpuDeviceEnablePeerAccess(peer, 0);
  if (err != gpuSuccess) {
    (void)gpuGetLastError();  // already enabled (another model on this process) is fine too
    if (err != gpuErrorPeerAccessAlreadyEnabled) {
      record_error(gpu::status_from(err, "gpuDeviceEnablePeerAccess", __FILE__, __LINE__));
    }
  }
}

void GpuBackend::copy_to(Backend& to, void* dst, const void* src, size_t bytes) {
  auto* peer = dynamic_cast<GpuBackend*>(&to);
  if (peer == nullptr) {
    record_error(absl::InvalidArgumentError(str_cat(name_, ": copy_to: ", to.name(), " is not a GPU")));
    return;
  }
  make_current();
  if (peer == this) {
    record_error(GPU_STATUS(gpuMemcpyAsync(dst, src, bytes, gpuMemcpyDeviceToDevice, stream_)));
    return;
  }
  enable_peer_access(peer->device_);
  record_error(GPU_STATUS(gpuMemcpyPeerAsync(dst, peer->device_, src, device_, bytes, stream_)));
  record_error(GPU_STATUS(gpuEventRecord(hop_done_, stream_)));
  // The peer's stream waits for the copy on the device; the host does not.
  peer->make_current();
  peer->record_error(GPU_STATUS(gpuStreamWaitEvent(peer->stream_, hop_done_, 0)));
}

// --- the step -------------------------------------------------------------------------------

size_t GpuBackend::step_metadata_elements(const StepBatch& batch) const {
  // An FP8 cache adds the widened prefill context's block tables, as large as the step's, to a
  // step with a prefill.
  bool prefill = false;
  for (size_t s = 0; kv_fp8_ && !prefill && s + 1 < batch.query_start.size(); ++s) {
    prefill = batch.query_start[s + 1] - batch.query_start[s] > 1;
  }
  const size_t tables = batch.block_tables.size() * (prefill ? 2 : 1);
  return metadata_elements(batch.token_ids.size(), batch.context_len.size(),
                           batch.logits_rows.size(), tables);
}

absl::StatusOr<bool> GpuBackend::reserve_step_memory(StepMemory& mem, size_t elements) {
  if (elements <= mem.capacity) {
    // The previous step's upload must have left the staging before it is overwritten.
    GPU_CHECK(gpuEventSynchronize(mem.copied));
    return false;
  }
  const size_t cap = std::max(elements, 2 * mem.capacity);
  GPU_CHECK(gpuStreamSynchronize(stream_));
  free_step_memory(mem);
  GPU_CHECK(gpuMalloc(reinterpret_cast<void**>(&mem.dev), cap * 4));
  GPU_CHECK(gpuMallocHost(reinterpret_cast<void**>(&mem.host), cap * 4));
  mem.capacity = cap;
  return true;
}

void GpuBackend::free_step_memory(StepMemory& mem) {
  if (mem.dev != nullptr) record_error(GPU_STATUS(gpuFree(mem.dev)));
  if (mem.host != nullptr) record_error(GPU_STATUS(gpuFreeHost(mem.host)));
  mem.dev = nullptr;
  mem.host = nullptr;
  mem.capacity = 0;
}

void GpuBackend::upload_step(const StepBatch& batch, StepMemory& mem) {
  const int32_t n = batch.num_tokens(), seqs = batch.num_seqs();
  int32_t* h = mem.host;
  size_t off = 0;
  // The arrays back to back, in a fixed order: their offsets depend only on the batch's sizes.
  auto put = [&](const int32_t* src, size_t count) {
    if (count > 0) std::memcpy(h + off, src, count * 4);
    const int32_t* dev = mem.dev + off;
    off += count;
    return dev;
  };
  // Per-step host lists in members, so that their capacity is reused step after step.
  std::vector<int32_t>& seq_of = step_seq_of_;
  std::vector<int32_t>& prefill_seqs = step_prefill_seqs_;
  std::vector<int32_t>& decode_seqs = step_decode_seqs_;
  seq_of.assign(n, 0);
  prefill_seqs.clear();
  decode_seqs.clear();
  gpu::DeviceStep d;
  for (int32_t s = 0; s < seqs; ++s) {
    const int32_t q_len = batch.query_start[s + 1] - batch.query_start[s];
    for (int32_t t = batch.query_start[s]; t < batch.query_start[s + 1] && t < n; ++t) seq_of[t] = s;
    if (q_len == 1) {
      decode_seqs.push_back(s);
      d.max_decode_context = std::max(d.max_decode_context, batch.context_len[s]);
    } else if (q_len > 1) {
      prefill_seqs.push_back(s);
      d.max_prefill_q = std::max(d.max_prefill_q, q_len);
    }
  }
  d.token_ids = put(batch.token_ids.data(), n);
  d.positions = put(batch.positions.data(), n);
  d.slot_mapping = put(batch.slot_mapping.data(), n);
  d.seq_of = put(seq_of.data(), n);
  d.query_start = put(batch.query_start.data(), batch.query_start.size());
  d.context_len = put(batch.context_len.data(), seqs);
  d.logits_rows = put(batch.logits_rows.data(), batch.logits_rows.size());
  d.prefill_seqs = put(prefill_seqs.data(), prefill_seqs.size());
  d.decode_seqs = put(decode_seqs.data(), decode_seqs.size());
  d.block_tables = put(batch.block_tables.data(), batch.block_tables.size());
  widened_parts_.clear();
  if (kv_fp8_ && !prefill_seqs.empty()) {
    plan_widened_prefill(batch, std::span<int32_t>(h + off, batch.block_tables.size()));
    widened_tables_ = mem.dev + off;
    off += batch.block_tables.size();
  }
  d.num_prefill_seqs = static_cast<int32_t>(prefill_seqs.size());
  d.num_decode_seqs = static_cast<int32_t>(decode_seqs.size());
  d.num_tokens = n;
  d.num_seqs = seqs;
  d.max_blocks = batch.max_blocks;
  d.num_logits = static_cast<int32_t>(batch.logits_rows.size());
  record_error(GPU_STATUS(gpuMemcpyAsync(mem.dev, mem.host, off * 4, gpuMemcpyHostToDevice, stream_)));
  record_error(GPU_STATUS(gpuEventRecord(mem.copied, stream_)));
  step_ = d;
}

void GpuBackend::plan_widened_prefill(const StepBatch& batch, std::span<int32_t> tables) {
  WidenedPart part;
  int32_t used = 0;  // scratch blocks the part holds
  const auto& seqs = step_prefill_seqs_;
  for (int32_t i = 0; i < static_cast<int32_t>(seqs.size()); ++i) {
    const int32_t s = seqs[i], context = batch.context_len[s];
    const int32_t blocks = (context + kv_block_size_ - 1) / kv_block_size_;
    if (blocks > kv_widened_blocks_) {
      record_error(absl::InvalidArgumentError(str_cat(
          name_, ": attention: a prefill context of ", context, " keys exceeds the ",
          static_cast<int64_t>(kv_widened_blocks_) * kv_block_size_,
          " the FP8 KV cache was prepared for (max_model_len)")));
      widened_parts_.clear();
      return;
    }
    if (part.count > 0 && used + blocks > kv_widened_blocks_) {
      widened_parts_.push_back(part);
      part = WidenedPart{};
      used = 0;
    }
    if (part.count == 0) part.first = i;
    int32_t* row = tables.data() + static_cast<size_t>(s) * batch.max_blocks;
    for (int32_t b = 0; b < blocks; ++b) row[b] = used + b;
    used += blocks;
    ++part.count;
    part.max_context = std::max(part.max_context, context);
  }
  if (part.count > 0) widened_parts_.push_back(part);
}

void GpuBackend::begin_step(const StepBatch& batch) {
  make_current();
  absl::StatusOr<bool> moved = reserve_step_memory(step_mem_, step_metadata_elements(batch));
  if (!moved.ok()) {
    record_error(moved.status());
    step_ = gpu::DeviceStep{};
    widened_parts_.clear();  // the ops queued next read the empty step: nothing to widen
    return;
  }
  upload_step(batch, step_mem_);
}

void GpuBackend::begin_graph_step(const StepBatch& batch, int32_t max_context) {
  make_current();
  // Every step of one graph key has the same sizes, so its arrays sit at the same offsets; only
  // the buffer moving (growing) changes their addresses, which makes every recording stale. It
  // starts at kGraphStepMinElements.
  const size_t elements = std::max(step_metadata_elements(batch), kGraphStepMinElements);
  absl::StatusOr<bool> moved = reserve_step_memory(graph_step_mem_, elements);
  if (!moved.ok()) {
    record_error(moved.status());
    step_ = gpu::DeviceStep{};
    widened_parts_.clear();  // the ops queued next read the empty step: nothing to widen
    return;
  }
  if (*moved) ++graph_generation_;
  upload_step(batch, graph_step_mem_);
  step_.max_decode_context = std::max(step_.max_decode_context, max_context);
}

void GpuBackend::embedding(const Tensor& table, int64_t first_id, float scale, const Tensor& out) {
  mark("embedding");
  if (!check_dtype(table, dtype_, "embedding", "table") ||
      !check_dtype(out, dtype_, "embedding", "out")) {
    return;
  }
  record_error(GPU_STATUS(launch_as(dtype_, [&]<typename T>() {
    return gpu::embedding(elements<T>(table), first_id, table.dim(0), table.dim(1),
                          step_.token_ids, step_.num_tokens, scale, elements<T>(out), stream_);
  })));
}

void GpuBackend::rms_norm(const Tensor& x, const Tensor& w, NormSpec norm, const Tensor& out) {
  mark("rms_norm");
  if (check_dtype(x, dtype_, "rms_norm", "x")) normalize(nullptr, x, w, norm, out, "rms_norm");
}

void GpuBackend::add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& w,
                              NormSpec norm, const Tensor& out) {
  mark("add_rms_norm");
  if (check_dtype(residual, dtype_, "add_rms_norm", "residual") &&
      check_dtype(x, dtype_, "add_rms_norm", "x")) {
    normalize(&residual, x, w, norm, out, "add_rms_norm");
  }
}

void GpuBackend::normalize(const Tensor* residual, const Tensor& x, const Tensor& w,
                           NormSpec norm, const Tensor& out, const char* op) {
  if (!check_dtype(w, dtype_, op, "w")) return;
  const bool fp8 = out.dtype == DType::kF8_E4M3;
  if (fp8 ? !check_fp8_activation(out, x.dim(0), x.dim(1), op) : !check_dtype(out, dtype_, op, "out")) {
    return;
  }
  record_error(GPU_STATUS(launch_as(dtype_, [&]<typename T>() {
    T* const sum = residual != nullptr ? elements<T>(*residual) : nullptr;
    return fp8 ? gpu::rms_norm_fp8(sum, elements<T>(x), elements<T>(w), x.dim(0), x.dim(1),
                                   norm.eps, norm.weight_offset, fp8_rows(out), stream_)
               : gpu::rms_norm(sum, elements<T>(x), elements<T>(w), x.dim(0), x.dim(1), norm.eps,
                               norm.weight_offset, elements<T>(out), stream_);
  })));
}

bool GpuBackend::check_fp8_activation(const Tensor& out, int64_t rows, int64_t width,
                                      const char* op) {
  if (absl::Status s = fp8_available(op); !s.ok()) {
    record_error(std::move(s));
    return false;
  }
  if (out.scale == nullptr || out.rank != 2 || out.dim(0) != rows || out.dim(1) != width) {
    record_error(absl::InvalidArgumentError(str_cat(
        name_, ": ", op, ": an FP8 out of ", out.rank == 2 ? out.dim(0) : 0, " x ",
        out.rank == 2 ? out.dim(1) : 0, out.scale == nullptr ? " without row scales" : "",
        " for ", rows, " rows of ", width, " (want codes of that shape and a scale per row)")));
    return false;
  }
  return true;
}

gpu::Fp8Rows GpuBackend::fp8_rows(const Tensor& t) const {
  return gpu::Fp8Rows{t.as<uint8_t>(), t.scale, gpu::fp8_encoding_of(gpu::fp8_gemm_dtype())};
}

void GpuBackend::linear(const Tensor& x, const Tensor& w, const Tensor& out) {
  if (profiler_ != nullptr) {
    mark(str_cat("linear ", w.dtype == DType::kF8_E4M3 ? "fp8 " : "", w.dim(0), "x", w.dim(1),
                 out.dtype == DType::kF32 ? " (fp32 out)" : ""));
  }
  if (w.dtype == DType::kF8_E4M3) return linear_fp8(x, w, out);
  if (!check_dtype(x, dtype_, "linear", "x") || !check_dtype(w, dtype_, "linear", "w")) {
    return;
  }
  const GemmDType dtype = gemm_dtype_of(dtype_);
  gpu::GemmShape shape{x.dim(0), w.dim(0), w.dim(1), dtype, dtype};
  if (out.dtype == DType::kF32) {
    shape.out = GemmDType::kF32;
  } else if (!check_dtype(out, dtype_, "linear", "out")) {
    return;
  }
  if (shape.m == 0) return;  // no rows (a step without logits, say): nothing to tune or run
  static const gpu::Gemm::Solution kDefault;
  const gpu::Gemm::Solution& solution =
      gemm_solutions_ != nullptr ? gemm_solution_cache_.solution(*gemm_, *gemm_solutions_, shape)
                                 : kDefault;
  record_error(gemm_->run(solution, shape, x.data, w.data, out.data, stream_));
}

absl::Status GpuBackend::fp8_available(std::string_view key) const {
#if defined(TESSERA_CUDA)
  if (compute_capability_ >= 89) return absl::OkStatus();
  return absl::FailedPreconditionError(str_cat(
      key, ": fp8 needs FP8 tensor cores (compute capability 8.9 or later); ", name_, " has ",
      compute_capability_ / 10, ".", compute_capability_ % 10));
#else
  return absl::FailedPreconditionError(str_cat(
      key, ": fp8 is not available on ROCm yet (", name_,
      "): the FP8 paths are built but have not run on a CDNA3 GPU"));
#endif
}

absl::Status GpuBackend::supports(Quantization q) const {
  if (q == Quantization::kNone) return absl::OkStatus();
  return fp8_available("quantization");
}

absl::Status GpuBackend::prepare_kv_cache(DType dtype, const AttentionShape& shape,
                                          int32_t block_size, int32_t max_context) {
  kv_fp8_ = false;
  kv_widened_.reset();
  if (dtype == dtype_) return absl::OkStatus();
  if (dtype != DType::kF8_E4M3) {
    return Backend::prepare_kv_cache(dtype, shape, block_size, max_context);
  }
  TESSERA_RETURN_IF_ERROR(fp8_available("kv_cache_dtype"));
  const int32_t group = shape.num_kv_heads > 0 ? shape.num_heads / shape.num_kv_heads : 0;
  if (shape.num_kv_heads <= 0 || shape.num_heads % shape.num_kv_heads != 0 ||
      !gpu::decode_kernel_supported(shape.head_dim, group) ||
      !gpu::prefill_kernel_supported(shape.head_dim)) {
    return absl::InvalidArgumentError(str_cat(
        "kv_cache_dtype: fp8 needs head_dim 64, 128 or 256 and at most ", gpu::kMaxDecodeGroup,
        " query heads per KV head (the fast attention kernels'); the model has head_dim ",
        shape.head_dim, ", ", shape.num_heads, " query and ", shape.num_kv_heads, " KV heads"));
  }
  if (block_size <= 0 || max_context <= 0) {
    return absl::InvalidArgumentError(str_cat("kv_cache_dtype: fp8: blocks of ", block_size,
                                              " tokens for contexts of ", max_context,
                                              " (block_size and max_model_len must be positive)"));
  }
  make_current();
  kv_block_size_ = block_size;
  kv_row_ = static_cast<int64_t>(shape.num_kv_heads) * shape.head_dim;
  kv_widened_blocks_ = (max_context + block_size - 1) / block_size;
  const size_t bytes = 2 * static_cast<size_t>(kv_widened_blocks_) * block_size *
                       shape.num_kv_heads * shape.head_dim * element_size(dtype_);
  absl::StatusOr<DeviceBuffer> widened = allocate(bytes);
  if (!widened.ok()) {
    return absl::ResourceExhaustedError(str_cat(
        "kv_cache_dtype: fp8: the 16-bit copy prefill attends over (", bytes, " bytes for a ",
        max_context, "-token context) does not fit on ", name_,
        "; lower max_model_len: ", widened.status().message()));
  }
  kv_widened_ = *std::move(widened);
  kv_fp8_ = true;
  return absl::OkStatus();
}

gpu::Fp8KvPools GpuBackend::fp8_pools(const KvLayerView& cache) const {
  return gpu::Fp8KvPools{static_cast<const uint8_t*>(cache.k.data),
                         static_cast<const uint8_t*>(cache.v.data), cache.k_scale, cache.v_scale,
                         gpu::fp8_encoding_of(gpu::fp8_gemm_dtype())};
}

void GpuBackend::quantize_fp8(const Tensor& w, const Tensor& codes, const Tensor& scale) {
  if (absl::Status s = supports(Quantization::kFp8); !s.ok()) return record_error(s);
  if (!check_dtype(w, dtype_, "quantize_fp8", "w") ||
      !check_dtype(codes, DType::kF8_E4M3, "quantize_fp8", "codes") ||
      !check_dtype(scale, DType::kF32, "quantize_fp8", "scale")) {
    return;
  }
  if (w.rank != 2 || codes.numel() != w.numel() || scale.numel() != w.dim(0)) {
    return record_error(absl::InvalidArgumentError(str_cat(
        name_, ": quantize_fp8: codes hold ", codes.numel(), " elements and scale ",
        scale.numel(), " for a w of ", w.numel(), " in ", w.rank == 2 ? w.dim(0) : 0,
        " rows (want a 2-D w, as many codes, a scale per row)")));
  }
  make_current();
  record_error(GPU_STATUS(launch_as(dtype_, [&]<typename T>() {
    return gpu::quantize_fp8_per_row(elements<T>(w), w.dim(0), w.dim(1),
                                     gpu::fp8_encoding_of(gpu::fp8_gemm_dtype()),
                                     codes.as<uint8_t>(), scale.as<float>(), stream_);
  })));
}

absl::Status GpuBackend::ensure_fp8_activations(int64_t rows, int64_t cols) {
  const size_t codes = static_cast<size_t>(rows * cols), scales = static_cast<size_t>(rows);
  if (fp8_activations_ != nullptr && codes <= fp8_code_capacity_ &&
      scales <= fp8_scale_capacity_) {
    return absl::OkStatus();
  }
  // Codes, then the row scales, each rounded up to 256 bytes (cuBLASLt wants aligned scales).
  auto round = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const size_t want_codes = round(std::max(codes, 2 * fp8_code_capacity_));
  const size_t want_scales = std::max(scales, 2 * fp8_scale_capacity_);
  TESSERA_RETURN_IF_ERROR(reallocate_scratch(reinterpret_cast<void**>(&fp8_activations_),
                                             want_codes + round(4 * want_scales)));
  fp8_code_capacity_ = want_codes;
  fp8_scale_capacity_ = want_scales;
  return absl::OkStatus();
}

gpu::GemmShape GpuBackend::fp8_linear_shape(int64_t rows, const Tensor& w) const {
  return gpu::GemmShape{rows, w.dim(0), w.dim(1), gpu::fp8_gemm_dtype(), gemm_dtype_of(dtype_),
                        /*rowwise=*/true};
}

const gpu::Gemm::Solution& GpuBackend::fp8_solution(const gpu::GemmShape& shape) {
  return gemm_solutions_ != nullptr
             ? gemm_solution_cache_.solution(*gemm_, *gemm_solutions_, shape)
             : gemm_solution_cache_.untuned(*gemm_, shape);
}

bool GpuBackend::fp8_activations(const Tensor& w, int64_t rows) {
  if (w.dtype != DType::kF8_E4M3 || w.rank != 2 || rows <= 0) return false;
  const gpu::GemmShape shape = fp8_linear_shape(rows, w);
  return !gpu::Gemm::reads_unquantized_x(fp8_solution(shape), shape);
}

void GpuBackend::linear_fp8(const Tensor& x, const Tensor& w, const Tensor& out) {
  if (w.scale == nullptr) {
    return record_error(absl::InvalidArgumentError(
        str_cat(name_, ": linear: an FP8 weight without its scale")));
  }
  const bool x_codes = x.dtype == DType::kF8_E4M3;
  if (x_codes ? !check_fp8_activation(x, x.dim(0), w.dim(1), "linear")
              : !check_dtype(x, dtype_, "linear", "x")) {
    return;
  }
  if (!check_dtype(out, dtype_, "linear", "out")) return;
  const gpu::GemmShape shape = fp8_linear_shape(x.dim(0), w);
  if (shape.m == 0) return;
  const gpu::Gemm::Solution& solution = fp8_solution(shape);
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool unquantized = gpu::Gemm::reads_unquantized_x(solution, shape);
  if (!x_codes && unquantized && aligned(x.data) && aligned(w.data)) {
    record_error(gemm_->run(solution, shape, x.data, w.data, out.data, stream_,
                            gpu::GemmScales{.w = w.scale}));
    return;
  }
  // The GEMM reads FP8 x: as its producer wrote it (fp8_activations), or quantized here. Where the
  // solution is one that reads 16-bit x (operands less aligned than it reads, say, or codes asked
  // for at fewer rows than it was picked for), the library's Default.
  static const gpu::Gemm::Solution kDefault;
  const gpu::Gemm::Solution& run = unquantized ? kDefault : solution;
  const void* codes = x.data;
  const float* x_scales = x.scale;
  if (!x_codes || !aligned(codes) || !aligned(x_scales)) {
    if (absl::Status s = ensure_fp8_activations(shape.m, shape.k); !s.ok()) {
      return record_error(std::move(s));
    }
    float* const scales = reinterpret_cast<float*>(fp8_activations_ + fp8_code_capacity_);
    record_error(GPU_STATUS(
        x_codes ? copy_fp8_rows(x, scales)
                : launch_as(dtype_, [&]<typename T>() {
                    return gpu::quantize_fp8_per_row(elements<T>(x), shape.m, shape.k,
                                                     gpu::fp8_encoding_of(shape.dtype),
                                                     fp8_activations_, scales, stream_);
                  })));
    codes = fp8_activations_;
    x_scales = scales;
  }
  record_error(gemm_->run(run, shape, codes, w.data, out.data, stream_,
                          gpu::GemmScales{.x = x_scales, .w = w.scale}));
}

gpuError_t GpuBackend::copy_fp8_rows(const Tensor& x, float* scales) {
  // Row views of an FP8 activation (a micro-batch's rows) may start off the 16-byte alignment
  // the library's scaled GEMMs read at: copied to the aligned scratch.
  if (const gpuError_t e = gpuMemcpyAsync(fp8_activations_, x.data, x.nbytes(),
                                          gpuMemcpyDeviceToDevice, stream_);
      e != gpuSuccess) {
    return e;
  }
  return gpuMemcpyAsync(scales, x.scale, x.dim(0) * sizeof(float), gpuMemcpyDeviceToDevice,
                        stream_);
}

void GpuBackend::rope_and_cache(const Tensor& qkv, const Tensor& inv_freq, AttentionShape shape,
                                const QkvPrologue& prologue, const KvLayerView& cache) {
  mark("rope_and_cache");
  const DType cache_dtype = kv_fp8_ ? DType::kF8_E4M3 : dtype_;
  if (!check_dtype(qkv, dtype_, "rope_and_cache", "qkv") ||
      !check_dtype(inv_freq, DType::kF32, "rope_and_cache", "inv_freq") ||
      !check_dtype(cache.k, cache_dtype, "rope_and_cache", "k cache") ||
      !check_dtype(cache.v, cache_dtype, "rope_and_cache", "v cache")) {
    return;
  }
  bool ok = true;
  const auto check = [&](const Tensor* t, const char* what) {
    if (t != nullptr) ok = check_dtype(*t, dtype_, "rope_and_cache", what) && ok;
  };
  check(prologue.bias, "bias");
  check(prologue.q_norm, "q_norm");
  check(prologue.k_norm, "k_norm");
  if (!ok) return;
  record_error(GPU_STATUS(launch_as(dtype_, [&]<typename T>() {
    const auto data = [](const Tensor* t) { return t != nullptr ? elements<T>(*t) : nullptr; };
    const gpu::QkvPrologueArgs<T> args{data(prologue.bias), data(prologue.q_norm),
                                       data(prologue.k_norm), prologue.norm.eps,
                                       prologue.norm.weight_offset};
    const gpu::Fp8KvPools pools = fp8_pools(cache);
    gpu::KvCacheWrite<T> write;
    write.amax = cache.amax;
    if (kv_fp8_) {
      write.codes = &pools;
    } else {
      write.k = elements<T>(cache.k);
      write.v = elements<T>(cache.v);
    }
    return gpu::rope_and_cache(elements<T>(qkv), inv_freq.as<float>(), step_, shape.num_heads,
                               shape.num_kv_heads, shape.head_dim,
                               shape.rope_style == RopeStyle::kInterleaved, args, write, stream_);
  })));
}

void GpuBackend::attention(const Tensor& qkv, const KvLayerView& cache, AttentionShape shape,
                           const AttentionSpec& spec, const Tensor& out) {
  mark("attention (prefill)");
  if (!check_dtype(qkv, dtype_, "attention", "qkv") ||
      !check_dtype(cache.k, kv_fp8_ ? DType::kF8_E4M3 : dtype_, "attention", "k cache") ||
      !check_dtype(out, dtype_, "attention", "out")) {
    return;
  }
  if (shape.head_dim > gpu::kMaxHeadDim) {
    record_error(absl::InvalidArgumentError(str_cat(name_, ": attention: head_dim ", shape.head_dim,
                                              " exceeds ", gpu::kMaxHeadDim)));
    return;
  }
  const int32_t bs = cache.block_size(), h = shape.num_heads, kvh = shape.num_kv_heads,
                d = shape.head_dim;
  // Decode sequences go to the split-KV kernel when it takes this shape; prefill sequences to the
  // tensor-core kernel when both take it, else everything left to the generic kernel. Every kernel
  // takes soft-capping and sliding windows.
  const float scale = spec.scale;
  const bool fast_decode = kvh > 0 && h % kvh == 0 && gpu::decode_kernel_supported(d, h / kvh);
  const bool fast_prefill = fast_decode && gpu::prefill_kernel_supported(d);
  if (kv_fp8_ && (!fast_prefill || bs != kv_block_size_ || kvh * d != kv_row_)) {
    // prepare_kv_cache refused shapes the fast kernels do not take.
    record_error(absl::InvalidArgumentError(str_cat(
        name_, ": attention: an FP8 KV cache of blocks of ", bs, " tokens, head_dim ", d, ", ", h,
        " query and ", kvh, " KV heads is not the one prepared")));
    return;
  }
  record_error(GPU_STATUS(launch_as(dtype_, [&]<typename T>() {
    const T* q = elements<T>(qkv);
    if (kv_fp8_) {
      return attend_fp8_prefill(q, fp8_pools(cache), shape, spec, elements<T>(out));
    }
    const T *k = elements<T>(cache.k), *v = elements<T>(cache.v);
    return fast_prefill ? gpu::attention_prefill(q, k, v, bs, step_, h, kvh, d, scale,
                                                 /*causal=*/true, spec.softcap, spec.window,
                                                 elements<T>(out), stream_)
                        : gpu::attention_generic(q, k, v, bs, step_, h, kvh, d, scale,
                                                 spec.softcap, spec.window,
                                                 /*skip_decode=*/fast_decode, elements<T>(out),
                                                 stream_);
  })));
  if (!fast_decode || step_.num_decode_seqs == 0) return;
  mark("attention (decode)");
  // A windowed layer's splits cut only the window (its last keys).
  const int32_t span = spec.window > 0 ? std::min(step_.max_decode_context, spec.window)
                                       : step_.max_decode_context;
  const gpu::DecodeSplits splits =
      gpu::plan_decode_splits(step_.num_decode_seqs, kvh, span, multiprocessors_);
  const size_t parts = static_cast<size_t>(step_.num_decode_seqs) * h * splits.num_splits;
  if (splits.num_splits > 1) {
    if (absl::Status s = ensure_decode_workspace(parts * (d + 2)); !s.ok()) {
      record_error(std::move(s));
      return;
    }
  }
  record_error(GPU_STATUS(launch_as(dtype_, [&]<typename T>() {
    if (kv_fp8_) {
      return gpu::attention_decode(elements<T>(qkv), fp8_pools(cache), bs, step_, h, kvh, d,
                                   scale, spec.softcap, spec.window, splits, decode_part_,
                                   decode_part_ + parts * d, elements<T>(out), stream_);
    }
    return gpu::attention_decode(elements<T>(qkv), elements<T>(cache.k), elements<T>(cache.v), bs,
                                 step_, h, kvh, d, scale, spec.softcap, spec.window, splits,
                                 decode_part_, decode_part_ + parts * d, elements<T>(out), stream_);
  })));
}

template <typename T>
gpuError_t GpuBackend::attend_fp8_prefill(const T* qkv, const gpu::Fp8KvPools& pools,
                                          AttentionShape shape, const AttentionSpec& spec,
                                          T* out) {
  const int32_t bs = kv_block_size_, h = shape.num_heads, kvh = shape.num_kv_heads,
                d = shape.head_dim;
  T* k_widened = static_cast<T*>(kv_widened_.data());
  T* v_widened = k_widened + static_cast<size_t>(kv_widened_blocks_) * bs * kvh * d;
  for (const WidenedPart& p : widened_parts_) {
    gpu::DeviceStep part = step_;
    part.prefill_seqs += p.first;
    part.num_prefill_seqs = p.count;
    gpuError_t err = gpu::widen_kv_context(pools, bs, part, p.max_context, widened_tables_, kvh,
                                           d, k_widened, v_widened, stream_);
    if (err != gpuSuccess) return err;
    part.block_tables = widened_tables_;
    err = gpu::attention_prefill(qkv, k_widened, v_widened, bs, part, h, kvh, d, spec.scale,
                                 /*causal=*/true, spec.softcap, spec.window, out, stream_);
    if (err != gpuSuccess) return err;
  }
  return gpuSuccess;
}

absl::Status GpuBackend::ensure_decode_workspace(size_t floats) {
  if (decode_part_ != nullptr && floats <= decode_part_floats_) return absl::OkStatus();
  // At least twice what it held, so that contexts growing step by step reallocate (and stale the
  // recordings) rarely.
  const size_t want = std::max(floats, 2 * decode_part_floats_);
  TESSERA_RETURN_IF_ERROR(
      reallocate_scratch(reinterpret_cast<void**>(&decode_part_), want * sizeof(float)));
  decode_part_floats_ = want;
  return absl::OkStatus();
}

absl::Status GpuBackend::reallocate_scratch(void** buffer, size_t bytes) {
  if (*buffer != nullptr) {
    GPU_CHECK(gpuStreamSynchronize(stream_));  // queued work may still read it
    GPU_CHECK(gpuFree(*buffer));
    *buffer = nullptr;
    ++graph_generation_;  // recordings point at the old buffer
  }
  GPU_CHECK(gpuMalloc(buffer, bytes));
  return absl::OkStatus();
}

void GpuBackend::gated_activation(const Tensor& gate_up, Activation act, const Tensor& out) {
  mark("gated_activation");
  if (!check_dtype(gate_up, dtype_, "gated_activation", "gate_up")) return;
  const bool fp8 = out.dtype == DType::kF8_E4M3;
  const int64_t rows = gate_up.dim(0), inter = gate_up.dim(1) / 2;
  if (fp8 ? !check_fp8_activation(out, rows, inter, "gated_activation")
          : !check_dtype(out, dtype_, "gated_activation", "out")) {
    return;
  }
  const bool gelu = act == Activation::kGeluTanh;
  record_error(GPU_STATUS(launch_as(dtype_, [&]<typename T>() {
    return fp8 ? gpu::gated_activation_fp8(elements<T>(gate_up), rows, inter, gelu,
                                           fp8_rows(out), stream_)
               : gpu::gated_activation(elements<T>(gate_up), rows, out.dim(1), gelu,
                                       elements<T>(out), stream_);
  })));
}

void GpuBackend::soft_cap(const Tensor& x, float cap) {
  mark("soft_cap");
  if (!check_dtype(x, DType::kF32, "soft_cap", "x")) return;
  record_error(GPU_STATUS(gpu::soft_cap(x.as<float>(), x.numel(), cap, stream_)));
}

void GpuBackend::gather_logit_rows(const Tensor& x, const Tensor& out) {
  mark("gather_logit_rows");
  if (!check_dtype(x, dtype_, "gather_logit_rows", "x") ||
      !check_dtype(out, dtype_, "gather_logit_rows", "out")) {
    return;
  }
  record_error(GPU_STATUS(launch_as(dtype_, [&]<typename T>() {
    return gpu::gather_rows(elements<T>(x), x.dim(1), step_.logits_rows, step_.num_logits,
                            elements<T>(out), stream_);
  })));
}

void GpuBackend::sample(const Tensor& logits, std::span<const SamplingRow> rows,
                        const Tensor& tokens) {
  mark("sample");
  if (!check_dtype(logits, DType::kF32, "sample", "logits") ||
      !check_dtype(tokens, DType::kI32, "sample", "tokens")) {
    return;
  }
  const int64_t n = static_cast<int64_t>(rows.size());
  if (logits.dim(0) != n || tokens.numel() != n) {
    record_error(absl::InvalidArgumentError(str_cat(name_, ": sample: ", n, " rows of parameters for ",
                                              logits.dim(0), " logit rows and ", tokens.numel(),
                                              " tokens")));
    return;
  }
  // The draw's bits come from the one host definition; the kernel gets them with the filters.
  std::vector<gpu::SampleRow>& device_rows = sample_rows_;
  device_rows.resize(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    const SamplingRow& s = rows[r];
    device_rows[r] = gpu::SampleRow{s.temperature, s.top_k, s.top_p, s.min_p,
                                    sampling_draw_bits(s.seed, s.counter)};
  }
  record_error(GPU_STATUS(gpu::sample(logits.as<float>(), logits.dim(1), device_rows.data(),
                                static_cast<int32_t>(n), tokens.as<int32_t>(), stream_)));
}

uint64_t GpuBackend::solutions_version() const {
  return gemm_solutions_ != nullptr ? gemm_solutions_->version() : 0;
}

void GpuBackend::release_graphs() {
  make_current();
  // The recordings may be in flight; a failure here is the step's to report (synchronize()).
  record_error(GPU_STATUS(gpuStreamSynchronize(stream_)));
  for (auto& [key, graph] : graphs_) drop_graph(graph);
  graphs_.clear();
}

void GpuBackend::drop_graph(StepGraph& g) {
  if (g.exec != nullptr) (void)gpuGraphExecDestroy(g.exec);
  g.exec = nullptr;
  g.ran = false;
}

absl::Status GpuBackend::run_graph(uint64_t key, absl::FunctionRef<void()> ops) {
  make_current();
  if (profiler_ != nullptr) {
    // Profiling times each op: no recordings, whose ops it could not tell apart.
    ops();
    return absl::OkStatus();
  }
  StepGraph& g = graphs_[key];
  const bool current = g.generation == graph_generation_ && g.solutions == solutions_version();
  if (!current) drop_graph(g);
  if (g.exec != nullptr) {
    ++graph_replays_;
    return GPU_STATUS(gpuGraphLaunch(g.exec, stream_));
  }
  if (!g.ran || g.unrecordable || !step_error().ok()) {
    // Directly: buffers grow and GEMMs are tuned now, so the next run records what stays. A run
    // that met an error proves nothing about sizes: it does not count.
    ops();
    g.ran = step_error().ok();
    g.generation = graph_generation_;
    g.solutions = solutions_version();
    return absl::OkStatus();
  }
  gpuGraph_t graph = nullptr;
  absl::Status s = GPU_STATUS(gpuStreamBeginCapture(stream_, gpuStreamCaptureModeThreadLocal));
  if (s.ok()) {
    ops();
    s = GPU_STATUS(gpuStreamEndCapture(stream_, &graph));
  }
  if (s.ok() && step_error().ok()) s = GPU_STATUS(gpuGraphInstantiate(&g.exec, graph));
  if (graph != nullptr) (void)gpuGraphDestroy(graph);
  if (!s.ok() || !step_error().ok()) {
    // Nothing of the step ran. It runs directly now, and the key from now on, without a graph.
    // The step's error was OK before the recording (else the direct path runs): clear it.
    const absl::Status recorded = take_step_error();
    const absl::Status failed = !recorded.ok() ? recorded : s;
    (void)gpuGetLastError();
    g.exec = nullptr;
    g.unrecordable = true;
    spdlog::warn("{}: recording a decode step graph failed; this batch shape runs without one: {}",
                 name_, std::string(failed.message()));
    ops();
    return absl::OkStatus();
  }
  ++graphs_recorded_;
  return GPU_STATUS(gpuGraphLaunch(g.exec, stream_));
}

absl::Status GpuBackend::synchronize() {
  make_current();
  if (profiler_ != nullptr) profiler_->end_step(stream_);
  const gpuError_t err = gpuStreamSynchronize(stream_);
  if (profiler_ != nullptr && err == gpuSuccess) {
    if (absl::Status s = profiler_->collect(); !s.ok()) {
      // A profile is for measuring: losing it never fails a step.
      spdlog::warn("{}: the op profile stops: {}", name_, std::string(s.message()));
      profiler_.reset();
    }
  }
  if (err != gpuSuccess) {
    record_error(absl::InternalError(str_cat(name_, ": stream synchronize failed: ", gpuGetErrorName(err),
                                       " (", gpuGetErrorString(err), ")")));
  }
  // A failed step leaves the error for the caller once; the next step starts clean.
  return take_step_error();
}

}  // namespace tessera
