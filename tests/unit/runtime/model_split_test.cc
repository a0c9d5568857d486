// The default model split over several CPU "devices" (runtime/placement/ + the pipeline stages of
// LlamaModel) must give exactly the tokens of one device: every strategy, an explicit map, a
// max_memory cap that forces the split, micro-batches through the stages, GEMM padding. And the
// placement errors reach the caller with the key and value that were wrong.
#include <gtest/gtest.h>

#include "tests/unit/runtime/default_model_fixture.h"

namespace tessera {
namespace {

const std::vector<std::string> kPrompts = {
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
    "def quicksort(arr):",
    "The three primary colors are",
};

class ModelSplit : public DefaultModel {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(kModel)) return;
    auto one = load(small_options(16));
    ASSERT_NE(one, nullptr);
    baseline_ = new std::vector<std::vector<int32_t>>(generate(*one, kPrompts, 10));
  }
  static void TearDownTestSuite() {
    delete baseline_;
    baseline_ = nullptr;
  }

  // Loads with `options`, checks each device's layer count, and generates the prompts.
  static void expect_same_tokens(const InstanceOptions& options, const std::vector<int32_t>& layers) {
    auto m = load(options);
    ASSERT_NE(m, nullptr);
    std::vector<int32_t> got;
    for (const DevicePlacement& d : m->plan().devices) got.push_back(d.num_layers());
    EXPECT_EQ(got, layers);
    EXPECT_EQ(generate(*m, kPrompts, 10), *baseline_);
  }

  static std::vector<std::vector<int32_t>>* baseline_;
};
std::vector<std::vector<int32_t>>* ModelSplit::baseline_ = nullptr;

TEST_F(ModelSplit, BalancedOverTwoDevices) {
  InstanceOptions o = small_options(16);
  o.backend.devices = {0, 1};
  expect_same_tokens(o, {15, 15});
}

TEST_F(ModelSplit, SequentialOverThreeDevicesUnderMaxMemory) {
  // fp32 layers of this model are ~13.5 MiB each (embeddings ~113 MiB go with layer 0): caps
  // that leave room for a few layers on devices 0 and 1 push the rest to device 2.
  InstanceOptions o = small_options(16);
  o.backend.devices = {0, 1, 2};
  o.device_map = "sequential";
  o.max_memory = "0=260MiB,1=150MiB";
  o.kv_reserve_bytes = 8 << 20;
  auto m = load(o);
  ASSERT_NE(m, nullptr);
  const auto& d = m->plan().devices;
  ASSERT_EQ(d.size(), 3u);
  EXPECT_GT(d[0].num_layers(), 0);
  EXPECT_GT(d[1].num_layers(), 0);
  EXPECT_GT(d[2].num_layers(), 0);
  EXPECT_EQ(d[0].num_layers() + d[1].num_layers() + d[2].num_layers(), 30);
  EXPECT_EQ(generate(*m, kPrompts, 10), *baseline_);
}

TEST_F(ModelSplit, ExplicitMap) {
  InstanceOptions o = small_options(16);
  o.backend.devices = {0, 1};
  o.device_map = "model.embed_tokens=0,model.layers.0-3=0,model.layers.4-29=1,model.norm=1,lm_head=1";
  expect_same_tokens(o, {4, 26});
}

TEST_F(ModelSplit, MicroBatchesThroughTheStages) {
  // Three prompts decode together: each step's batch is split into parts of tokens that flow
  // through the two stages one after the other; chunked prefill (16 tokens a step) is cut inside
  // a sequence's chunk too, whose later part reads the earlier part's K/V from the cache.
  for (int32_t parts : {2, 3}) {
    InstanceOptions o = small_options(16);
    o.backend.devices = {0, 1};
    o.execution.micro_batches = parts;
    o.execution.min_micro_batch_tokens = 1;
    SCOPED_TRACE(parts);
    auto m = load(o);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(generate(*m, kPrompts, 10), *baseline_);
    EXPECT_GT(m->runner().micro_batched_steps(), 0);
    EXPECT_EQ(m->engine().stats().micro_batched_steps_total.load(), m->runner().micro_batched_steps());
  }
}

TEST_F(ModelSplit, StepsBelowTheMicroBatchMinimumRunWhole) {
  // Parts of fewer than min_micro_batch_tokens would each read every weight for little work: a
  // 16-token step with the default minimum (256) is never split.
  InstanceOptions o = small_options(16);
  o.backend.devices = {0, 1};
  o.execution.micro_batches = 2;
  auto m = load(o);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(generate(*m, kPrompts, 10), *baseline_);
  EXPECT_EQ(m->runner().micro_batched_steps(), 0);
}

TEST_F(ModelSplit, GemmPaddingToBuckets) {
  // Padding rows run through every GEMM and must not leak into any real row.
  InstanceOptions o = small_options(16);
  o.backend.devices = {0, 1};
  o.execution.micro_batches = 2;
  o.execution.min_micro_batch_tokens = 1;
  o.execution.gemm_buckets = TokenBuckets{{1, 2, 4, 8}, 8};
  expect_same_tokens(o, {15, 15});
}

TEST_F(ModelSplit, ErrorsNameWhatWasWrong) {
  auto error_of = [](const InstanceOptions& o) {
    auto m = ModelInstance::load(kModel, o);
    EXPECT_FALSE(m.ok());
    return m.ok() ? std::string() : std::string(m.status().message());
  };
  InstanceOptions o = small_options(16);
  o.backend.devices = {0, 1};
  o.max_memory = "0=50MiB,1=50MiB";
  const std::string too_small = error_of(o);
  EXPECT_NE(too_small.find("cpu"), std::string::npos) << too_small;
  EXPECT_NE(too_small.find("max_memory"), std::string::npos) << too_small;

  o = small_options(16);
  o.backend.devices = {0, 1};
  o.device_map = "model.embed_tokens=0,model.layers.0-14=0,model.norm=1,lm_head=1";
  EXPECT_NE(error_of(o).find("model.layers.15"), std::string::npos) << error_of(o);

  o = small_options(16);
  o.backend.devices = {0, 0};
  EXPECT_NE(error_of(o).find("listed twice"), std::string::npos);

  o = small_options(16);
  o.max_memory = "0=lots";
  EXPECT_NE(error_of(o).find("lots"), std::string::npos);

  o = small_options(16);
  o.backend.devices = {0, 1};
  o.max_memory = "2=1GiB";
  EXPECT_NE(error_of(o).find("max_memory: device 2"), std::string::npos) << error_of(o);
}

}  // namespace
}  // namespace tessera
