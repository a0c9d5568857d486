// A chat request's tools reach the template as `tools` (as transformers' apply_chat_template
// passes them); without any, `tools` is none.
#include <gtest/gtest.h>

#include "runtime/tokenizer/chat_template.h"

namespace tessera {
namespace {

TEST(ChatTools, TheTemplateSeesTheTools) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::parse(
      "{% if tools %}{% for t in tools %}[{{ t.function.name }}]{% endfor %}{% else %}no tools"
      "{% endif %}|{{ messages[0].content }}");
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<ChatMessage> messages = {{"user", "hi"}};
  ChatTemplateOptions options;
  absl::StatusOr<std::string> none = t->render(messages, options);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, "no tools|hi");
  options.tools = nlohmann::ordered_json::parse(
      R"([{"type": "function", "function": {"name": "get_weather"}},
          {"type": "function", "function": {"name": "get_time"}}])");
  absl::StatusOr<std::string> with = t->render(messages, options);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(*with, "[get_weather][get_time]|hi");
}

}  // namespace
}  // namespace tessera
