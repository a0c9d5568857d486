// Tensor parallelism on CPU ranks (the in-process communicator): every family's small random model
// (tests/data/families) split over 2 and 4 ranks, and over 2 pipeline stages of 2 ranks, gives the
// one-rank model's logits within fp32 rounding (the partial sums of o and down add up in another
// order) and its greedy tokens -- transformers' -- exactly; the same through decode graphs, from
// llama.cpp's GGUF (interleaved q/k rows sliced by whole heads), and with KV heads replicated
// (4 ranks over 2 KV heads). And the refusals: a rank count that does not split the model, devices
// that do not divide into stages.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/model/tensor_parallel.h"
#include "runtime/model_instance.h"
#include "tests/unit/runtime/family_fixtures.h"

namespace tessera {
namespace {

using testing::FamilyCase;
using testing::greedy_tokens;
using testing::prompt_logits;
using testing::rel_err;
using testing::kFamilyFixtures;
using testing::read_family_cases;

// `ranks` tensor-parallel CPU ranks per stage, over `stages` pipeline stages; with `micro_batches`
// a prefill of at least 2 x 16 tokens flows through the stages in 2 parts.
InstanceOptions cpu_options(int32_t ranks, int32_t stages, DecodeGraphs graphs,
                            bool micro_batches = false) {
  InstanceOptions options;
  options.backend.kind = BackendKind::kCpu;
  options.backend.threads = 1;
  for (int32_t d = 0; d < ranks * stages && ranks * stages > 1; ++d) options.backend.devices.push_back(d);
  options.device_map = "balanced";
  options.tensor_parallel_size = ranks;
  options.execution.decode_graphs = graphs;
  options.execution.micro_batches = micro_batches ? 2 : 1;
  options.execution.min_micro_batch_tokens = 16;
  options.limits.max_batch_tokens = 512;
  options.limits.max_logit_rows = 8;
  options.engine.max_num_seqs = 8;
  options.kv_cache_bytes = 4 << 20;
  return options;
}

std::unique_ptr<ModelInstance> load(const std::filesystem::path& path, const InstanceOptions& options) {
  absl::StatusOr<std::unique_ptr<ModelInstance>> m = ModelInstance::load(path, options);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *std::move(m) : nullptr;
}


struct Split {
  int32_t ranks;
  int32_t stages;
  DecodeGraphs graphs;
  bool micro_batches = false;
  std::string name() const {
    return "tp" + std::to_string(ranks) + "x" + std::to_string(stages) + "stages" +
           (graphs == DecodeGraphs::kAlways ? "+graphs" : "") + (micro_batches ? "+microbatches" : "");
  }
};

class TensorParallelFamilies : public ::testing::TestWithParam<std::string> {
 protected:
  // The one-rank model against each split, on the cases of `key`.
  void check(const std::filesystem::path& path, const char* key) {
    const std::vector<FamilyCase> cases = read_family_cases(kFamilyFixtures / GetParam(), key);
    ASSERT_FALSE(cases.empty());
    std::unique_ptr<ModelInstance> one = load(path, cpu_options(1, 1, DecodeGraphs::kOff));
    ASSERT_NE(one, nullptr);
    std::vector<std::vector<float>> want;
    for (const FamilyCase& c : cases) want.push_back(prompt_logits(*one, c.prompt));
    one.reset();
    for (const Split& split : {Split{2, 1, DecodeGraphs::kOff}, Split{4, 1, DecodeGraphs::kOff},
                               Split{2, 2, DecodeGraphs::kOff}, Split{2, 1, DecodeGraphs::kAlways},
                               Split{2, 2, DecodeGraphs::kAlways, true}}) {
      std::unique_ptr<ModelInstance> m =
          load(path, cpu_options(split.ranks, split.stages, split.graphs, split.micro_batches));
      ASSERT_NE(m, nullptr) << split.name();
      EXPECT_EQ(m->tensor_parallel_size(), split.ranks);
      EXPECT_EQ(m->collectives(), "in-process");
      EXPECT_EQ(static_cast<int32_t>(m->backends().size()), split.ranks * split.stages);
      for (size_t i = 0; i < cases.size(); ++i) {
        const double e = rel_err(prompt_logits(*m, cases[i].prompt), want[i]);
        EXPECT_LT(e, 2e-6) << split.name() << " prompt " << i;
        std::printf("[ metric ] %s %s prompt %zu logits rel_err vs one rank %.2e\n",
                    GetParam().c_str(), split.name().c_str(), i, e);
      }
      const std::vector<std::vector<int32_t>> greedy = greedy_tokens(*m, cases);
      ASSERT_EQ(greedy.size(), cases.size());
      for (size_t i = 0; i < cases.size(); ++i) {
        EXPECT_EQ(greedy[i], cases[i].greedy) << split.name() << " prompt " << i;
      }
      if (split.micro_batches) EXPECT_GT(m->runner().micro_batched_steps(), 0) << split.name();
      if (split.graphs == DecodeGraphs::kAlways) EXPECT_GT(m->runner().graph_steps(), 0) << split.name();
    }
  }
};

TEST_P(TensorParallelFamilies, HfDirectoryGivesTheOneRankModel) {
  check(kFamilyFixtures / GetParam() / "hf", "cases");
}

INSTANTIATE_TEST_SUITE_P(Families, TensorParallelFamilies,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3",
                                           "phi3"),
                         [](const auto& info) { return info.param; });

// llama.cpp's GGUF stores q and k rows interleaved per head: the ranks take whole heads.
TEST(TensorParallel, GgufFileGivesTheOneRankModel) {
  const std::filesystem::path dir = kFamilyFixtures / "llama";
  const std::vector<FamilyCase> cases = read_family_cases(dir, "gguf_cases");
  ASSERT_FALSE(cases.empty());
  std::unique_ptr<ModelInstance> one = load(dir / "llama.gguf", cpu_options(1, 1, DecodeGraphs::kOff));
  std::unique_ptr<ModelInstance> two = load(dir / "llama.gguf", cpu_options(2, 1, DecodeGraphs::kOff));
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_LT(rel_err(prompt_logits(*two, cases[i].prompt), prompt_logits(*one, cases[i].prompt)), 2e-6)
        << "prompt " << i;
  }
  const std::vector<std::vector<int32_t>> greedy = greedy_tokens(*two, cases);
  ASSERT_EQ(greedy.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(greedy[i], cases[i].greedy) << "prompt " << i;
}

TEST(TensorParallel, RefusesARankCountThatDoesNotSplitTheModel) {
  // The fixtures have 4 heads, 2 KV heads and an intermediate size of 160.
  const std::filesystem::path hf = kFamilyFixtures / "llama" / "hf";
  absl::StatusOr<std::unique_ptr<ModelInstance>> m =
      ModelInstance::load(hf, cpu_options(3, 1, DecodeGraphs::kOff));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("tensor_parallel_size: 3 does not divide the model's 4 "
                                      "attention heads"),
            std::string::npos)
      << m.status();
}

TEST(TensorParallel, RefusesDevicesThatDoNotFormStages) {
  InstanceOptions options = cpu_options(2, 1, DecodeGraphs::kOff);
  options.backend.devices = {0, 1, 2};
  absl::StatusOr<std::unique_ptr<ModelInstance>> m =
      ModelInstance::load(kFamilyFixtures / "llama" / "hf", options);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("tensor_parallel_size: 2 does not divide the 3 devices"),
            std::string::npos)
      << m.status();
}

// A cap for a device no stage holds is a typo, refused as it is without tensor parallelism (the
// planner sees stages by their first device only and could not tell).
TEST(TensorParallel, RefusesAMaxMemoryForADeviceNotListed) {
  InstanceOptions options = cpu_options(2, 2, DecodeGraphs::kOff);
  options.max_memory = "1=1GiB,7=1GiB";
  absl::StatusOr<std::unique_ptr<ModelInstance>> m =
      ModelInstance::load(kFamilyFixtures / "llama" / "hf", options);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("max_memory: device 7 is not among the devices (0, 1, 2, 3)"),
            std::string::npos)
      << m.status();
}

TEST(TensorParallel, PlanTableSaysEachStagesRanksAndPerDeviceBytes) {
  std::unique_ptr<ModelInstance> m =
      load(kFamilyFixtures / "qwen3" / "hf", cpu_options(2, 2, DecodeGraphs::kOff));
  ASSERT_NE(m, nullptr);
  const PlacementPlan& plan = m->plan();
  EXPECT_EQ(plan.tensor_parallel_size, 2);
  ASSERT_EQ(plan.devices.size(), 2u);
  EXPECT_EQ(plan.devices[0].ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(plan.devices[1].ranks, (std::vector<int32_t>{2, 3}));
  // Every device's share, summed over the ranks, is what was loaded.
  uint64_t per_device = 0;
  for (const DevicePlacement& d : plan.devices) per_device += d.weight_bytes;
  EXPECT_EQ(per_device * 2, plan.weight_bytes);
  EXPECT_EQ(plan.weight_bytes, m->weight_bytes());
}

// kv_cache_bytes is the whole cache over every device: split over 2 ranks (each holding one of
// the 2 KV heads) it holds as many blocks as on one; over 4 (the heads replicated) half as many.
TEST(TensorParallel, KvCacheBytesCountEveryRank) {
  std::vector<int64_t> blocks;
  for (int32_t ranks : {1, 2, 4}) {
    InstanceOptions options = cpu_options(ranks, 1, DecodeGraphs::kOff);
    options.kv_cache_bytes = 256 << 10;  // 32 blocks of the fixture on one rank: below every cap
    std::unique_ptr<ModelInstance> m = load(kFamilyFixtures / "llama" / "hf", options);
    ASSERT_NE(m, nullptr);
    blocks.push_back(m->cache().allocator().num_blocks());
  }
  EXPECT_EQ(blocks[0], 32);
  EXPECT_EQ(blocks[1], blocks[0]);
  EXPECT_EQ(blocks[2], blocks[0] / 2);
}

// Warmup tunes the GEMMs a rank runs: its share of q/k/v, gate/up and the vocabulary.
TEST(TensorParallel, WarmupPlansTheGemmsOfOneRank) {
  std::unique_ptr<ModelInstance> m = load(kFamilyFixtures / "llama" / "hf", cpu_options(2, 1, DecodeGraphs::kOff));
  ASSERT_NE(m, nullptr);
  absl::StatusOr<std::vector<WarmupGemm>> plan = m->tuning().plan(m->tuning().default_spec());
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::set<std::pair<int64_t, int64_t>> nk;  // (out features, in features) of every GEMM
  for (const WarmupGemm& g : *plan) nk.insert({g.signature.m, g.signature.k});
  // hidden 64, 4 heads of 16 (2 a rank), 2 KV heads (1 a rank), intermediate 160 (80), vocab 335
  // (168 rows a rank).
  EXPECT_EQ(nk, (std::set<std::pair<int64_t, int64_t>>{{64, 64}, {64, 32}, {160, 64}, {64, 80}, {168, 64}}));
}

TEST(TensorParallel, ShardsSplitOrReplicateTheKvHeads) {
  ModelConfig c;
  c.num_heads = 64;
  c.num_kv_heads = 8;
  c.intermediate_size = 28672;
  c.vocab_size = 128257;  // one more than divides by 4: the last rank holds the padding
  const TensorParallelShard r3 = tensor_parallel_shard(c, 3, 4);
  EXPECT_EQ(r3.heads, 16);
  EXPECT_EQ(r3.first_head, 48);
  EXPECT_EQ(r3.kv_heads, 2);
  EXPECT_EQ(r3.first_kv_head, 6);
  EXPECT_EQ(r3.intermediate, 7168);
  EXPECT_EQ(r3.first_intermediate, 21504);
  EXPECT_EQ(r3.vocab_rows, 32065);
  EXPECT_EQ(r3.first_vocab, 96195);
  EXPECT_EQ(r3.vocab_real, 32062);
  // 16 ranks over 8 KV heads: each pair of ranks reads, and holds, one.
  const TensorParallelShard r13 = tensor_parallel_shard(c, 13, 16);
  EXPECT_EQ(r13.kv_heads, 1);
  EXPECT_EQ(r13.first_kv_head, 6);
  c.num_kv_heads = 6;
  c.num_heads = 24;
  const absl::Status s = check_tensor_parallel(c, 4);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("4 and the model's 6 key/value heads"), std::string::npos) << s;
  c.intermediate_size = 1000;
  c.num_kv_heads = 8;
  c.num_heads = 16;
  EXPECT_NE(check_tensor_parallel(c, 16).message().find("intermediate_size 1000"), std::string::npos);
  EXPECT_NE(check_tensor_parallel(c, 0).message().find("not a positive count"), std::string::npos);
}

}  // namespace
}  // namespace tessera
