// The default model's tokenizer (SmolLM2-135M-Instruct, from its GGUF), shared by the tests.
#pragma once

#include "absl/status/statusor.h"
#include "runtime/tokenizer/tokenizer.h"

namespace tessera::test_support {

// Loaded on first use and kept for the whole test binary; the error if loading failed.
absl::StatusOr<const Tokenizer*> default_tokenizer();

// Whether the default model's file is there (scripts/fetch-model.sh puts it there): tests that
// need it skip without it, as every other test of the default model does.
bool default_model_present();

}  // namespace tessera::test_support
