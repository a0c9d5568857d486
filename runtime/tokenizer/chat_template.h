// Renders a model's own Jinja chat template (a small Jinja interpreter: what real templates use).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tessera {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool"
  std::string content;
};

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  std::string bos_token;
  std::string eos_token;
};

class ChatTemplate {
 public:
  // Parses the template; an unsupported construct or a syntax error is an error naming the
  // construct and its line.
  static absl::StatusOr<ChatTemplate> parse(std::string_view source);

  // Renders the conversation; raise_exception() in the template becomes an error with its text.
  absl::StatusOr<std::string> render(std::span<const ChatMessage> messages,
                                     const ChatTemplateOptions& options) const;

  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

 private:
  struct Program;
  explicit ChatTemplate(std::unique_ptr<Program> program);
  std::unique_ptr<Program> program_;
};

}  // namespace tessera
