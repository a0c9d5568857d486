#include "runtime/tokenizer/chat_template.h"

#include <nlohmann/json.hpp>

#include "runtime/jinja/interpreter.h"
#include "runtime/jinja/parser.h"
#include "runtime/jinja/value.h"

namespace tessera {

struct ChatTemplate::Program {
  std::unique_ptr<jinja::TemplateAst> ast;
};

ChatTemplate::ChatTemplate(std::unique_ptr<Program> program) : program_(std::move(program)) {}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

absl::StatusOr<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  absl::StatusOr<std::unique_ptr<jinja::TemplateAst>> ast = jinja::parse_template(source);
  if (!ast.ok()) return ast.status();
  auto program = std::make_unique<Program>();
  program->ast = std::move(ast).value();
  return ChatTemplate(std::move(program));
}

absl::StatusOr<std::string> ChatTemplate::render(std::span<const ChatMessage> messages,
                                                 const ChatTemplateOptions& options) const {
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  if (!options.tools.is_null()) extra["tools"] = options.tools;
  return render(messages, options, extra);
}

absl::StatusOr<std::string> ChatTemplate::render(
    std::span<const ChatMessage> messages, const ChatTemplateOptions& options,
    const nlohmann::ordered_json& extra_context) const {
  using jinja::Value;
  if (!extra_context.is_object()) {
    return absl::InvalidArgumentError("chat template extra context must be a JSON object");
  }
  std::vector<Value> message_values;
  message_values.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    jinja::DictData d;
    d.entries.emplace_back("role", Value::string(m.role));
    d.entries.emplace_back("content", Value::string(m.content));
    message_values.push_back(Value::dict(std::move(d)));
  }
  // The variables transformers' apply_chat_template passes (tools/documents default to None).
  jinja::DictData context;
  context.set("messages", Value::list(std::move(message_values)));
  context.set("tools", Value::none());
  context.set("documents", Value::none());
  context.set("add_generation_prompt", Value::boolean(options.add_generation_prompt));
  context.set("bos_token", Value::string(options.bos_token));
  context.set("eos_token", Value::string(options.eos_token));
  for (auto it = extra_context.begin(); it != extra_context.end(); ++it) {
    absl::StatusOr<Value> v = jinja::value_from_json(it.value());
    if (!v.ok()) return v.status();
    context.set(it.key(), std::move(v).value());
  }
  jinja::Interpreter interpreter;
  return interpreter.render(*program_->ast, std::move(context));
}

}  // namespace tessera
