#include "tests/unit/tokenizer/default_tokenizer.h"

#include <filesystem>
#include <memory>

#include "runtime/model_io/gguf_file.h"
#include "runtime/tokenizer/vocab.h"

namespace tessera::test_support {
namespace {

absl::StatusOr<std::unique_ptr<Tokenizer>> load() {
  absl::StatusOr<std::unique_ptr<GgufFile>> gguf = GgufFile::open(TESSERA_DEFAULT_MODEL);
  if (!gguf.ok()) return gguf.status();
  absl::StatusOr<Vocab> vocab = vocab_from_gguf(**gguf);
  if (!vocab.ok()) return vocab.status();
  return Tokenizer::create(*std::move(vocab));
}

}  // namespace

bool default_model_present() { return std::filesystem::exists(TESSERA_DEFAULT_MODEL); }

absl::StatusOr<const Tokenizer*> default_tokenizer() {
  // Parsing 49k tokens and merges takes a moment; every test shares one instance (which is
  // also what the thread-safety test wants: one Tokenizer used from several threads).
  static const auto* loaded = new absl::StatusOr<std::unique_ptr<Tokenizer>>(load());
  if (!loaded->ok()) return loaded->status();
  return loaded->value().get();
}

}  // namespace tessera::test_support
