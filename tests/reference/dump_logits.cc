// Writes, as JSON, what tessera computes for each prompt: the prompt's token ids, the fp32
// next-token logits after the whole prompt, and 64 greedy tokens (eos ignored). The comparison
// script (compare_transformers.py) runs transformers on the same weights and compares.
//
// A prompt "ids:1,2,3|7,8,9" gives a forced continuation instead (teacher forcing): one prefill
// over prompt + continuation, and for each continuation token tessera's argmax where it is
// predicted ("forced_argmax") and that row's top-2 logit margin ("forced_margin"); no greedy run.
//
//   dump_logits MODEL OUT.json PROMPT [PROMPT...]
//   TESSERA_BACKEND=auto|cpu|gpu picks the backend (default auto: a GPU when one is visible).
//   TESSERA_DTYPE=bfloat16|float16 (or bf16|fp16) is the GPU compute dtype, as tesserad's dtype.
//   TESSERA_DEVICES=0,1 (or all), TESSERA_DEVICE_MAP and TESSERA_MAX_MEMORY split the model as
//   tesserad's devices / device_map / max_memory keys do; TESSERA_MICRO_BATCHES=N splits steps of
//   at least N x 256 tokens into N micro-batches (the micro_batches key);
//   TESSERA_TENSOR_PARALLEL_SIZE=N splits each stage's layers over N devices.
//   TESSERA_QUANTIZATION=fp8 keeps the decoder's linear weights in FP8 (the quantization key).
//   TESSERA_KV_CACHE_DTYPE=fp8 keeps the KV cache in FP8 (the kv_cache_dtype key).
//   TESSERA_KV_CACHE_BYTES=N sizes the KV cache (default 256 MiB; long prompts of large models
//   need more).
//   A PROMPT written "ids:1,2,3" is those token ids, not text (models without a real tokenizer).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "runtime/model_instance.h"
#include "runtime/placement/device_map.h"

namespace {

constexpr int kGreedyTokens = 64;
constexpr int kMaxForced = 64;  // continuation tokens one forced prompt may have

// "1,2,3" -> ids; false on a bad number.
bool parse_ids(const std::string& list, std::vector<int32_t>* ids) {
  std::istringstream in(list);
  for (std::string id; std::getline(in, id, ',');) {
    int32_t value = 0;
    if (!absl::SimpleAtoi(id, &value)) return false;
    ids->push_back(value);
  }
  return true;
}

int fail(const std::string& what) {
  std::fprintf(stderr, "dump_logits: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessera;
  if (argc < 4) return fail("usage: dump_logits MODEL OUT.json PROMPT [PROMPT...]");
  InstanceOptions options;
  const char* backend = std::getenv("TESSERA_BACKEND");
  auto kind = parse_backend_kind(backend != nullptr ? backend : "auto");
  if (!kind.ok()) return fail(kind.status().ToString());
  options.backend.kind = *kind;
  if (const char* dtype = std::getenv("TESSERA_DTYPE"); dtype != nullptr) {
    auto parsed = parse_gpu_dtype(dtype);
    if (!parsed.ok()) return fail(parsed.status().ToString());
    options.backend.gpu_dtype = *parsed;
  }
  if (const char* devices = std::getenv("TESSERA_DEVICES"); devices != nullptr) {
    if (std::string_view(devices) == "all") {
      options.backend.all_devices = true;
    } else {
      auto list = parse_devices(devices);
      if (!list.ok()) return fail(list.status().ToString());
      options.backend.devices = *std::move(list);
    }
  }
  if (const char* map = std::getenv("TESSERA_DEVICE_MAP"); map != nullptr) options.device_map = map;
  if (const char* caps = std::getenv("TESSERA_MAX_MEMORY"); caps != nullptr) options.max_memory = caps;
  if (const char* q = std::getenv("TESSERA_QUANTIZATION"); q != nullptr) {
    auto parsed = parse_quantization(q);
    if (!parsed.ok()) return fail(parsed.status().ToString());
    options.quantization = *parsed;
  }
  if (const char* kv = std::getenv("TESSERA_KV_CACHE_DTYPE"); kv != nullptr) {
    auto parsed = parse_kv_cache_dtype(kv);
    if (!parsed.ok()) return fail(parsed.status().ToString());
    options.kv_cache_dtype = *parsed;
  }
  if (const char* tp = std::getenv("TESSERA_TENSOR_PARALLEL_SIZE"); tp != nullptr) {
    if (!absl::SimpleAtoi(tp, &options.tensor_parallel_size)) {
      return fail(std::string("TESSERA_TENSOR_PARALLEL_SIZE: not an integer: ") + tp);
    }
  }
  if (const char* parts = std::getenv("TESSERA_MICRO_BATCHES"); parts != nullptr) {
    if (!absl::SimpleAtoi(parts, &options.execution.micro_batches)) {
      return fail(std::string("TESSERA_MICRO_BATCHES: not an integer: ") + parts);
    }
  }
  options.engine.max_num_seqs = 1;
  options.limits.max_logit_rows = kMaxForced;
  // Each prompt's logits come from one forward over all of it: room for the longest id prompt.
  for (int i = 3; i < argc; ++i) {
    const std::string_view p = argv[i];
    if (!p.starts_with("ids:")) continue;
    const int32_t n = static_cast<int32_t>(std::count(p.begin(), p.end(), ',') +
                                           std::count(p.begin(), p.end(), '|') + 1);
    options.limits.max_batch_tokens = std::max(options.limits.max_batch_tokens, n);
  }
  options.kv_cache_bytes = 256 << 20;
  if (const char* kv = std::getenv("TESSERA_KV_CACHE_BYTES"); kv != nullptr) {
    if (!absl::SimpleAtoi(kv, &options.kv_cache_bytes)) {
      return fail(std::string("TESSERA_KV_CACHE_BYTES: not an integer: ") + kv);
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto inst = ModelInstance::load(argv[1], options);
  if (!inst.ok()) return fail(inst.status().ToString());
  std::fprintf(stderr, "load %.2f s\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  ModelInstance& m = **inst;

  nlohmann::json out = nlohmann::json::array();
  for (int i = 3; i < argc; ++i) {
    const std::string prompt = argv[i];
    absl::StatusOr<std::vector<int32_t>> ids;
    std::vector<int32_t> forced;
    if (prompt.starts_with("ids:")) {
      ids.emplace();
      const size_t bar = prompt.find('|');
      if (!parse_ids(prompt.substr(4, bar == std::string::npos ? std::string::npos : bar - 4), &*ids) ||
          (bar != std::string::npos && !parse_ids(prompt.substr(bar + 1), &forced))) {
        return fail("not a list of token ids: " + prompt);
      }
      if (static_cast<int>(forced.size()) > kMaxForced) return fail("more than 64 forced tokens: " + prompt);
    } else {
      ids = m.tokenizer().encode(prompt);
    }
    if (!ids.ok()) return fail(ids.status().ToString());
    const int32_t prompt_len = static_cast<int32_t>(ids->size());
    ids->insert(ids->end(), forced.begin(), forced.end());
    // Logits of the whole prompt in one prefill step, straight from the forward pass.
    BlockTable table;
    if (!table.reserve(static_cast<int32_t>(ids->size()), m.cache().block_size(), m.cache().allocator())) {
      return fail("prompt does not fit the KV cache");
    }
    StepBatch batch;
    batch.query_start = {0, static_cast<int32_t>(ids->size())};
    batch.context_len = {static_cast<int32_t>(ids->size())};
    batch.block_tables = table.blocks();
    batch.max_blocks = table.num_blocks();
    for (int32_t p = 0; p < static_cast<int32_t>(ids->size()); ++p) {
      batch.token_ids.push_back((*ids)[p]);
      batch.positions.push_back(p);
      batch.slot_mapping.push_back(table.slot(p, m.cache().block_size()));
    }
    // The row after the prompt, and with a continuation the row before each forced token.
    const int32_t rows = forced.empty() ? 1 : static_cast<int32_t>(forced.size());
    for (int32_t r = 0; r < rows; ++r) batch.logits_rows.push_back(prompt_len - 1 + r);
    const int64_t vocab = m.config().vocab_size;
    std::vector<float> all_logits(static_cast<size_t>(rows * vocab));
    if (absl::Status s = m.runner().forward(batch, m.cache(), all_logits); !s.ok()) return fail(s.ToString());
    table.release(m.cache().allocator());
    if (!forced.empty()) {
      std::vector<int32_t> argmax;
      std::vector<float> margin;
      for (int32_t r = 0; r < rows; ++r) {
        const float* row = all_logits.data() + r * vocab;
        const int32_t best = static_cast<int32_t>(std::max_element(row, row + vocab) - row);
        float second = -INFINITY;
        for (int64_t v = 0; v < vocab; ++v) {
          if (v != best) second = std::max(second, row[v]);
        }
        argmax.push_back(best);
        margin.push_back(row[best] - second);
      }
      ids->resize(prompt_len);
      out.push_back({{"prompt", argv[i]}, {"ids", *ids}, {"forced", forced},
                     {"forced_argmax", argmax}, {"forced_margin", margin}});
      continue;
    }
    const std::vector<float> logits(all_logits.begin(), all_logits.begin() + vocab);

    // Greedy continuation through the engine, the path users get.
    auto request = std::make_shared<Request>();
    request->prompt = *ids;
    request->sampling.temperature = 0;
    request->stop.max_tokens = kGreedyTokens;
    request->stop.ignore_eos = true;
    auto handle = m.engine().submit(request);
    if (!handle.ok()) return fail(handle.status().ToString());
    std::vector<int32_t> greedy;
    RequestOutput o;
    do {
      while (!m.engine().step()) {}
      while (auto next = handle->stream->try_next()) {
        o = *std::move(next);
        greedy.insert(greedy.end(), o.token_ids.begin(), o.token_ids.end());
      }
    } while (!o.finished);
    std::fprintf(stderr, "prompt %zu tokens: ttft %.3f s, %d tokens in %.3f s\n", ids->size(),
                 o.ttft_seconds, o.completion_tokens, o.total_seconds);
    out.push_back({{"prompt", argv[i]}, {"ids", *ids}, {"logits", logits}, {"greedy", greedy}});
  }
  std::ofstream(argv[2]) << out.dump();
  return 0;
}
