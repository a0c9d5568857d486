// ModelConfig from a GGUF file's metadata.
#pragma once

#include "absl/status/statusor.h"
#include "runtime/model_io/model_config.h"

namespace tessera {

class GgufFile;

// Reads general.architecture and the {arch}.* hyper-parameters; vocab_size falls back to the
// length of tokenizer.ggml.tokens; tie_word_embeddings is the absence of output.weight. Llama-3
// rope scaling, which the converter stores as a rope_freqs.weight tensor of per-dimension factors
// rather than as metadata, is recovered from that tensor. The result is validated. Errors name
// the file and the key (an unknown architecture lists the supported ones).
absl::StatusOr<ModelConfig> config_from_gguf(const GgufFile& gguf);

}  // namespace tessera
