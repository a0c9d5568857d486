#include "runtime/model_files.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/model_io/gguf_weights.h"
#include "base/status_macros.h"

namespace tessera {

absl::StatusOr<ModelFiles> ModelFiles::open(const std::string& path) {
  ModelFiles files;
  TESSERA_ASSIGN_OR_RETURN(files.weights_, open_weights(path));
  const ModelConfig& config = files.weights_->config();
  const auto& supported = supported_architectures();
  if (std::find(supported.begin(), supported.end(), config.architecture) == supported.end()) {
    return absl::UnimplementedError(absl::StrCat(path, ": architecture '", config.architecture,
                                                 "' is not supported (supported: ",
                                                 absl::StrJoin(supported, ", "), ")"));
  }
  TESSERA_RETURN_IF_ERROR(config.validate());

  Vocab vocab;
  if (std::filesystem::is_directory(path)) {
    TESSERA_ASSIGN_OR_RETURN(vocab, vocab_from_hf_dir(path));
  } else {
    // open_weights opened the file as GGUF: its metadata holds the vocab.
    const auto* gguf = dynamic_cast<const GgufWeights*>(files.weights_.get());
    if (gguf == nullptr) return absl::InternalError(absl::StrCat(path, ": expected GGUF weights"));
    TESSERA_ASSIGN_OR_RETURN(vocab, vocab_from_gguf(gguf->gguf()));
  }
  if (static_cast<int64_t>(vocab.tokens.size()) > config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the tokenizer has ", vocab.tokens.size(),
                                                   " tokens but the model's vocab_size is ",
                                                   config.vocab_size));
  }
  if (!vocab.chat_template.empty()) {
    absl::StatusOr<ChatTemplate> chat = ChatTemplate::parse(vocab.chat_template);
    if (!chat.ok()) {
      return absl::Status(chat.status().code(),
                          absl::StrCat(path, ": chat template: ", chat.status().message()));
    }
    files.chat_template_ = *std::move(chat);
  }
  TESSERA_ASSIGN_OR_RETURN(files.tokenizer_, Tokenizer::create(std::move(vocab)));
  return files;
}

absl::StatusOr<ChatPrompt> ModelFiles::render_chat(std::span<const ChatMessage> messages,
                                                    const nlohmann::ordered_json& tools) const {
  if (!chat_template_) {
    return absl::FailedPreconditionError("this model has no chat template: send a text prompt");
  }
  const Vocab& v = tokenizer_->vocab();
  ChatTemplateOptions options;
  options.add_generation_prompt = true;
  if (v.bos_id >= 0) options.bos_token = tokenizer_->token_text(v.bos_id);
  if (v.eos_id >= 0) options.eos_token = tokenizer_->token_text(v.eos_id);
  options.tools = tools;
  return render_chat_prompt(*chat_template_, messages, options, *tokenizer_);
}

absl::StatusOr<std::vector<int32_t>> ModelFiles::encode_chat(
    std::span<const ChatMessage> messages, const nlohmann::ordered_json& tools) const {
  TESSERA_ASSIGN_OR_RETURN(ChatPrompt prompt, render_chat(messages, tools));
  // The template writes BOS itself when the model wants one; do not add a second. Control tokens
  // count only where the template wrote them, not inside a message.
  return tokenizer_->encode(prompt.text, /*add_special=*/false, /*parse_special=*/true,
                            prompt.contents);
}

}  // namespace tessera
