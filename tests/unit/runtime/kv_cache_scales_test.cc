// An FP8 KV cache's scales on the CPU: the checkpoint reader (vLLM's k_scale / v_scale,
// compressed-tensors' output_scale, the older kv_scale; every malformed case named), the
// calibration step (its scales are the largest |k| and |v| the prefill wrote, measured
// independently from the fp32 cache, times the headroom over e4m3fn's 448), and the CPU
// backend's refusal of kv_cache_dtype: fp8.
#include "runtime/kv_cache_scales.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/backend/quantization.h"
#include "runtime/model_instance.h"
#include "runtime/model_io/safetensors_file.h"
#include "tests/unit/model/safetensors_builder.h"
#include "tests/unit/runtime/family_fixtures.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
const fs::path kFixture = testing::kFamilyFixtures / "llama";

// The fixture's HF directory with `extra` tensors added to its weights, at a fresh path.
class ScaledCheckpoint {
 public:
  using Extra = std::function<void(testing::SafetensorsBuilder&, int32_t layers)>;
  explicit ScaledCheckpoint(const Extra& extra) {
    static int counter = 0;
    dir_ = fs::path(::testing::TempDir()) /
           ("tessera_kv_scales_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
    const fs::path src = kFixture / "hf";
    for (const char* name : {"config.json", "tokenizer.json", "tokenizer_config.json",
                             "generation_config.json"}) {
      fs::copy_file(src / name, dir_ / name, fs::copy_options::overwrite_existing);
    }
    auto file = SafetensorsFile::open((src / "model.safetensors").string());
    EXPECT_TRUE(file.ok()) << file.status();
    testing::SafetensorsBuilder b;
    int32_t layers = 0;
    for (const SafetensorsTensor& t : (*file)->tensors()) {
      const std::span<const uint8_t> bytes = (*file)->tensor_bytes(t);
      b.tensor(t.name, "F32", t.shape, bytes.data(), bytes.size());
      if (t.name.ends_with("input_layernorm.weight")) ++layers;
    }
    extra(b, layers);
    std::ofstream out(dir_ / "model.safetensors", std::ios::binary | std::ios::trunc);
    out << b.build();
  }
  ~ScaledCheckpoint() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  absl::StatusOr<std::optional<std::vector<LayerKvScales>>> read() const {
    auto weights = open_weights(dir_.string());
    if (!weights.ok()) return weights.status();
    return read_checkpoint_kv_scales(**weights, static_cast<int32_t>((*weights)->config().num_layers));
  }

 private:
  fs::path dir_;
};

void scalar(testing::SafetensorsBuilder& b, const std::string& name, float v,
            std::vector<int64_t> shape = {}) {
  std::vector<float> values(1, v);
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  values.resize(static_cast<size_t>(count), v);
  b.tensor(name, "F32", shape, values.data(), values.size() * 4);
}

std::string attn(int32_t layer) { return "model.layers." + std::to_string(layer) + ".self_attn."; }

TEST(CheckpointKvScales, NoneWhenTheCheckpointHasNone) {
  const ScaledCheckpoint c([](testing::SafetensorsBuilder&, int32_t) {});
  auto scales = c.read();
  ASSERT_TRUE(scales.ok()) << scales.status();
  EXPECT_FALSE(scales->has_value());
}

TEST(CheckpointKvScales, ReadsEachLayersKAndVScales) {
  const ScaledCheckpoint c([](testing::SafetensorsBuilder& b, int32_t layers) {
    for (int32_t i = 0; i < layers; ++i) {
      scalar(b, attn(i) + "k_scale", 0.5f + static_cast<float>(i));
      scalar(b, attn(i) + "v_scale", 0.25f * static_cast<float>(i + 1), {1});
    }
  });
  auto scales = c.read();
  ASSERT_TRUE(scales.ok()) << scales.status();
  ASSERT_TRUE(scales->has_value());
  ASSERT_GE((*scales)->size(), 2u);
  for (size_t i = 0; i < (*scales)->size(); ++i) {
    EXPECT_EQ((**scales)[i].k, 0.5f + static_cast<float>(i));
    EXPECT_EQ((**scales)[i].v, 0.25f * static_cast<float>(i + 1));
  }
}

TEST(CheckpointKvScales, ReadsOutputScalesAndTheOlderSharedKvScale) {
  const ScaledCheckpoint c([](testing::SafetensorsBuilder& b, int32_t layers) {
    for (int32_t i = 0; i < layers; ++i) {
      if (i % 2 == 0) {
        scalar(b, attn(i) + "k_proj.output_scale", 2.0f);
        scalar(b, attn(i) + "v_proj.output_scale", 3.0f);
      } else {
        scalar(b, attn(i) + "kv_scale", 4.0f);
      }
    }
  });
  auto scales = c.read();
  ASSERT_TRUE(scales.ok()) << scales.status();
  ASSERT_TRUE(scales->has_value());
  ASSERT_GE((*scales)->size(), 2u);  // the fixture's layers, even and odd
  for (size_t i = 0; i < (*scales)->size(); ++i) {
    EXPECT_EQ((**scales)[i].k, i % 2 == 0 ? 2.0f : 4.0f);
    EXPECT_EQ((**scales)[i].v, i % 2 == 0 ? 3.0f : 4.0f);
  }
}

TEST(CheckpointKvScales, NamesAMissingLayer) {
  const ScaledCheckpoint c([](testing::SafetensorsBuilder& b, int32_t layers) {
    for (int32_t i = 0; i < layers; ++i) {
      if (i == 1) continue;
      scalar(b, attn(i) + "k_scale", 1.0f);
      scalar(b, attn(i) + "v_scale", 1.0f);
    }
  });
  auto scales = c.read();
  ASSERT_FALSE(scales.ok());
  EXPECT_THAT(scales.status().message(), HasSubstr("missing model.layers.1.self_attn.k_scale"));
}

TEST(CheckpointKvScales, NamesAScaleThatIsNotOnePositiveValue) {
  for (const auto& [shape, value, what] :
       {std::tuple<std::vector<int64_t>, float, const char*>{{2}, 1.0f, "holds 2"},
        {{}, 0.0f, "finite and positive"},
        {{}, -1.0f, "finite and positive"},
        {{}, NAN, "NaN"}}) {
    const ScaledCheckpoint c([&](testing::SafetensorsBuilder& b, int32_t layers) {
      for (int32_t i = 0; i < layers; ++i) {
        scalar(b, attn(i) + "k_scale", 1.0f);
        if (i == 0) {
          scalar(b, attn(i) + "v_scale", value, shape);
        } else {
          scalar(b, attn(i) + "v_scale", 1.0f);
        }
      }
    });
    auto scales = c.read();
    ASSERT_FALSE(scales.ok()) << what;
    EXPECT_THAT(scales.status().message(), HasSubstr("model.layers.0.self_attn.v_scale"));
    EXPECT_THAT(scales.status().message(), HasSubstr(what));
  }
}

InstanceOptions cpu_options() {
  InstanceOptions options;
  options.backend.kind = BackendKind::kCpu;
  options.backend.threads = 1;
  options.limits.max_batch_tokens = 64;  // the calibration text runs in several chunks
  options.limits.max_logit_rows = 8;
  options.engine.max_num_seqs = 4;
  options.kv_cache_bytes = 4 << 20;
  return options;
}

// The calibration's scales against the largest |k| and |v| the same prefill leaves in the fp32
// cache, read back from it after a plain run of the same tokens (the fp32 cache quantizes
// nothing, so both calibration passes measure the same).
TEST(KvCalibration, ScalesAreTheLargestKeysAndValuesWrittenOverTheCodeRange) {
  auto m = ModelInstance::load(kFixture / "hf", cpu_options());
  ASSERT_TRUE(m.ok()) << m.status();
  ModelInstance& inst = **m;
  std::vector<int32_t> tokens = *inst.tokenizer().encode(kKvCalibrationText);
  ASSERT_GT(tokens.size(), 200u);
  const int32_t limit = static_cast<int32_t>(inst.engine().config().max_model_len);
  if (static_cast<int32_t>(tokens.size()) > limit) tokens.resize(limit);

  auto scales = calibrate_kv_scales(inst.runner(), inst.cache(), tokens);
  ASSERT_TRUE(scales.ok()) << scales.status();
  ASSERT_EQ(scales->size(), static_cast<size_t>(inst.config().num_layers));
  // The same blocks again (the free list hands them back in the same order), without
  // calibration: the cache then holds exactly the values the calibration step measured.
  KvCache& cache = inst.cache();
  const int32_t bs = cache.block_size(), n = static_cast<int32_t>(tokens.size());
  BlockTable table;
  ASSERT_TRUE(table.reserve(n, bs, cache.allocator()));
  std::vector<float> logits(static_cast<size_t>(inst.config().vocab_size));
  for (int32_t first = 0; first < n; first += 64) {
    const int32_t count = std::min(64, n - first);
    StepBatch batch = sequence_chunk(table, bs, tokens, first, count);
    batch.logits_rows = {count - 1};
    ASSERT_TRUE(inst.runner().forward(batch, cache, logits).ok());
  }
  const int64_t row = static_cast<int64_t>(cache.shape().num_kv_heads) * cache.shape().head_dim;
  for (int32_t layer = 0; layer < cache.shape().num_layers; ++layer) {
    const KvLayerView view = cache.layer(layer);
    EXPECT_EQ(view.amax, nullptr);
    float k = 0.0f, v = 0.0f;
    for (int32_t p = 0; p < n; ++p) {
      const int64_t slot = table.slot(p, bs);
      for (int64_t i = 0; i < row; ++i) {
        k = std::max(k, std::fabs(view.k.as<float>()[slot * row + i]));
        v = std::max(v, std::fabs(view.v.as<float>()[slot * row + i]));
      }
    }
    ASSERT_GT(k, 0.0f);
    EXPECT_FLOAT_EQ((*scales)[layer].k, k * kKvCalibrationHeadroom / 448.0f) << "layer " << layer;
    EXPECT_FLOAT_EQ((*scales)[layer].v, v * kKvCalibrationHeadroom / 448.0f) << "layer " << layer;
    EXPECT_EQ(cache.k_scale(layer), (*scales)[layer].k);  // set on the cache too
    EXPECT_EQ(cache.v_scale(layer), (*scales)[layer].v);
  }
  table.release(cache.allocator());
  EXPECT_EQ(cache.allocator().num_free(), cache.allocator().num_blocks());
}

TEST(KvCacheDtype, ParsesItsChoicesAndNamesABadOne) {
  EXPECT_EQ(*parse_kv_cache_dtype("auto"), KvCacheDtype::kAuto);
  EXPECT_EQ(*parse_kv_cache_dtype(""), KvCacheDtype::kAuto);
  EXPECT_EQ(*parse_kv_cache_dtype("fp8"), KvCacheDtype::kFp8);
  const absl::StatusOr<KvCacheDtype> bad = parse_kv_cache_dtype("int4");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("kv_cache_dtype: \"int4\""));
  EXPECT_EQ(kv_cache_dtype_name(KvCacheDtype::kFp8), "fp8");
}

TEST(KvCacheDtype, TheCpuBackendRefusesFp8NamingTheKeyAndTheBackend) {
  InstanceOptions options = cpu_options();
  options.kv_cache_dtype = KvCacheDtype::kFp8;
  auto m = ModelInstance::load(kFixture / "hf", options);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(m.status().message(), HasSubstr("kv_cache_dtype: fp8"));
  EXPECT_THAT(m.status().message(), HasSubstr("cpu"));
}

}  // namespace
}  // namespace tessera
