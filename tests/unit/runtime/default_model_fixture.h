// The default model (SmolLM2-135M-Instruct Q4_1, 30 layers) loaded through ModelInstance on the
// CPU backend, and greedy generation of several prompts at once stepped on the test's thread.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/model_instance.h"

namespace tessera {

inline const char* kModel = TESSERA_DEFAULT_MODEL;

class DefaultModel : public ::testing::Test {
 protected:
  // Small limits on one CPU thread; `options` as the test adjusts them (placement, execution).
  static InstanceOptions small_options(int32_t max_batch_tokens) {
    InstanceOptions options;
    options.backend.kind = BackendKind::kCpu;
    options.backend.threads = 1;
    options.limits.max_batch_tokens = max_batch_tokens;
    options.limits.max_logit_rows = 8;
    options.engine.max_num_seqs = 8;
    options.kv_cache_bytes = 64 << 20;
    return options;
  }

  static std::unique_ptr<ModelInstance> load(const InstanceOptions& options) {
    auto inst = ModelInstance::load(kModel, options);
    EXPECT_TRUE(inst.ok()) << inst.status();
    return inst.ok() ? *std::move(inst) : nullptr;
  }
  static std::unique_ptr<ModelInstance> load(int32_t max_batch_tokens) {
    return load(small_options(max_batch_tokens));
  }

  void SetUp() override {
    if (!std::filesystem::exists(kModel)) GTEST_SKIP() << "default model missing: " << kModel;
  }

  static SamplingParams greedy() {
    SamplingParams p;
    p.temperature = 0;
    return p;
  }

  // Tokens for each prompt (greedy unless told), all submitted at once and stepped on this thread.
  static std::vector<std::vector<int32_t>> generate(ModelInstance& m, const std::vector<std::string>& prompts,
                                                    int32_t max_tokens,
                                                    const SamplingParams& sampling = greedy()) {
    std::vector<RequestHandle> handles;
    for (const std::string& p : prompts) {
      auto r = std::make_shared<Request>();
      r->prompt = *m.tokenizer().encode(p);
      r->sampling = sampling;
      r->stop.max_tokens = max_tokens;
      r->stop.ignore_eos = true;
      handles.push_back(*m.engine().submit(r));
    }
    return drain(m, handles);
  }

  // Steps the engine on this thread until every handle's request has finished; each one's tokens.
  static std::vector<std::vector<int32_t>> drain(ModelInstance& m,
                                                 const std::vector<RequestHandle>& handles) {
    std::vector<std::vector<int32_t>> out(handles.size());
    size_t done = 0;
    while (done < handles.size()) {
      m.engine().step();
      for (size_t i = 0; i < handles.size(); ++i) {
        while (auto o = handles[i].stream->try_next()) {
          out[i].insert(out[i].end(), o->token_ids.begin(), o->token_ids.end());
          if (o->finished) {
            EXPECT_TRUE(o->status.ok()) << o->status;
            ++done;
          }
        }
      }
    }
    return out;
  }
};

}  // namespace tessera
