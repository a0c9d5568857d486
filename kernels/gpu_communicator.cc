#include "kernels/gpu_communicator.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "base/str_cat.h"
#include "kernels/gpu.h"
#include "kernels/element_dispatch.h"
#include "kernels/gpu_backend.h"
#include "kernels/gpu_ops.h"
#include "kernels/one_shot_all_reduce.h"
#include "spdlog/spdlog.h"

namespace tessera {

namespace {

// --- the library ------------------------------------------------------------------------------
// The few declarations of nccl.h used here, so that neither build needs the header (RCCL's
// rccl/rccl.h declares the same functions and values). Enums are passed as int (the C ABI of
// NCCL's enums); the values are NCCL's since 2.x: ncclSuccess 0, ncclInProgress 7, ncclSum 0,
// ncclFloat16 6, ncclFloat32 7, ncclBfloat16 9.
struct NcclComm;
using NcclResult = int;
constexpr NcclResult kNcclSuccess = 0;
constexpr NcclResult kNcclInProgress = 7;
constexpr int kNcclSum = 0;
constexpr int kNcclFloat16 = 6;
constexpr int kNcclFloat32 = 7;
constexpr int kNcclBfloat16 = 9;
constexpr int kMinNcclVersion = 21000;  // 2.10: bf16

#if defined(TESSERA_HIP)
constexpr char kLibraryName[] = "rccl";
constexpr char kDefaultLibrary[] = "librccl.so.1";
#else
constexpr char kLibraryName[] = "nccl";
constexpr char kDefaultLibrary[] = "libnccl.so.2";
#endif

struct NcclApi {
  NcclResult (*get_version)(int*) = nullptr;
  NcclResult (*comm_init_all)(NcclComm**, int, const int*) = nullptr;
  NcclResult (*comm_destroy)(NcclComm*) = nullptr;
  NcclResult (*all_reduce)(const void*, void*, size_t, int, int, NcclComm*, gpuStream_t) = nullptr;
  NcclResult (*send)(const void*, size_t, int, int, NcclComm*, gpuStream_t) = nullptr;
  NcclResult (*recv)(void*, size_t, int, int, NcclComm*, gpuStream_t) = nullptr;
  NcclResult (*group_start)() = nullptr;
  NcclResult (*group_end)() = nullptr;
  const char* (*get_error_string)(NcclResult) = nullptr;
  NcclResult (*comm_get_async_error)(NcclComm*, NcclResult*) = nullptr;
  int version = 0;
  std::string path;  // what was opened

  std::string version_string() const {
    return str_cat(version / 10000, ".", version / 100 % 100, ".", version % 100);
  }
  absl::Status status(NcclResult r, const char* what) const {
    return absl::InternalError(
        str_cat(kLibraryName, " ", what, " failed: ", get_error_string(r), " (", r, ")"));
  }
};

absl::StatusOr<NcclApi> open_nccl(const std::string& path, bool from_env) {
  // Never closed: communicators and NCCL's threads live until the process ends.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(str_cat(
        "tensor parallelism needs ", kLibraryName, ": dlopen(\"", path, "\") failed: ",
        why != nullptr ? why : "unknown error", from_env ? " (from TESSERA_NCCL_LIBRARY)" : "",
        "; set TESSERA_NCCL_LIBRARY to the library's path, or add its folder to LD_LIBRARY_PATH",
        " (PyTorch's wheels ship libnccl.so.2 under site-packages/nvidia/nccl/lib)"));
  }
  NcclApi api;
  api.path = path;
  absl::Status missing = absl::OkStatus();
  const auto resolve = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (fn == nullptr && missing.ok()) {
      missing = absl::FailedPreconditionError(
          str_cat(path, " has no ", name, ": not a usable ", kLibraryName, " library"));
    }
  };
  resolve(api.get_version, "ncclGetVersion");
  resolve(api.comm_init_all, "ncclCommInitAll");
  resolve(api.comm_destroy, "ncclCommDestroy");
  resolve(api.all_reduce, "ncclAllReduce");
  resolve(api.send, "ncclSend");
  resolve(api.recv, "ncclRecv");
  resolve(api.group_start, "ncclGroupStart");
  resolve(api.group_end, "ncclGroupEnd");
  resolve(api.get_error_string, "ncclGetErrorString");
  resolve(api.comm_get_async_error, "ncclCommGetAsyncError");
  if (!missing.ok()) return missing;
  if (NcclResult r = api.get_version(&api.version); r != kNcclSuccess) {
    return api.status(r, "ncclGetVersion");
  }
  if (api.version < kMinNcclVersion) {
    return absl::FailedPreconditionError(str_cat(path, ": ", kLibraryName, " version code ",
                                                 api.version, " is older than 2.10 (bf16)"));
  }
  return api;
}

// Each library opened once per process (TESSERA_NCCL_LIBRARY, else the default name); the
// outcome, library or error, is kept.
absl::StatusOr<const NcclApi*> nccl_api() {
  const char* env = std::getenv("TESSERA_NCCL_LIBRARY");
  const bool from_env = env != nullptr && *env != '\0';
  const std::string path = from_env ? env : kDefaultLibrary;
  struct Opened {
    std::string path;
    std::unique_ptr<const absl::StatusOr<NcclApi>> api;
  };
  static std::mutex mu;
  static auto* const opened = new std::vector<Opened>();
  std::lock_guard<std::mutex> lock(mu);
  auto it =
      std::find_if(opened->begin(), opened->end(), [&](const Opened& o) { return o.path == path; });
  if (it == opened->end()) {
    opened->push_back(
        {path, std::make_unique<const absl::StatusOr<NcclApi>>(open_nccl(path, from_env))});
    it = opened->end() - 1;
  }
  if (!it->api->ok()) return it->api->status();
  return &**it->api;
}

std::string kib(size_t bytes) {
  return bytes % 1024 == 0 ? str_cat(bytes / 1024, " KiB") : str_cat(bytes, " B");
}

// --- the group --------------------------------------------------------------------------------

// The one-shot's staging half (bytes): messages past it go in chunks (forced one-shot only).
constexpr size_t kOneShotCapacity = size_t{2} << 20;
// Blocks per one-shot launch (at most the smallest SM count of the group).
constexpr int kOneShotBlocks = 36;
// The sizes timed at creation (auto).
constexpr size_t kProbeSizes[] = {4 << 10,   16 << 10,  64 << 10, 128 << 10,
                                  256 << 10, 512 << 10, 1 << 20};

// What the ranks of one group share; the last communicator destroyed releases it.
struct Group {
  std::vector<GpuBackend*> backends;
  const NcclApi* nccl = nullptr;  // null for a single rank
  std::vector<NcclComm*> comms;
  AllReduceMode mode = AllReduceMode::kAuto;
  bool one_shot = false;      // peer access between every pair, at most 8 ranks
  std::string one_shot_off;   // why not, when not
  size_t one_shot_limit = 0;  // all_reduce_sum's one-shot up to here (bytes)
  size_t fused_limit = 0;     // all_reduce_add_rms_norm fused up to here (bytes of x)
  int blocks = kOneShotBlocks;
  gpu::OneShotPeers peers;
  std::vector<DeviceBuffer> buffers;  // every rank's staging, flags and epochs
  std::vector<uint32_t*> epochs;      // per rank
  float* gather_scratch = nullptr;    // rank 0's, for the other ranks' parts (in buffers)
  size_t gather_scratch_floats = 0;
  std::string description;

  ~Group() {
    for (GpuBackend* b : backends) {
      b->make_current();
      (void)gpuStreamSynchronize(b->stream());
    }
    if (nccl != nullptr) {
      for (NcclComm* c : comms) (void)nccl->comm_destroy(c);
    }
    buffers.clear();
  }

  int size() const { return static_cast<int>(backends.size()); }

  void describe() {
    if (size() == 1) {
      description = "single rank";
      return;
    }
    const std::string lib = str_cat(kLibraryName, " ", nccl->version_string());
    if (!one_shot) {
      description = str_cat(lib, " (one-shot off: ", one_shot_off, ")");
      return;
    }
    if (one_shot_limit == std::numeric_limits<size_t>::max()) {
      description = str_cat("one-shot for every all-reduce, fused with the residual add and norm up to ",
                            kib(fused_limit), " (", lib, " for gathers)");
      return;
    }
    if (one_shot_limit == 0) {
      description = str_cat(
          lib, mode == AllReduceMode::kNccl ? " (one-shot not used)" : " (one-shot never faster)");
    } else {
      description = str_cat(lib, " + one-shot up to ", kib(one_shot_limit));
    }
    if (fused_limit > 0) {
      description += str_cat("; fused with the residual add and norm up to ", kib(fused_limit));
    }
  }
};

int nccl_type(DType t) {
  switch (t) {
    case DType::kBF16:
      return kNcclBfloat16;
    case DType::kF16:
      return kNcclFloat16;
    default:
      return kNcclFloat32;
  }
}

class GpuCommunicator final : public Communicator {
 public:
  GpuCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank), backend_(group_->backends[rank]) {}
  ~GpuCommunicator() override {
    backend_->make_current();
    (void)gpuStreamSynchronize(backend_->stream());
  }

  int32_t rank() const override { return rank_; }
  int32_t size() const override { return group_->size(); }
  std::string describe() const override { return group_->description; }
  const Group& group() const { return *group_; }

  void all_reduce_sum(const Tensor& x) override {
    if (!check_reducible(x)) return;
    const size_t bytes = x.nbytes();
    if (bytes == 0 || size() == 1) return;
    all_reduce(x, group_->one_shot && bytes <= group_->one_shot_limit);
  }

  // Through the one-shot (`one_shot`, where the group has it) or NCCL.
  void all_reduce(const Tensor& x, bool one_shot) {
    backend_->make_current();
    if (one_shot) {
      run_one_shot(x);
      return;
    }
    const NcclResult r =
        group_->nccl->all_reduce(x.data, x.data, static_cast<size_t>(x.numel()), nccl_type(x.dtype),
                                 kNcclSum, group_->comms[rank_], backend_->stream());
    if (r != kNcclSuccess) record_error(group_->nccl->status(r, "ncclAllReduce"));
  }

  bool all_reduce_add_rms_norm(const Tensor& x, const Tensor& residual, const Tensor& w,
                               NormSpec norm, const Tensor& out) override {
    return fusable(x, residual, w, out, group_->fused_limit) &&
           run_fused(x, residual, w, norm, out);
  }

  // Whether all_reduce_add_rms_norm fuses these tensors up to `limit` bytes of x.
  bool fusable(const Tensor& x, const Tensor& residual, const Tensor& w, const Tensor& out,
               size_t limit) const {
    const Group& g = *group_;
    if (size() == 1 || !g.one_shot || x.nbytes() > limit) return false;
    if ((x.dtype != DType::kBF16 && x.dtype != DType::kF16) || x.rank != 2) return false;
    const int64_t rows = x.dim(0), cols = x.dim(1);
    for (const Tensor* t : {&residual, &out}) {
      if (t->dtype != x.dtype || t->rank != 2 || t->dim(0) != rows || t->dim(1) != cols) return false;
    }
    if (w.dtype != x.dtype || w.numel() != cols) return false;
    // The shapes alone decide (not the pointers' alignment): every rank answers alike.
    return x.dtype == DType::kBF16
               ? gpu::one_shot_add_rms_norm_fits<gpu_bf16>(rows, cols, kOneShotCapacity)
               : gpu::one_shot_add_rms_norm_fits<gpu_f16>(rows, cols, kOneShotCapacity);
  }

  // The fused op, queued (its tensors fusable); true.
  bool run_fused(const Tensor& x, const Tensor& residual, const Tensor& w, NormSpec norm,
                 const Tensor& out) {
    backend_->make_current();
    const Group& g = *group_;
    const int64_t rows = x.dim(0), cols = x.dim(1);
    const gpuError_t err = gpu::launch_as(x.dtype, [&]<typename T>() {
      return gpu::one_shot_all_reduce_add_rms_norm(
          x.as<T>(), rows, cols, residual.as<T>(), w.as<T>(), norm.eps, norm.weight_offset,
          out.as<T>(), rank_, size(), g.peers, kOneShotCapacity, g.epochs[rank_], g.blocks,
          backend_->stream());
    });
    if (err != gpuSuccess) {
      record_error(gpu::status_from(err, "one_shot_all_reduce_add_rms_norm", __FILE__, __LINE__));
    }
    return true;
  }

  void gather_columns(const Tensor& part, const Tensor& full) override {
    if (part.dtype != DType::kF32 || part.rank != 2) {
      record_error(absl::InvalidArgumentError(
          str_cat(backend_->name(), ": gather_columns: part must be a 2-D F32 tensor, is ",
                  dtype_name(part.dtype), " of rank ", part.rank)));
      return;
    }
    const int64_t rows = part.dim(0), part_cols = part.dim(1);
    // Once the shapes agree, no error returns early: a `full` rank 0 refuses, a copy or an NCCL
    // call that fails is recorded, and the rank still posts every send or receive of the gather
    // (received parts then dropped), since the other ranks' matching calls wait for them.
    bool full_ok = true;
    if (rank_ == 0) {
      if (full.dtype != DType::kF32 || full.rank != 2 || full.dim(0) != rows ||
          full.dim(1) > part_cols * size()) {
        record_error(absl::InvalidArgumentError(str_cat(
            backend_->name(), ": gather_columns: full must be F32 [", rows,
            ", <= ", part_cols * size(), "], is ", dtype_name(full.dtype), " of rank ", full.rank,
            full.rank == 2 ? str_cat(" [", full.dim(0), ", ", full.dim(1), "]") : "")));
        full_ok = false;
      }
    }
    if (rows == 0 || part_cols == 0) return;
    backend_->make_current();
    const gpuStream_t stream = backend_->stream();
    // Rank 0's own part straight into its columns.
    if (rank_ == 0 && full_ok && !copy_columns(part.as<float>(), rows, part_cols, full, 0)) {
      full_ok = false;
    }
    if (size() == 1) return;
    // The others' parts through rank 0's scratch (allocated at creation: nothing allocates while
    // a collective may be waiting), in chunks of rows. Every rank cuts the same chunks.
    const int64_t row_floats = (size() - 1) * part_cols;
    const int64_t chunk_rows = std::min<int64_t>(rows, group_->gather_scratch_floats / row_floats);
    if (chunk_rows == 0) {
      record_error(absl::InvalidArgumentError(str_cat(
          backend_->name(), ": gather_columns: a row of the other ranks' parts (", row_floats * 4,
          " bytes) exceeds the gather scratch (", group_->gather_scratch_floats * 4, " bytes)")));
      return;
    }
    const NcclApi& nccl = *group_->nccl;
    for (int64_t first = 0; first < rows; first += chunk_rows) {
      const int64_t count = std::min(chunk_rows, rows - first);
      const size_t chunk_floats = static_cast<size_t>(count * part_cols);
      if (rank_ != 0) {
        const NcclResult r = nccl.send(part.as<float>() + first * part_cols, chunk_floats,
                                       kNcclFloat32, 0, group_->comms[rank_], stream);
        if (r != kNcclSuccess) record_error(nccl.status(r, "ncclSend"));
        continue;
      }
      float* scratch = group_->gather_scratch;
      NcclResult r = nccl.group_start();
      for (int s = 1; s < size() && r == kNcclSuccess; ++s) {
        r = nccl.recv(scratch + (s - 1) * chunk_floats, chunk_floats, kNcclFloat32, s,
                      group_->comms[0], stream);
      }
      const NcclResult end = nccl.group_end();
      if (r == kNcclSuccess) r = end;
      if (r != kNcclSuccess) {
        record_error(nccl.status(r, "ncclRecv"));
        full_ok = false;
      }
      if (!full_ok) continue;
      const Tensor rows_of_full = full.rows(first, count);
      for (int s = 1; s < size() && full_ok; ++s) {
        full_ok = copy_columns(scratch + (s - 1) * chunk_floats, count, part_cols, rows_of_full, s);
      }
    }
  }

  absl::Status take_error() override {
    absl::Status async = absl::OkStatus();
    if (group_->nccl != nullptr) {
      NcclResult state = kNcclSuccess;
      const NcclResult r = group_->nccl->comm_get_async_error(group_->comms[rank_], &state);
      if (r != kNcclSuccess) {
        async = group_->nccl->status(r, "ncclCommGetAsyncError");
      } else if (state != kNcclSuccess && state != kNcclInProgress) {
        async = group_->nccl->status(state, "an operation (asynchronous error)");
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    absl::Status s = std::move(error_);
    error_ = absl::OkStatus();
    return s.ok() ? async : s;
  }

 private:
  void record_error(absl::Status s) {
    if (s.ok()) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.ok()) {
      error_ = absl::Status(s.code(), str_cat("rank ", rank_, " of ", size(), ": ", s.message()));
    }
  }

  bool check_reducible(const Tensor& x) {
    if (x.dtype == DType::kBF16 || x.dtype == DType::kF16 || x.dtype == DType::kF32) return true;
    record_error(
        absl::InvalidArgumentError(str_cat(backend_->name(), ": all_reduce_sum: x is ",
                                           dtype_name(x.dtype), "; BF16, F16 or F32 expected")));
    return false;
  }

  void run_one_shot(const Tensor& x) {
    const size_t elem = element_size(x.dtype);
    const int64_t chunk = static_cast<int64_t>(kOneShotCapacity / elem);
    const int64_t n = x.numel();
    const Group& g = *group_;
    for (int64_t first = 0; first < n; first += chunk) {
      const int64_t count = std::min(chunk, n - first);
      gpuError_t err = gpuSuccess;
      switch (x.dtype) {
        case DType::kBF16:
          err = gpu::one_shot_all_reduce(x.as<gpu_bf16>() + first, count, rank_, size(), g.peers,
                                         kOneShotCapacity, g.epochs[rank_], g.blocks,
                                         backend_->stream());
          break;
        case DType::kF16:
          err = gpu::one_shot_all_reduce(x.as<gpu_f16>() + first, count, rank_, size(), g.peers,
                                         kOneShotCapacity, g.epochs[rank_], g.blocks,
                                         backend_->stream());
          break;
        default:
          err = gpu::one_shot_all_reduce(x.as<float>() + first, count, rank_, size(), g.peers,
                                         kOneShotCapacity, g.epochs[rank_], g.blocks,
                                         backend_->stream());
          break;
      }
      // No early return: the other ranks queue every chunk, and each waits for this rank's.
      if (err != gpuSuccess) {
        record_error(gpu::status_from(err, "one_shot_all_reduce", __FILE__, __LINE__));
      }
    }
  }

  // Rank s's part [rows, part_cols] (at `src`) into full's columns [s * part_cols, ...),
  // clipped; false after recording an error.
  bool copy_columns(const float* src, int64_t rows, int64_t part_cols, const Tensor& full, int s) {
    const int64_t full_cols = full.dim(1);
    const int64_t width = std::min(part_cols, full_cols - s * part_cols);
    float* dst = full.as<float>() + s * part_cols;
    if (width <= 0 || (src == dst && width == full_cols && width == part_cols)) return true;
    const absl::Status st = GPU_STATUS(
        gpuMemcpy2DAsync(dst, full_cols * sizeof(float), src, part_cols * sizeof(float),
                         width * sizeof(float), rows, gpuMemcpyDeviceToDevice, backend_->stream()));
    record_error(st);
    return st.ok();
  }

  std::shared_ptr<Group> group_;
  int rank_;
  GpuBackend* backend_;
  std::mutex mu_;
  absl::Status error_;
};

// Runs fn(rank) on one thread per rank, concurrently; the first error.
absl::Status on_every_rank(int ranks, const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> results(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back([&, r] { results[r] = fn(r); });
  for (std::thread& t : threads) t.join();
  for (absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// Every rank's one-shot buffers, and peer access between every pair: false (with the reason in
// g.one_shot_off) where the hardware has none.
absl::StatusOr<bool> set_up_one_shot(Group& g) {
  const int n = g.size();
  if (n > gpu::kOneShotMaxRanks) {
    g.one_shot_off = str_cat(n, " ranks; it takes at most ", gpu::kOneShotMaxRanks);
    return false;
  }
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      int can = 0;
      const int di = g.backends[i]->device(), dj = g.backends[j]->device();
      GPU_CHECK(gpuDeviceCanAccessPeer(&can, di, dj));
      if (can == 0) {
        g.one_shot_off =
            str_cat("GPU ", di, " cannot access GPU ", dj, "'s memory (no peer access)");
        return false;
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    GpuBackend& b = *g.backends[i];
    b.make_current();
    for (int j = 0; j < n; ++j) {
      if (j != i) b.enable_peer_access(g.backends[j]->device());
    }
    if (absl::Status s = b.synchronize(); !s.ok()) return s;  // enable_peer_access's error
    g.blocks = std::min(g.blocks, b.multiprocessors());
  }
  g.blocks = std::clamp(g.blocks, 1, gpu::kOneShotMaxBlocks);
  const size_t flag_bytes = sizeof(uint32_t) * gpu::kOneShotMaxRanks * gpu::kOneShotMaxBlocks;
  const size_t epoch_bytes = sizeof(uint32_t) * gpu::kOneShotMaxBlocks;
  for (int i = 0; i < n; ++i) {
    GpuBackend& b = *g.backends[i];
    absl::StatusOr<DeviceBuffer> staging = b.allocate(2 * kOneShotCapacity);
    if (!staging.ok()) return staging.status();
    absl::StatusOr<DeviceBuffer> flags = b.allocate(flag_bytes + epoch_bytes);
    if (!flags.ok()) return flags.status();
    b.make_current();
    GPU_CHECK(gpuMemsetAsync(flags->data(), 0, flag_bytes + epoch_bytes, b.stream()));
    GPU_CHECK(gpuStreamSynchronize(b.stream()));
    g.peers.staging[i] = staging->data();
    g.peers.flags[i] = static_cast<uint32_t*>(flags->data());
    g.epochs.push_back(static_cast<uint32_t*>(flags->data()) + flag_bytes / sizeof(uint32_t));
    g.buffers.push_back(*std::move(staging));
    g.buffers.push_back(*std::move(flags));
  }
  return true;
}

absl::StatusOr<AllReduceMode> mode_from_environment() {
  const char* env = std::getenv("TESSERA_ALL_REDUCE");
  if (env == nullptr || *env == '\0') return AllReduceMode::kAuto;
  absl::StatusOr<AllReduceMode> mode = parse_all_reduce_mode(env);
  if (!mode.ok()) {
    return absl::InvalidArgumentError(str_cat("TESSERA_ALL_REDUCE: ", mode.status().message()));
  }
  return mode;
}

}  // namespace

absl::StatusOr<AllReduceMode> parse_all_reduce_mode(std::string_view text) {
  if (text == "auto") return AllReduceMode::kAuto;
  if (text == "nccl" || text == "rccl") return AllReduceMode::kNccl;
  if (text == "one_shot" || text == "one-shot") return AllReduceMode::kOneShot;
  return absl::InvalidArgumentError(
      str_cat("\"", text, "\" is not an all-reduce choice: auto, nccl or one_shot"));
}

absl::StatusOr<std::vector<std::unique_ptr<Communicator>>> create_gpu_communicators(
    std::span<GpuBackend* const> ranks, const GpuCommunicatorOptions& options) {
  if (ranks.empty()) return absl::InvalidArgumentError("create_gpu_communicators: no ranks");
  auto group = std::make_shared<Group>();
  for (GpuBackend* b : ranks) {
    if (b == nullptr) return absl::InvalidArgumentError("create_gpu_communicators: a null rank");
    for (GpuBackend* other : group->backends) {
      if (other->device() == b->device()) {
        return absl::InvalidArgumentError(
            str_cat("create_gpu_communicators: GPU ", b->device(), " is two ranks"));
      }
    }
    group->backends.push_back(b);
  }
  if (options.all_reduce.has_value()) {
    group->mode = *options.all_reduce;
  } else {
    absl::StatusOr<AllReduceMode> mode = mode_from_environment();
    if (!mode.ok()) return mode.status();
    group->mode = *mode;
  }
  const int n = group->size();
  std::vector<std::unique_ptr<Communicator>> out;
  if (n > 1) {
    absl::StatusOr<const NcclApi*> api = nccl_api();
    if (!api.ok()) return api.status();
    group->nccl = *api;
    std::vector<int> devices;
    for (GpuBackend* b : group->backends) devices.push_back(b->device());
    group->comms.assign(n, nullptr);
    if (NcclResult r = group->nccl->comm_init_all(group->comms.data(), n, devices.data());
        r != kNcclSuccess) {
      group->comms.clear();
      return group->nccl->status(r, "ncclCommInitAll");
    }
    absl::StatusOr<bool> one_shot = set_up_one_shot(*group);
    if (!one_shot.ok()) return one_shot.status();
    group->one_shot = *one_shot;
    absl::StatusOr<DeviceBuffer> scratch =
        group->backends[0]->allocate(std::max<size_t>(options.gather_scratch_bytes, 4));
    if (!scratch.ok()) return scratch.status();
    group->gather_scratch = static_cast<float*>(scratch->data());
    group->gather_scratch_floats = scratch->bytes() / sizeof(float);
    group->buffers.push_back(*std::move(scratch));
    if (!group->one_shot && group->mode == AllReduceMode::kOneShot) {
      return absl::FailedPreconditionError(
          str_cat("TESSERA_ALL_REDUCE=one_shot needs peer access between every pair of GPUs: ",
                  group->one_shot_off));
    }
  }
  for (int r = 0; r < n; ++r) out.push_back(std::make_unique<GpuCommunicator>(group, r));
  if (group->one_shot) {
    if (group->mode == AllReduceMode::kOneShot) {
      group->one_shot_limit = std::numeric_limits<size_t>::max();
      group->fused_limit = kOneShotCapacity;
    } else if (group->mode == AllReduceMode::kAuto) {
      std::vector<Communicator*> members;
      for (auto& c : out) members.push_back(c.get());
      absl::StatusOr<std::vector<AllReduceTiming>> timings =
          time_all_reduce(members, kProbeSizes, ranks[0]->compute_dtype(), 30);
      if (!timings.ok()) return timings.status();
      std::string table;
      auto us = [](double v) { return static_cast<int>(v * 10) / 10.0; };
      bool one_shot_faster = true, fused_faster = true;
      for (const AllReduceTiming& t : *timings) {
        table += str_cat(" ", kib(t.bytes), ": nccl ", us(t.nccl_us), " us, one-shot ",
                         us(t.one_shot_us), " us, + norm ", us(t.nccl_norm_us), " / fused ",
                         us(t.fused_us), " us;");
        // A path that did not run (< 0) never wins.
        one_shot_faster = one_shot_faster && t.one_shot_us >= 0 && t.one_shot_us < t.nccl_us;
        if (one_shot_faster) group->one_shot_limit = t.bytes;
        // Against what it replaces: the all-reduce chosen at this size, then the norm.
        const double unfused =
            std::min(t.nccl_us, t.one_shot_us) + std::max(0.0, t.nccl_norm_us - t.nccl_us);
        fused_faster = fused_faster && t.fused_us >= 0 && t.nccl_norm_us >= 0 && t.fused_us < unfused;
        if (fused_faster) group->fused_limit = t.bytes;
      }
      spdlog::info("all-reduce over {} GPUs, measured:{}", n, table);
    }
  }
  group->describe();
  return out;
}

absl::StatusOr<std::vector<AllReduceTiming>> time_all_reduce(std::span<Communicator* const> group,
                                                             std::span<const size_t> sizes,
                                                             DType dtype, int iterations) {
  std::vector<GpuCommunicator*> comms;
  for (Communicator* c : group) {
    auto* g = dynamic_cast<GpuCommunicator*>(c);
    if (g == nullptr || (!comms.empty() && &g->group() != &comms[0]->group())) {
      return absl::InvalidArgumentError("time_all_reduce: not one group of GPU communicators");
    }
    comms.push_back(g);
  }
  if (comms.empty() || static_cast<int>(comms.size()) != comms[0]->size()) {
    return absl::InvalidArgumentError("time_all_reduce: the group's ranks, all of them, in order");
  }
  if (dtype != DType::kBF16 && dtype != DType::kF16 && dtype != DType::kF32) {
    return absl::InvalidArgumentError(str_cat("time_all_reduce: ", dtype_name(dtype)));
  }
  const Group& g = comms[0]->group();
  const int n = g.size();
  if (n < 2) return absl::InvalidArgumentError("time_all_reduce: a group of one rank");
  iterations = std::max(iterations, 1);
  const size_t elem = element_size(dtype);
  size_t largest = elem;
  for (size_t s : sizes) largest = std::max(largest, s);
  // The fused paths' rows: the probe's bytes as rows of up to kFusedCols elements.
  constexpr int64_t kFusedCols = 4096;
  const bool fusable_dtype = dtype == DType::kBF16 || dtype == DType::kF16;
  // Memory and events first, on this thread: nothing allocates while collectives are in flight.
  struct RankState {
    DeviceBuffer data, residual, out, weight;
    std::vector<gpuEvent_t> events;
    ~RankState() {
      for (gpuEvent_t e : events) (void)gpuEventDestroy(e);
    }
  };
  std::vector<RankState> state(n);
  for (int r = 0; r < n; ++r) {
    GpuBackend& b = *g.backends[r];
    RankState& st = state[r];
    // The fused paths run only up to the staging capacity.
    const size_t fused_bytes = std::min(largest, kOneShotCapacity);
    for (auto [buffer, bytes] : {std::pair{&st.data, largest}, std::pair{&st.residual, fused_bytes},
                                 std::pair{&st.out, fused_bytes},
                                 std::pair{&st.weight, kFusedCols * elem}}) {
      absl::StatusOr<DeviceBuffer> buf = b.allocate(bytes);
      if (!buf.ok()) return buf.status();
      *buffer = *std::move(buf);
      b.make_current();
      GPU_CHECK(gpu::fill_uniform(static_cast<gpu_bf16*>(buffer->data()),
                                  static_cast<int64_t>(bytes / 2), 1234 + r, -1, 1, b.stream()));
    }
    for (int i = 0; i < 2 * iterations; ++i) GPU_CHECK(gpuEventCreate(&st.events.emplace_back()));
    GPU_CHECK(gpuStreamSynchronize(b.stream()));
  }
  // Paths: NCCL; the one-shot; NCCL then the residual add and norm; the fused one-shot.
  constexpr int kPaths = 4;
  // Ops between a pair of events: back to back, as a step queues them (their launches overlap
  // where they can), not each alone.
  constexpr int kOpsPerTiming = 8;
  // [size][path][rank] median microseconds per op; < 0 where the path does not run.
  std::vector<double> us(sizes.size() * kPaths * n, -1.0);
  constexpr int kWarmup = 5;
  absl::Status run = on_every_rank(n, [&](int r) -> absl::Status {
    GpuBackend& b = *g.backends[r];
    GpuCommunicator& c = *comms[r];
    RankState& st = state[r];
    b.make_current();
    std::vector<float> ms(iterations);
    // A rank that met an error keeps queueing its collectives: the others wait for every one of
    // them, and a rank that stopped would leave them waiting for ever. The first error is kept.
    absl::Status first;
    auto check = [&](gpuError_t e, const char* what) {
      if (e != gpuSuccess && first.ok()) first = gpu::status_from(e, what, __FILE__, __LINE__);
    };
    for (size_t si = 0; si < sizes.size(); ++si) {
      const int64_t count = static_cast<int64_t>(std::max(sizes[si], elem) / elem);
      const int64_t cols = std::min(count, kFusedCols), rows = count / cols;
      const Tensor x(st.data.data(), dtype, {count});
      const Tensor x2(st.data.data(), dtype, {rows, cols});
      const Tensor residual(st.residual.data(), dtype, {rows, cols});
      const Tensor out(st.out.data(), dtype, {rows, cols});
      const Tensor w(st.weight.data(), dtype, {cols});
      // Whole rows of the size only, within the buffers (the same answer on every rank).
      const bool fusable = fusable_dtype && rows * cols == count &&
                           x2.nbytes() <= std::min(largest, kOneShotCapacity) &&
                           c.fusable(x2, residual, w, out, largest);
      auto op = [&](int path) {
        switch (path) {
          case 0:
            c.all_reduce(x, false);
            return;
          case 1:
            c.all_reduce(x, true);
            return;
          case 2:
            c.all_reduce(x2, false);
            check(gpu::launch_as(dtype, [&]<typename T>() {
                    return gpu::rms_norm(residual.as<T>(), x2.as<T>(), w.as<T>(), rows, cols,
                                         1e-5f, 0.0f, out.as<T>(), b.stream());
                  }),
                  "rms_norm");
            return;
          default:
            c.run_fused(x2, residual, w, NormSpec{}, out);
        }
      };
      for (int p = 0; p < kPaths; ++p) {
        if ((p == 1 || p == 3) && !g.one_shot) continue;
        if (p >= 2 && !fusable) continue;
        for (int i = 0; i < kWarmup; ++i) op(p);
        for (int i = 0; i < iterations; ++i) {
          check(gpuEventRecord(st.events[2 * i], b.stream()), "gpuEventRecord");
          for (int k = 0; k < kOpsPerTiming; ++k) op(p);
          check(gpuEventRecord(st.events[2 * i + 1], b.stream()), "gpuEventRecord");
        }
        check(gpuStreamSynchronize(b.stream()), "gpuStreamSynchronize");
        if (!first.ok()) continue;
        for (int i = 0; i < iterations; ++i) {
          check(gpuEventElapsedTime(&ms[i], st.events[2 * i], st.events[2 * i + 1]),
                "gpuEventElapsedTime");
        }
        std::nth_element(ms.begin(), ms.begin() + iterations / 2, ms.end());
        us[(si * kPaths + p) * n + r] = 1000.0 * ms[iterations / 2] / kOpsPerTiming;
      }
    }
    first.Update(c.take_error());
    return first;
  });
  if (!run.ok()) return run;
  std::vector<AllReduceTiming> out;
  for (size_t si = 0; si < sizes.size(); ++si) {
    AllReduceTiming t;
    t.bytes = std::max(sizes[si], elem) / elem * elem;
    double* fields[kPaths] = {&t.nccl_us, &t.one_shot_us, &t.nccl_norm_us, &t.fused_us};
    for (int p = 0; p < kPaths; ++p) {
      *fields[p] = -1;
      for (int r = 0; r < n; ++r) *fields[p] = std::max(*fields[p], us[(si * kPaths + p) * n + r]);
    }
    out.push_back(t);
  }
  return out;
}

size_t one_shot_limit(const Communicator& communicator) {
  const auto* g = dynamic_cast<const GpuCommunicator*>(&communicator);
  if (g == nullptr || !g->group().one_shot) return 0;
  return g->group().one_shot_limit;
}

size_t fused_limit(const Communicator& communicator) {
  const auto* g = dynamic_cast<const GpuCommunicator*>(&communicator);
  if (g == nullptr || !g->group().one_shot) return 0;
  return g->group().fused_limit;
}

}  // namespace tessera
