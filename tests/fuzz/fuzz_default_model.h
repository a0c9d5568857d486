// The default model's tokenizer and chat template (SmolLM2-135M-Instruct's GGUF vocab), loaded once
// per fuzz process, for the targets whose input reaches a tokenizer. The model file is the one
// scripts/fetch-model.sh puts in models/ (TESSERA_FUZZ_MODEL overrides the path). Without it the
// process exits with kSkipExitCode, which the corpus tests report as skipped, like the unit
// tests that need the default model.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "runtime/model_io/gguf_file.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/vocab.h"

namespace tessera::fuzz {

inline constexpr int kSkipExitCode = 77;

struct DefaultModel {
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<ChatTemplate> chat_template;  // the model's own template
  ChatTemplateOptions chat_options;             // bos/eos as ModelFiles::render_chat sets them
};

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz: %s\n", what.c_str());
  std::exit(1);
}

// Loads the model's vocab and template, or exits (kSkipExitCode when the file is absent, 1 when
// it cannot be read: a broken fixture must not pass as a skip).
inline const DefaultModel& default_model() {
  static const DefaultModel* model = [] {
    const char* env = std::getenv("TESSERA_FUZZ_MODEL");
    const std::string path = env != nullptr && *env != '\0' ? env : TESSERA_DEFAULT_MODEL;
    if (!std::filesystem::exists(path)) {
      std::fprintf(stderr,
                   "fuzz: the default model %s is absent (scripts/fetch-model.sh): skipped\n",
                   path.c_str());
      std::exit(kSkipExitCode);
    }
    absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::open(path);
    if (!gguf.ok()) fail(gguf.status().ToString());
    absl::StatusOr<Vocab> vocab = vocab_from_gguf(**gguf);
    if (!vocab.ok()) fail(vocab.status().ToString());
    const std::string source = vocab->chat_template;
    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::create(*std::move(vocab));
    if (!tokenizer.ok()) fail(tokenizer.status().ToString());
    absl::StatusOr<ChatTemplate> chat = ChatTemplate::parse(source);
    if (!chat.ok()) fail(chat.status().ToString());
    auto* m = new DefaultModel;
    m->tokenizer = *std::move(tokenizer);
    m->chat_template = std::make_unique<ChatTemplate>(*std::move(chat));
    const Vocab& v = m->tokenizer->vocab();
    if (v.bos_id >= 0) m->chat_options.bos_token = m->tokenizer->token_text(v.bos_id);
    if (v.eos_id >= 0) m->chat_options.eos_token = m->tokenizer->token_text(v.eos_id);
    return m;
  }();
  return *model;
}

}  // namespace tessera::fuzz
