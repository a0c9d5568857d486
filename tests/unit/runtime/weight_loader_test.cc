// WeightLoader::load_row_slice: a tensor-parallel rank's vocabulary slice, its padding rows zeros --
// including a rank whose slice lies wholly past the vocabulary (a vocabulary smaller than the
// ranks' padded share, where the last ranks hold padding only).
#include "runtime/model/weight_loader.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/cpu/cpu_backend.h"
#include "runtime/model/tensor_parallel.h"

namespace tessera {
namespace {

// One fp32 matrix "w" [rows, cols] whose element (r, c) is 1 + r * cols + c.
class OneMatrix final : public WeightSource {
 public:
  OneMatrix(int64_t rows, int64_t cols) : values_(static_cast<size_t>(rows * cols)) {
    for (size_t i = 0; i < values_.size(); ++i) values_[i] = 1.0f + static_cast<float>(i);
    raw_.info = {"w", DType::kF32, {rows, cols}};
    raw_.data = reinterpret_cast<const uint8_t*>(values_.data());
    raw_.nbytes = values_.size() * sizeof(float);
  }
  const ModelConfig& config() const override { return config_; }
  const std::string& path() const override { return path_; }
  std::vector<TensorInfo> tensors() const override { return {raw_.info}; }
  bool has(std::string_view n) const override { return n == "w"; }
  absl::StatusOr<RawTensor> raw(std::string_view) const override { return raw_; }
  absl::Status read_f32(std::string_view, std::span<const int64_t>, std::span<float> out) const override {
    std::memcpy(out.data(), values_.data(), out.size_bytes());
    return absl::OkStatus();
  }

 private:
  ModelConfig config_;
  std::string path_ = "mem";
  std::vector<float> values_;
  RawTensor raw_;
};

TEST(WeightLoaderTest, EveryRankLoadsItsVocabularySliceEvenWhenItIsAllPadding) {
  // 9 rows over 4 ranks: 3 rows each; rank 3's rows [9, 12) are all past the vocabulary.
  const OneMatrix w(9, 2);
  ModelConfig c;
  c.vocab_size = 9;
  c.num_heads = 4;
  c.num_kv_heads = 4;
  c.intermediate_size = 4;
  CpuBackend cpu(1);
  TensorArena arena;
  WeightLoader loader(w, arena);
  for (int32_t rank = 0; rank < 4; ++rank) {
    const TensorParallelShard s = tensor_parallel_shard(c, rank, 4);
    absl::StatusOr<Tensor> t =
        loader.load_row_slice(cpu, "w", s.first_vocab, s.vocab_real, s.vocab_rows, 2);
    ASSERT_TRUE(t.ok()) << "rank " << rank << ": " << t.status();
    ASSERT_EQ(s.vocab_rows, 3) << "rank " << rank;
    ASSERT_EQ(s.vocab_real, rank < 3 ? 3 : 0) << "rank " << rank;
    ASSERT_EQ(t->rank, 2);
    ASSERT_EQ(t->dim(0), 3);
    ASSERT_EQ(t->dim(1), 2);
    for (int64_t r = 0; r < s.vocab_rows; ++r) {
      for (int64_t col = 0; col < 2; ++col) {
        const int64_t row = s.first_vocab + r;
        const float want = row < 9 ? 1.0f + static_cast<float>(row * 2 + col) : 0.0f;
        EXPECT_EQ(t->as<float>()[r * 2 + col], want) << "rank " << rank << " row " << row;
      }
    }
  }
}

}  // namespace
}  // namespace tessera
