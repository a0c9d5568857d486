// WeightSlice: a tensor-parallel rank's rows or columns of a stored tensor read exactly as those
// rows and columns of the whole tensor (plain and block-quantized, GGUF's interleaved q/k rows
// on whole heads), and ranges that cut a block or a head refused naming the tensor.
#include "runtime/model_io/weight_slice.h"

#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/half.h"
#include "runtime/model_io/dequant.h"
#include "tests/unit/model/read_weights.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

// One stored tensor in memory: its bytes as a file would hold them.
class OneTensor final : public WeightSource {
 public:
  OneTensor(DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes, int64_t qk_head_dim = 0)
      : bytes_(std::move(bytes)) {
    raw_.info = {"w", dtype, std::move(shape)};
    raw_.data = bytes_.data();
    raw_.nbytes = bytes_.size();
    raw_.qk_permuted = qk_head_dim > 0;
    raw_.qk_head_dim = qk_head_dim;
  }
  const ModelConfig& config() const override { return config_; }
  const std::string& path() const override { return path_; }
  std::vector<TensorInfo> tensors() const override { return {raw_.info}; }
  bool has(std::string_view n) const override { return n == "w"; }
  absl::StatusOr<RawTensor> raw(std::string_view) const override { return raw_; }
  absl::Status read_f32(std::string_view, std::span<const int64_t>, std::span<float>) const override {
    return absl::UnimplementedError("not used");
  }

 private:
  ModelConfig config_;
  std::string path_ = "mem.gguf";
  std::vector<uint8_t> bytes_;
  RawTensor raw_;
};

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// rows x cols of Q8_0 (blocks of 32: an fp16 scale, 32 int8), every value distinct enough.
std::vector<uint8_t> q8_0_bytes(int64_t rows, int64_t cols) {
  std::vector<uint8_t> b;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t blk = 0; blk < cols / 32; ++blk) {
      const uint16_t scale = float_to_half(0.01f * static_cast<float>(1 + r + blk));
      b.push_back(static_cast<uint8_t>(scale & 0xff));
      b.push_back(static_cast<uint8_t>(scale >> 8));
      for (int i = 0; i < 32; ++i) b.push_back(static_cast<uint8_t>(static_cast<int8_t>((r * 7 + blk * 3 + i) % 255 - 127)));
    }
  }
  return b;
}

using testing::read_all;

// The dequantized whole tensor's rows [r0, r0 + nr) x columns [c0, c0 + nc).
std::vector<float> expected(DType dtype, const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols,
                            IndexRange r, IndexRange c) {
  std::vector<float> all(static_cast<size_t>(rows * cols));
  EXPECT_TRUE(dequantize_f32(dtype, bytes, all).ok());
  std::vector<float> out;
  for (int64_t i = r.begin; i < r.end(); ++i) {
    for (int64_t j = c.begin; j < c.end(); ++j) out.push_back(all[static_cast<size_t>(i * cols + j)]);
  }
  return out;
}

TEST(WeightSliceTest, RowsAndColumnsOfAPlainMatrix) {
  std::vector<float> v(6 * 8);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f - 3.0f;
  const OneTensor w(DType::kF32, {6, 8}, f32_bytes(v));
  for (auto [r, c] : {std::pair{IndexRange{2, 3}, IndexRange{0, 8}}, std::pair{IndexRange{0, 6}, IndexRange{3, 4}},
                      std::pair{IndexRange{5, 1}, IndexRange{7, 1}}}) {
    absl::StatusOr<std::unique_ptr<WeightSlice>> s = WeightSlice::create(w, "w", r, c);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ((*s)->raw("w")->info.shape, (std::vector<int64_t>{r.count, c.count}));
    EXPECT_EQ(read_all(**s, "w"), expected(DType::kF32, f32_bytes(v), 6, 8, r, c));
  }
}

TEST(WeightSliceTest, WholeBlocksOfAQuantizedMatrix) {
  const std::vector<uint8_t> bytes = q8_0_bytes(4, 128);
  const OneTensor w(DType::kQ8_0, {4, 128}, bytes);
  const IndexRange rows{1, 2}, cols{64, 64};
  absl::StatusOr<std::unique_ptr<WeightSlice>> s = WeightSlice::create(w, "w", rows, cols);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(read_all(**s, "w"), expected(DType::kQ8_0, bytes, 4, 128, rows, cols));
  // Half a block is not a column range a Q8_0 row can be cut at.
  absl::StatusOr<std::unique_ptr<WeightSlice>> bad = WeightSlice::create(w, "w", rows, IndexRange{16, 32});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("mem.gguf: rows [1, 3) and columns [16, 48) of tensor 'w'"));
  EXPECT_THAT(bad.status().message(), HasSubstr("blocks of 32 elements"));
}

TEST(WeightSliceTest, InterleavedQkRowsSliceOnWholeHeads) {
  // Two heads of 4 rows, stored interleaved: the slice of head 1 reads as HF rows 4..7.
  std::vector<float> v(8 * 2);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  const OneTensor w(DType::kF32, {8, 2}, f32_bytes(v), /*qk_head_dim=*/4);
  absl::StatusOr<std::unique_ptr<WeightSlice>> head1 = WeightSlice::create(w, "w", {4, 4}, {0, 2});
  ASSERT_TRUE(head1.ok()) << head1.status();
  // Stored rows 4..7 hold HF rows 4, 6, 5, 7: read back in HF order.
  EXPECT_EQ(read_all(**head1, "w"), (std::vector<float>{8, 9, 12, 13, 10, 11, 14, 15}));
  absl::StatusOr<std::unique_ptr<WeightSlice>> half = WeightSlice::create(w, "w", {2, 4}, {0, 2});
  ASSERT_FALSE(half.ok());
  EXPECT_THAT(half.status().message(), HasSubstr("whole heads"));
}

TEST(WeightSliceTest, VectorsAndRangesOutsideTheTensor) {
  const OneTensor bias(DType::kF32, {8}, f32_bytes({0, 1, 2, 3, 4, 5, 6, 7}));
  absl::StatusOr<std::unique_ptr<WeightSlice>> s = WeightSlice::create(bias, "w", {2, 3}, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(read_all(**s, "w"), (std::vector<float>{2, 3, 4}));
  EXPECT_FALSE(WeightSlice::create(bias, "w", {6, 3}, {}).ok());
  EXPECT_FALSE(WeightSlice::create(bias, "w", {0, 2}, {0, 1}).ok());
  const OneTensor m(DType::kF32, {2, 2}, f32_bytes({1, 2, 3, 4}));
  absl::StatusOr<std::unique_ptr<WeightSlice>> out = WeightSlice::create(m, "w", {0, 2}, {1, 2});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("outside the tensor"));
}

}  // namespace
}  // namespace tessera
