#include "runtime/kv_cache/kv_cache.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "base/dtype.h"
#include "base/status_macros.h"
#include "base/str_cat.h"

namespace tessera {

bool BlockTable::reserve(int32_t num_tokens, int32_t block_size, BlockAllocator& allocator) {
  const int32_t needed = (num_tokens + block_size - 1) / block_size;
  const int32_t missing = needed - num_blocks();
  if (missing <= 0) return true;
  if (missing > allocator.num_free()) return false;
  for (int32_t i = 0; i < missing; ++i) blocks_.push_back(*allocator.allocate());
  return true;
}

void BlockTable::share(std::span<const int32_t> blocks, BlockAllocator& allocator) {
  for (int32_t b : blocks) {
    allocator.retain(b);
    blocks_.push_back(b);
  }
}

void BlockTable::release(BlockAllocator& allocator) {
  for (auto b = blocks_.rbegin(); b != blocks_.rend(); ++b) allocator.release(*b);
  blocks_.clear();
}

StepBatch sequence_chunk(const BlockTable& table, int32_t block_size,
                         std::span<const int32_t> ids, int32_t first, int32_t count) {
  StepBatch batch;
  batch.query_start = {0, count};
  batch.context_len = {first + count};
  batch.block_tables = table.blocks();
  batch.max_blocks = table.num_blocks();
  for (int32_t p = first; p < first + count; ++p) {
    batch.token_ids.push_back(ids[p]);
    batch.positions.push_back(p);
    batch.slot_mapping.push_back(table.slot(p, block_size));
  }
  return batch;
}

size_t kv_bytes_per_token_per_layer(int64_t num_kv_heads, int64_t head_dim, DType dtype) {
  return static_cast<size_t>(2 * num_kv_heads * head_dim) * element_size(dtype);
}

size_t KvCacheShape::bytes_per_layer_block(DType dtype) const {
  return static_cast<size_t>(block_size) *
         kv_bytes_per_token_per_layer(num_kv_heads, head_dim, dtype);
}

size_t KvCacheShape::bytes_per_block(DType dtype) const {
  return static_cast<size_t>(num_layers) * bytes_per_layer_block(dtype);
}

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::create(Backend& backend, KvCacheShape shape,
                                                         std::optional<DType> dtype) {
  const LayerSegment all{&backend, 0, shape.num_layers};
  return create(std::span<const LayerSegment>(&all, 1), shape, dtype);
}

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::create(std::span<const LayerSegment> segments,
                                                         KvCacheShape shape,
                                                         std::optional<DType> pool_dtype) {
  if (shape.num_blocks <= 0 || shape.block_size <= 0 || shape.num_layers <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("kv cache: need at least one block of at least "
                                                   "one token (got ", shape.num_blocks,
                                                   " blocks of ", shape.block_size, ")"));
  }
  TESSERA_RETURN_IF_ERROR(validate_segments(segments, shape.num_layers));
  const DType compute = segments.front().backend->compute_dtype();
  const DType dtype = pool_dtype.value_or(compute);
  std::unique_ptr<KvCache> cache(new KvCache(shape, dtype));
  const size_t layer_bytes = shape.bytes_per_layer_block(dtype) * shape.num_blocks;
  const int32_t ranks = segments.front().num_ranks();
  cache->layer_base_.assign(static_cast<size_t>(ranks), std::vector<char*>(shape.num_layers));
  for (const LayerSegment& seg : segments) {
    for (int32_t r = 0; r < ranks; ++r) {
      Backend& b = seg.rank_backend(r);
      if (b.compute_dtype() != compute) {
        return absl::InvalidArgumentError(str_cat(
            "kv cache: ", b.name(), " computes in ", dtype_name(b.compute_dtype()),
            ", the first device in ", dtype_name(compute)));
      }
      const size_t bytes = layer_bytes * seg.num_layers;
      auto pool = b.allocate(bytes);
      if (!pool.ok()) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "kv cache: ", shape.num_blocks, " blocks of layers ", seg.first_layer, "..",
            seg.end_layer() - 1, " need ", bytes, " bytes on ", b.name(), ": ",
            pool.status().message()));
      }
      for (int32_t i = 0; i < seg.num_layers; ++i) {
        cache->layer_base_[r][seg.first_layer + i] = static_cast<char*>(pool->data()) + i * layer_bytes;
      }
      cache->pools_.push_back(*std::move(pool));
      cache->owners_.push_back(PoolOwner{&b, r, seg.first_layer, seg.num_layers, {}});
    }
  }
  return cache;
}

namespace {

uint64_t next_cache_id() {
  static std::atomic<uint64_t> next{1};  // 0 is no cache
  return next++;
}

}  // namespace

KvCache::KvCache(KvCacheShape shape, DType dtype)
    : id_(next_cache_id()),
      shape_(shape),
      dtype_(dtype),
      scales_(static_cast<size_t>(shape.num_layers)),
      allocator_(shape.num_blocks, shape.block_size) {}

KvLayerView KvCache::layer(int32_t index, int32_t rank) const {
  // A layer's K pool, then its V pool of the same size.
  const size_t k_pool_bytes = shape_.bytes_per_layer_block(dtype_) * shape_.num_blocks / 2;
  char* base = layer_base_[rank][index];
  const std::initializer_list<int64_t> dims = {shape_.num_blocks, shape_.block_size,
                                               shape_.num_kv_heads, shape_.head_dim};
  KvLayerView view{Tensor(base, dtype_, dims), Tensor(base + k_pool_bytes, dtype_, dims)};
  view.k_scale = scales_[index].k;
  view.v_scale = scales_[index].v;
  if (!layer_amax_.empty()) view.amax = layer_amax_[rank][index];
  return view;
}

void KvCache::set_scales(int32_t index, float k_scale, float v_scale) {
  scales_[index] = LayerScales{k_scale, v_scale};
}

absl::Status KvCache::start_calibration() {
  const size_t ranks = layer_base_.size();
  layer_amax_.assign(ranks, std::vector<float*>(shape_.num_layers, nullptr));
  for (PoolOwner& o : owners_) {
    const std::vector<float> zeros(2 * static_cast<size_t>(o.num_layers), 0.0f);
    auto amax = o.backend->allocate(zeros.size() * sizeof(float));
    if (!amax.ok()) {
      for (PoolOwner& done : owners_) done.amax.reset();
      layer_amax_.clear();
      return amax.status();
    }
    o.amax = *std::move(amax);
    o.backend->upload_f32(zeros, Tensor(o.amax.data(), DType::kF32, {2 * o.num_layers}));
    for (int32_t i = 0; i < o.num_layers; ++i) {
      layer_amax_[o.rank][o.first_layer + i] = static_cast<float*>(o.amax.data()) + 2 * i;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<float, float>>> KvCache::finish_calibration() {
  std::vector<std::pair<float, float>> amax(static_cast<size_t>(shape_.num_layers), {0.0f, 0.0f});
  absl::Status status;
  for (PoolOwner& o : owners_) {
    std::vector<float> host(2 * static_cast<size_t>(o.num_layers));
    if (absl::Status s = o.backend->synchronize(); !s.ok() && status.ok()) status = s;
    o.backend->copy_to_host(host.data(), o.amax.data(), host.size() * sizeof(float));
    for (int32_t i = 0; i < o.num_layers; ++i) {
      auto& [k, v] = amax[static_cast<size_t>(o.first_layer + i)];
      k = std::max(k, host[2 * i]);
      v = std::max(v, host[2 * i + 1]);
    }
    o.amax.reset();
  }
  layer_amax_.clear();
  if (!status.ok()) return status;
  return amax;
}

}  // namespace tessera
