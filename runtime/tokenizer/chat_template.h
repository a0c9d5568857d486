// Renders a model's own Jinja chat template (a small Jinja interpreter: what real templates use).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

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
  // The template's `tools` (OpenAI's function definitions, a JSON array); null = none.
  nlohmann::ordered_json tools;
};

class ChatTemplate {
 public:
  // Parses the template; an unsupported construct or a syntax error is an error naming the
  // construct and its line.
  static absl::StatusOr<ChatTemplate> parse(std::string_view source);

  // Renders the conversation; raise_exception() in the template becomes an error with its text.
  // Like transformers, the template sees `messages` (dicts with role and content),
  // `add_generation_prompt`, `bos_token`, `eos_token`, and `tools`/`documents` set to none.
  absl::StatusOr<std::string> render(std::span<const ChatMessage> messages,
                                     const ChatTemplateOptions& options) const;

  // The same, with extra template variables: each member of the JSON object `extra_context`
  // becomes a variable and replaces one of the above of the same name (e.g. "tools",
  // "date_string", or a richer "messages" array with tool_calls). ordered_json keeps the
  // caller's key order, which tojson output shows (a plain nlohmann::json converts, sorted).
  absl::StatusOr<std::string> render(std::span<const ChatMessage> messages,
                                     const ChatTemplateOptions& options,
                                     const nlohmann::ordered_json& extra_context) const;

  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;
  ~ChatTemplate();

 private:
  struct Program;
  explicit ChatTemplate(std::unique_ptr<Program> program);
  std::unique_ptr<Program> program_;
};

}  // namespace tessera
