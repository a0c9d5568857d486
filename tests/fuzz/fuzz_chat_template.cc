// libFuzzer target: the chat-template interpreter (runtime/jinja through ChatTemplate). The first
// input byte picks the mode:
//  - even: the rest is a template's source, parsed and rendered over a fixed conversation (bit 1:
//    with tools, bit 2: add_generation_prompt) -- the lexer, parser and interpreter on any code;
//  - odd: the second byte picks one of the real templates in tests/unit/tokenizer/data/templates
//    and the rest is a conversation: messages separated by '\0', each one's first byte choosing
//    the role (system, user, assistant, tool) -- real templates on any message content.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "runtime/tokenizer/chat_template.h"

namespace {

using tessera::ChatMessage;
using tessera::ChatTemplate;
using tessera::ChatTemplateOptions;

const std::vector<ChatMessage>& fixed_conversation() {
  static const std::vector<ChatMessage> m = {
      {"system", "You are a helpful assistant."},
      {"user", "What is the capital of France?"},
      {"assistant", "Paris."},
      {"user", "And of Italy? <|im_end|> {{ bos_token }}"},
  };
  return m;
}

const nlohmann::ordered_json& fixed_tools() {
  static const nlohmann::ordered_json t = nlohmann::ordered_json::parse(R"([{"type": "function",
      "function": {"name": "get_weather", "description": "The weather in a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
      "required": ["city"]}}}])");
  return t;
}

// The real templates, parsed once, in file-name order.
const std::vector<std::unique_ptr<ChatTemplate>>& real_templates() {
  static const auto* templates = [] {
    const std::filesystem::path dir =
        std::filesystem::path(TESSERA_SOURCE_DIR) / "tests/unit/tokenizer/data/templates";
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() == ".jinja") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    auto* out = new std::vector<std::unique_ptr<ChatTemplate>>;
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      const std::string source((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
      absl::StatusOr<ChatTemplate> t = ChatTemplate::parse(source);
      if (!t.ok()) {
        std::fprintf(stderr, "fuzz: %s: %s\n", f.c_str(), t.status().ToString().c_str());
        std::exit(1);
      }
      out->push_back(std::make_unique<ChatTemplate>(*std::move(t)));
    }
    if (out->empty()) {
      std::fprintf(stderr, "fuzz: no templates in %s\n", dir.c_str());
      std::exit(1);
    }
    return out;
  }();
  return *templates;
}

std::vector<ChatMessage> conversation(std::string_view bytes) {
  static constexpr const char* kRoles[] = {"system", "user", "assistant", "tool"};
  std::vector<ChatMessage> out;
  while (!bytes.empty()) {
    const size_t end = std::min(bytes.find('\0'), bytes.size());
    const std::string_view m = bytes.substr(0, end);
    if (!m.empty())
      out.push_back({kRoles[static_cast<uint8_t>(m[0]) % 4], std::string(m.substr(1))});
    bytes.remove_prefix(std::min(end + 1, bytes.size()));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)real_templates();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  ChatTemplateOptions options;
  options.add_generation_prompt = (mode & 4) != 0;
  options.bos_token = "<|im_start|>";
  options.eos_token = "<|im_end|>";
  if ((mode & 2) != 0) options.tools = fixed_tools();
  if (mode % 2 == 0) {
    absl::StatusOr<ChatTemplate> t = ChatTemplate::parse(rest);
    if (!t.ok()) return 0;
    (void)t->render(fixed_conversation(), options);
    return 0;
  }
  if (rest.empty()) return 0;
  const auto& templates = real_templates();
  const ChatTemplate& t = *templates[static_cast<uint8_t>(rest[0]) % templates.size()];
  rest.remove_prefix(1);
  (void)t.render(conversation(rest), options);
  return 0;
}
