// An FP8 checkpoint end to end on the CPU: the llama family fixture written as llm-compressor's
// "FP8-dynamic" checkpoints are (fp8_checkpoint_writer.h) and loaded with ModelInstance.
// Its logits must equal (1e-5 relative) those of the fp32 checkpoint holding exactly the
// dequantized values (code * scale), written beside it: the same values through the same math,
// on one rank and split over two tensor-parallel ranks (whose WeightSlices carry the row
// scales). The error against the original fp32 model, a real quantization error, is reported.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "base/fp8.h"
#include "kernels/cpu/cpu_backend.h"
#include "runtime/model/decoder_layer.h"
#include "runtime/model/tensor_parallel.h"
#include "runtime/model/weight_loader.h"
#include "runtime/model_instance.h"
#include "tests/unit/runtime/family_fixtures.h"
#include "tests/unit/runtime/fp8_checkpoint_writer.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
const fs::path kFixture = testing::kFamilyFixtures / "llama";
using testing::prompt_logits;
using testing::rel_err;
using testing::write_fp8_checkpoints;

InstanceOptions cpu_options(int32_t ranks) {
  InstanceOptions options;
  options.backend.kind = BackendKind::kCpu;
  options.backend.threads = 1;
  for (int32_t d = 0; d < ranks && ranks > 1; ++d) options.backend.devices.push_back(d);
  options.tensor_parallel_size = ranks;
  options.limits.max_batch_tokens = 512;
  options.limits.max_logit_rows = 8;
  options.engine.max_num_seqs = 8;
  options.kv_cache_bytes = 4 << 20;
  return options;
}

std::unique_ptr<ModelInstance> load(const fs::path& dir, int32_t ranks) {
  absl::StatusOr<std::unique_ptr<ModelInstance>> m = ModelInstance::load(dir, cpu_options(ranks));
  EXPECT_TRUE(m.ok()) << dir << ": " << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}

TEST(Fp8Checkpoint, LoadsAsItsDequantizedValuesOnTheCpu) {
  const fs::path tmp = fs::path(::testing::TempDir()) /
                       ("tessera_fp8_checkpoint_" + std::to_string(::getpid()));
  write_fp8_checkpoints(tmp / "fp8", tmp / "dequant");
  if (HasFatalFailure()) return;

  std::unique_ptr<ModelInstance> fp8 = load(tmp / "fp8", 1);
  std::unique_ptr<ModelInstance> fp8_tp = load(tmp / "fp8", 2);
  std::unique_ptr<ModelInstance> dequant = load(tmp / "dequant", 1);
  std::unique_ptr<ModelInstance> original = load(kFixture / "hf", 1);
  ASSERT_TRUE(fp8 && fp8_tp && dequant && original);
  EXPECT_EQ(fp8->config().quantization.method, WeightQuantization::Method::kCompressedTensors);
  // quantization auto (the default) on the CPU, which has no FP8: served dequantized.
  EXPECT_EQ(fp8->quantization(), Quantization::kNone);
  EXPECT_EQ(fp8_tp->tensor_parallel_size(), 2);

  const std::vector<testing::FamilyCase> cases = testing::read_family_cases(kFixture, "cases");
  ASSERT_FALSE(cases.empty());
  for (const testing::FamilyCase& c : cases) {
    const std::vector<int32_t>& prompt = c.prompt;
    const std::vector<float> want = prompt_logits(*dequant, prompt);
    const double same_values = rel_err(prompt_logits(*fp8, prompt), want);
    const double same_values_tp = rel_err(prompt_logits(*fp8_tp, prompt), want);
    const double quantization = rel_err(prompt_logits(*fp8, prompt), prompt_logits(*original, prompt));
    EXPECT_LT(same_values, 1e-5) << prompt.size() << "-token prompt";
    EXPECT_LT(same_values_tp, 1e-5) << prompt.size() << "-token prompt, 2 ranks";
    // A loose sanity bound only: per-channel e4m3 keeps about 2 significant digits per weight.
    EXPECT_LT(quantization, 0.2) << prompt.size() << "-token prompt";
    std::printf("[ metric ] fp8 checkpoint, %zu-token prompt: logits rel_err vs dequantized fp32 "
                "%.2e (1 rank), %.2e (2 ranks); vs the original fp32 model %.2e\n",
                prompt.size(), same_values, same_values_tp, quantization);
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
}

// The linear weights' codes as the checkpoint stores them (what `quantization: fp8` keeps on a GPU
// instead of requantizing): each code and row scale of every projection, on one rank and on each
// of two, gives exactly the value the dequantizing load reads -- the codes are the stored ones.
TEST(Fp8Checkpoint, LinearWeightsKeepTheirStoredCodesAndRowScales) {
  const fs::path tmp = fs::path(::testing::TempDir()) /
                       ("tessera_fp8_codes_" + std::to_string(::getpid()));
  write_fp8_checkpoints(tmp / "fp8", tmp / "dequant");
  if (HasFatalFailure()) return;
  auto weights = open_weights((tmp / "fp8").string());
  ASSERT_TRUE(weights.ok()) << weights.status();
  const ModelConfig& config = (*weights)->config();
  CpuBackend cpu(1);
  TensorArena arena;
  WeightLoader loader(**weights, arena);
  for (const int32_t ranks : {1, 2}) {
    for (int32_t rank = 0; rank < ranks; ++rank) {
      const TensorParallelShard shard = tensor_parallel_shard(config, rank, ranks);
      for (int64_t layer = 0; layer < config.num_layers; ++layer) {
        const auto linears = decoder_layer_linear_parts(config, layer, shard);
        for (int p = 0; p < kLinearProjections; ++p) {
          const LinearWeightParts& w = linears[p];
          const absl::StatusOr<bool> fp8 = loader.stored_in_fp8(w.parts);
          ASSERT_TRUE(fp8.ok()) << fp8.status();
          EXPECT_TRUE(*fp8) << "layer " << layer << " projection " << p;
          auto codes = loader.load_fp8_codes(cpu, w.parts, w.shape.rows, w.shape.cols);
          ASSERT_TRUE(codes.ok()) << codes.status();
          ASSERT_TRUE(codes->has_value()) << "layer " << layer << " projection " << p;
          auto values = loader.load_parts(cpu, w.parts, {w.shape.rows, w.shape.cols});
          ASSERT_TRUE(values.ok()) << values.status();
          const Tensor& t = **codes;
          ASSERT_EQ(t.dtype, DType::kF8_E4M3);
          ASSERT_NE(t.scale, nullptr);
          int64_t differ = 0;
          for (int64_t r = 0; r < w.shape.rows; ++r) {
            for (int64_t c = 0; c < w.shape.cols; ++c) {
              const uint8_t code = static_cast<const uint8_t*>(t.data)[r * w.shape.cols + c];
              const float value = fp8_e4m3fn_to_float(code) * t.scale[r];
              differ += value != values->as<float>()[r * w.shape.cols + c];
            }
          }
          EXPECT_EQ(differ, 0) << "layer " << layer << " projection " << p << ", rank " << rank
                               << " of " << ranks;
        }
      }
    }
  }
  std::error_code ec;
  fs::remove_all(tmp, ec);
}

// A per-tensor checkpoint, whose rows mostly fall short of the tensor's largest value: the codes
// kept are the stored bytes themselves (quantizing the dequantized values again per row would give
// other codes for every row whose largest code is below 448), the scale each row's.
TEST(Fp8Checkpoint, PerTensorCodesAreKeptByteForByte) {
  const fs::path tmp = fs::path(::testing::TempDir()) /
                       ("tessera_fp8_tensor_codes_" + std::to_string(::getpid()));
  write_fp8_checkpoints(tmp / "fp8", tmp / "dequant", /*per_tensor=*/true);
  if (HasFatalFailure()) return;
  auto weights = open_weights((tmp / "fp8").string());
  ASSERT_TRUE(weights.ok()) << weights.status();
  const ModelConfig& config = (*weights)->config();
  ASSERT_TRUE(config.quantization.per_tensor);
  CpuBackend cpu(1);
  TensorArena arena;
  WeightLoader loader(**weights, arena);
  const auto linears = decoder_layer_linear_parts(config, 0, tensor_parallel_shard(config, 0, 1));
  int64_t rows_below_max = 0;
  for (int p = 0; p < kLinearProjections; ++p) {
    const LinearWeightParts& w = linears[p];
    auto codes = loader.load_fp8_codes(cpu, w.parts, w.shape.rows, w.shape.cols);
    ASSERT_TRUE(codes.ok()) << codes.status();
    ASSERT_TRUE(codes->has_value()) << "projection " << p;
    const Tensor& t = **codes;
    int64_t row = 0;
    for (const WeightPart& part : w.parts) {
      auto raw = (*weights)->raw(part.name);
      ASSERT_TRUE(raw.ok()) << raw.status();
      EXPECT_EQ(std::memcmp(static_cast<const uint8_t*>(t.data) + row * w.shape.cols, raw->data,
                            raw->nbytes), 0) << part.name;
      const int64_t rows = raw->info.shape[0];
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_EQ(t.scale[row + r], raw->scales.at(0, 0)) << part.name << " row " << r;
        uint32_t largest = 0;
        for (int64_t c = 0; c < w.shape.cols; ++c) {
          largest = std::max<uint32_t>(largest, raw->data[r * w.shape.cols + c] & 0x7fu);
        }
        rows_below_max += largest < 0x7eu;  // 0x7e: 448
      }
      row += rows;
    }
  }
  EXPECT_GT(rows_below_max, 0) << "no row where requantizing would have changed the codes";
  std::error_code ec;
  fs::remove_all(tmp, ec);
}

// A checkpoint whose weights are not FP8 has no codes to keep (the caller quantizes), and its
// weights are not stored in FP8 (in an FP8 checkpoint, what its ignore list leaves in higher
// precision: kept so by `quantization: fp8`).
TEST(Fp8Checkpoint, UnquantizedWeightsHaveNoStoredCodes) {
  auto weights = open_weights((kFixture / "hf").string());
  ASSERT_TRUE(weights.ok()) << weights.status();
  CpuBackend cpu(1);
  TensorArena arena;
  WeightLoader loader(**weights, arena);
  const auto linears = decoder_layer_linear_parts((*weights)->config(), 0,
                                                  tensor_parallel_shard((*weights)->config(), 0, 1));
  const LinearWeightParts& qkv = linears[static_cast<int>(LinearProjection::kQkv)];
  auto codes = loader.load_fp8_codes(cpu, qkv.parts, qkv.shape.rows, qkv.shape.cols);
  ASSERT_TRUE(codes.ok()) << codes.status();
  EXPECT_FALSE(codes->has_value());
  const absl::StatusOr<bool> fp8 = loader.stored_in_fp8(qkv.parts);
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  EXPECT_FALSE(*fp8);
}

}  // namespace
}  // namespace tessera
