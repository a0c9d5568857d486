// Test helpers shared by the checks over the families' fixture models (tests/data/families, made
// by tests/reference/make_family_fixtures.py): the fixtures and transformers' expected outputs,
// a prompt's logits in one prefill step straight through the runner, greedy tokens through the
// engine, and the relative error of two logit vectors.
#pragma once

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/model_instance.h"

namespace tessera::testing {

inline const std::filesystem::path kFamilyFixtures =
    std::filesystem::path(TESSERA_SOURCE_DIR) / "tests/data/families";

// One prompt of a fixture's expected.json, with what transformers computed for it.
struct FamilyCase {
  std::vector<int32_t> prompt;
  std::vector<float> logits;    // [vocab] after the whole prompt (fp32)
  std::vector<int32_t> greedy;  // greedy continuation, eos ignored
};

// The cases under `key` ("cases", or "gguf_cases": what the GGUF file describes) of the fixture
// directory `dir`; a test failure when the file is missing.
inline std::vector<FamilyCase> read_family_cases(const std::filesystem::path& dir, const char* key) {
  std::ifstream in(dir / "expected.json");
  EXPECT_TRUE(in) << "missing " << dir / "expected.json";
  std::vector<FamilyCase> out;
  if (!in) return out;
  const nlohmann::json expected = nlohmann::json::parse(in);
  for (const auto& c : expected.at(key)) {
    out.push_back({c.at("prompt_ids").get<std::vector<int32_t>>(),
                   c.at("logits").get<std::vector<float>>(),
                   c.at("greedy_ids").get<std::vector<int32_t>>()});
  }
  return out;
}

// fp32 logits after `prompt`, in one prefill step straight through the runner.
inline std::vector<float> prompt_logits(ModelInstance& m, const std::vector<int32_t>& prompt) {
  const int32_t n = static_cast<int32_t>(prompt.size()), bs = m.cache().block_size();
  BlockTable table;
  EXPECT_TRUE(table.reserve(n, bs, m.cache().allocator()));
  StepBatch batch = sequence_chunk(table, bs, prompt, 0, n);
  batch.logits_rows = {n - 1};
  std::vector<float> logits(static_cast<size_t>(m.config().vocab_size));
  const absl::Status s = m.runner().forward(batch, m.cache(), logits);
  EXPECT_TRUE(s.ok()) << s;
  table.release(m.cache().allocator());
  return logits;
}

// Greedy tokens of every case at once through the engine (one batch: prefill, then decode steps
// reading the paged cache), as many as each case's expected continuation.
inline std::vector<std::vector<int32_t>> greedy_tokens(ModelInstance& m,
                                                       const std::vector<FamilyCase>& cases) {
  std::vector<RequestHandle> handles;
  for (const FamilyCase& c : cases) {
    auto r = std::make_shared<Request>();
    r->prompt = c.prompt;
    r->sampling.temperature = 0;
    r->stop.max_tokens = static_cast<int32_t>(c.greedy.size());
    r->stop.ignore_eos = true;
    absl::StatusOr<RequestHandle> h = m.engine().submit(r);
    EXPECT_TRUE(h.ok()) << h.status();
    if (!h.ok()) return {};
    handles.push_back(*std::move(h));
  }
  std::vector<std::vector<int32_t>> out(cases.size());
  for (size_t done = 0; done < cases.size();) {
    m.engine().step();
    for (size_t i = 0; i < handles.size(); ++i) {
      while (auto o = handles[i].stream->try_next()) {
        out[i].insert(out[i].end(), o->token_ids.begin(), o->token_ids.end());
        EXPECT_TRUE(o->status.ok()) << o->status;
        done += o->finished ? 1 : 0;
      }
    }
  }
  return out;
}

// ||got - want|| / ||want|| (infinite when the sizes differ).
inline double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    num += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    den += static_cast<double>(want[i]) * want[i];
  }
  return got.size() == want.size() ? std::sqrt(num / den) : INFINITY;
}

}  // namespace tessera::testing
