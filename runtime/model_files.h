// Opens everything a served model is made of from one path: the weights, the tokenizer and the
// chat template (GGUF metadata, or an HF directory's tokenizer files).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/model_io/weight_source.h"
#include "runtime/tokenizer/chat_prompt.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/tokenizer.h"

namespace tessera {

class ModelFiles {
 public:
  // A GGUF file or an HF directory; errors name the path and what was wrong.
  static absl::StatusOr<ModelFiles> open(const std::string& path);

  const WeightSource& weights() const { return *weights_; }
  const ModelConfig& config() const { return weights_->config(); }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  bool has_chat_template() const { return chat_template_.has_value(); }

  // Renders the conversation with the model's chat template (generation prompt added) and
  // tokenizes it; control tokens inside a message's content stay text (chat_prompt.h).
  // FAILED_PRECONDITION when the model has no chat template.
  // `tools` (a JSON array of function definitions, or null) is the template's `tools`.
  absl::StatusOr<std::vector<int32_t>> encode_chat(std::span<const ChatMessage> messages,
                                                   const nlohmann::ordered_json& tools = nullptr) const;

 private:
  absl::StatusOr<ChatPrompt> render_chat(std::span<const ChatMessage> messages,
                                         const nlohmann::ordered_json& tools = nullptr) const;

  std::unique_ptr<WeightSource> weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<ChatTemplate> chat_template_;
};

}  // namespace tessera
