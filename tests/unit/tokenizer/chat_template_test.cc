// Chat-template interpreter tests. The reference cases (real model templates over several
// conversations, plus one small template per construct) were rendered by Python jinja2 set up
// exactly like transformers; tests/reference/make_chat_template_expectations.py regenerates them.
#include "runtime/tokenizer/chat_template.h"

#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tessera {
namespace {

using ::testing::HasSubstr;

std::string data_dir() {
  return std::string(TESSERA_SOURCE_DIR) + "/tests/unit/tokenizer/data/templates/";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct ReferenceCase {
  std::string name;
  nlohmann::ordered_json json;
};

void PrintTo(const ReferenceCase& c, std::ostream* os) {
  *os << c.name;
}

const std::vector<ReferenceCase>& reference_cases() {
  static const std::vector<ReferenceCase> cases = [] {
    std::vector<ReferenceCase> out;
    std::ifstream in(data_dir() + "expectations.json");
    if (!in) return out;
    const auto doc = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object() || !doc.contains("cases")) return out;
    for (const auto& c : doc["cases"]) out.push_back({c["name"].get<std::string>(), c});
    return out;
  }();
  return cases;
}

std::string test_name(const std::string& name) {
  std::string out;
  for (char c : name) out.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  return out;
}

absl::StatusOr<std::string> render_case(const nlohmann::ordered_json& c,
                                        absl::Status* parse_status) {
  const std::string source = c.contains("template")
                                 ? c["template"].get<std::string>()
                                 : read_file(data_dir() + c["template_file"].get<std::string>());
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::parse(source);
  *parse_status = tmpl.status();
  if (!tmpl.ok()) return tmpl.status();
  std::vector<ChatMessage> messages;
  for (const auto& m : c["messages"])
    messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  ChatTemplateOptions options;
  options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
  options.bos_token = c["bos_token"].get<std::string>();
  options.eos_token = c["eos_token"].get<std::string>();
  return tmpl->render(messages, options, c["extra"]);
}

class ReferenceRenderTest : public testing::TestWithParam<ReferenceCase> {};
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ReferenceRenderTest);

TEST_P(ReferenceRenderTest, MatchesJinja2) {
  const auto& c = GetParam().json;
  absl::Status parse_status;
  const absl::StatusOr<std::string> out = render_case(c, &parse_status);
  if (c.contains("expected")) {
    ASSERT_TRUE(parse_status.ok()) << parse_status;
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(*out, c["expected"].get<std::string>());
    return;
  }
  // jinja2 rejected this template or input, so must we (at parse or at render time).
  ASSERT_FALSE(out.ok()) << "rendered instead of failing like jinja2 ("
                         << c["error"].get<std::string>() << "):\n"
                         << *out;
  if (c["raised"].get<bool>()) {
    // raise_exception(): the error is the template's own message, verbatim.
    EXPECT_EQ(out.status().message(), c["error"].get<std::string>());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

INSTANTIATE_TEST_SUITE_P(Jinja2, ReferenceRenderTest, testing::ValuesIn(reference_cases()),
                         [](const testing::TestParamInfo<ReferenceCase>& info) {
                           return test_name(info.param.name);
                         });

TEST(ChatTemplateTest, ReferenceCasesArePresent) {
  // Guards against the parameterized suite silently running nothing.
  EXPECT_GE(reference_cases().size(), 200u) << "missing " << data_dir() << "expectations.json";
}

absl::StatusOr<std::string> render(std::string_view source,
                                   std::span<const ChatMessage> messages = {},
                                   ChatTemplateOptions options = {}) {
  absl::StatusOr<ChatTemplate> tmpl = ChatTemplate::parse(source);
  if (!tmpl.ok()) return tmpl.status();
  return tmpl->render(messages, options);
}

TEST(ChatTemplateTest, SmolLM2RendersChatML) {
  const std::vector<ChatMessage> messages = {
      {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}};
  const auto out = render(read_file(data_dir() + "smollm2-135m-instruct.jinja"), messages);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
            "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, MistralBadAlternationIsTheTemplatesError) {
  const std::vector<ChatMessage> messages = {
      {"user", "one"}, {"assistant", "two"}, {"assistant", "three"}};
  const auto out = render(read_file(data_dir() + "mistral-7b-instruct-v0.3.jinja"), messages);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(),
            "After the optional system message, conversation roles must alternate "
            "user/assistant/user/assistant/...");
}

TEST(ChatTemplateTest, UnknownFilterIsAParseErrorNamingItAndItsLine) {
  const auto tmpl =
      ChatTemplate::parse("line one\n{% if true %}\n{{ messages|frobnicate }}\n{% endif %}");
  ASSERT_FALSE(tmpl.ok());
  EXPECT_EQ(tmpl.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tmpl.status().message(), HasSubstr("'frobnicate'"));
  EXPECT_THAT(tmpl.status().message(), HasSubstr("line 3"));
}

TEST(ChatTemplateTest, UnclosedBlockNamesItsOpeningLine) {
  const auto tmpl = ChatTemplate::parse("a\n\n{% for m in messages %}\n{{ m.content }}\n");
  ASSERT_FALSE(tmpl.ok());
  EXPECT_THAT(tmpl.status().message(), HasSubstr("line 3"));
  EXPECT_THAT(tmpl.status().message(), HasSubstr("'for'"));
  EXPECT_THAT(tmpl.status().message(), HasSubstr("'endfor'"));
}

TEST(ChatTemplateTest, MismatchedEndTagNamesTheOpenBlock) {
  const auto tmpl = ChatTemplate::parse("{% if x %}\n{% endfor %}");
  ASSERT_FALSE(tmpl.ok());
  EXPECT_THAT(tmpl.status().message(), HasSubstr("line 2"));
  EXPECT_THAT(tmpl.status().message(), HasSubstr("'endfor'"));
  EXPECT_THAT(tmpl.status().message(), HasSubstr("'endif'"));
}

TEST(ChatTemplateTest, RenderErrorsCarryTheirLine) {
  const auto out = render("a\nb\n{{ 1 / 0 }}");
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("line 3"));
  EXPECT_THAT(out.status().message(), HasSubstr("division by zero"));
}

TEST(ChatTemplateTest, UnsupportedConstructsAreErrorsNamingTheConstructAndLine) {
  struct Case {
    const char* source;
    const char* construct;
  };
  const Case cases[] = {
      {"x\n{% include 'other.jinja' %}", "include"},
      {"{% extends 'base' %}", "extends"},
      {"{% from 'x' import y %}", "from"},
      {"{{ messages|groupby('role') }}", "groupby"},
      {"{{ 'abc'|truncate(2) }}", "truncate"},
      {"{% for m in messages recursive %}{% endfor %}", "recursive"},
      {"{{ range(*[1, 2]) }}", "*args"},
      {"{% set x | upper %}a{% endset %}", "set"},
      {"{{ {1: 'a'} }}", "dict key"},
      {"{{ '%(a)s' % {'a': 1} }}", "%(name)"},
      {"{{ '{:>5}'.format(1) }}", "str.format"},
      // Python would print "<generator object ... at 0x...>".
      {"{{ messages|map(attribute='role') }}", "generator"},
      {"{{ messages|selectattr('role')|string }}", "generator"},
      // Jinja would render "x"; the macro outlives the loop iteration that defined it.
      {"{% set ns = namespace() %}{% for i in [1] %}{% macro m() %}x{% endmacro %}{% set ns.m = m "
       "%}{% endfor %}{{ ns.m() }}",
       "macro"},
  };
  for (const Case& c : cases) {
    const auto out = render(c.source);
    ASSERT_FALSE(out.ok()) << c.source << " rendered: " << *out;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kUnimplemented)
        << c.source << ": " << out.status();
    EXPECT_THAT(out.status().message(), HasSubstr(c.construct)) << c.source;
    EXPECT_THAT(out.status().message(), HasSubstr("line ")) << c.source;
  }
}

TEST(ChatTemplateTest, RunawayLoopIsBounded) {
  const auto out =
      render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(out.status().message(), HasSubstr("loop iterations"));
}

TEST(ChatTemplateTest, RunawayRecursionIsBounded) {
  const auto out = render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(out.status().message(), HasSubstr("macro calls"));
}

TEST(ChatTemplateTest, RunawayOutputIsBounded) {
  const char* sources[] = {
      "{% set s = 'x' * 100000000 %}",
      "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% "
      "endfor %}",
      "{% set ns = namespace(l=[0]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% "
      "endfor %}",
      "{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}",
      // replace() multiplies a length: refused before the result is built.
      "{% set s = ('a' * 1000000) | replace('a', 'a' * 100) %}",
      "{% set s = ('a' * 1000000).replace('a', 'a' * 100) %}",
      "{% set s = ('a' * 1000000).replace('', 'b' * 40) %}",
      // 4 bytes * 2^62 wrapped to 0 in the size check.
      "{{ 'abcd' * 4611686018427387904 }}",
      "{{ [1, 2, 3, 4] * 4611686018427387904 }}",
      // batch() pads the last batch to linecount items.
      "{{ [1, 2, 3] | batch(9223372036854775807, 'f') | list }}",
  };
  for (const char* source : sources) {
    const auto out = render(source);
    ASSERT_FALSE(out.ok()) << source;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kResourceExhausted)
        << source << ": " << out.status();
  }
}

// range()'s length and values at the ends of int64 (it computed stop - start and -step in 64
// bits: overflow, undefined behaviour).
TEST(ChatTemplateTest, RangeOverExtremeBoundsIsExact) {
  const std::pair<const char*, const char*> cases[] = {
      {"{{ range(-9223372036854775807 - 1, 9223372036854775807, 4611686018427387904) | list }}",
       "[-9223372036854775808, -4611686018427387904, 0, 4611686018427387904]"},
      {"{{ range(9223372036854775807, -9223372036854775807 - 1, -9223372036854775807 - 1) | list }}",
       "[9223372036854775807, -1]"},
      {"{{ range(3, 0, -9223372036854775807 - 1) | list }}", "[3]"},
  };
  for (const auto& [source, expected] : cases) {
    const auto out = render(source);
    ASSERT_TRUE(out.ok()) << source << ": " << out.status();
    EXPECT_EQ(*out, expected) << source;
  }
  const auto huge = render("{{ range(-9223372036854775807 - 1, 9223372036854775807) | length }}");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
}

// round() with a negative precision: integers exactly (a double lost digits and overflowed int64),
// half to even as Python rounds.
TEST(ChatTemplateTest, RoundToNegativePrecisionIsExact) {
  const std::pair<const char*, const char*> cases[] = {
      {"{{ 15|round(-1) }} {{ 25|round(-1) }} {{ -25|round(-1) }} {{ 26|round(-1) }}",
       "20 20 -20 30"},
      {"{{ 1234567890123456789|round(-2) }}", "1234567890123456800"},
      {"{{ 4999999999999999999|round(-19) }} {{ 9223372036854775807|round(-20) }}", "0 0"},
      {"{{ 1.5|round(-9223372036854775807 - 1) }} {{ 155.0|round(-1) }}", "0.0 160.0"},
  };
  for (const auto& [source, expected] : cases) {
    const auto out = render(source);
    ASSERT_TRUE(out.ok()) << source << ": " << out.status();
    EXPECT_EQ(*out, expected) << source;
  }
  // Python's answers (9223372036854775810, 10^19) are beyond int64.
  for (const char* source :
       {"{{ 9223372036854775807|round(-1) }}", "{{ 9223372036854775807|round(-19) }}"}) {
    const auto beyond = render(source);
    ASSERT_FALSE(beyond.ok()) << source;
    EXPECT_NE(beyond.status().message().find("integer overflow"), std::string_view::npos)
        << beyond.status();
  }
}

// '%d' % x of a float that has no int64 value (casting it was undefined behaviour).
TEST(ChatTemplateTest, PercentFormatOfAFloatBeyondInt64IsAnError) {
  for (const char* source : {"{{ '%d' % (1e308 * 10) }}", "{{ '%i' % (0.0 * (1e308 * 10)) }}",
                             "{{ '%d' % 1e19 }}"}) {
    const auto out = render(source);
    ASSERT_FALSE(out.ok()) << source;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument) << out.status();
  }
  const auto ok = render("{{ '%d|%i' % (2.9, -9.0e18) }}");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, "2|-9000000000000000000");
}

// Repeating an empty sequence looped `count` times: '' * 22222222222288 hung the render.
TEST(ChatTemplateTest, RepeatingAnEmptySequenceIsImmediate) {
  const auto out = render(
      "{{ ('' * 9223372036854775807) | length }} {{ ([] * 9223372036854775807) | length }} "
      "{{ 'ab' * 0 }}{{ 'ab' * -3 }}|{{ 'ab' * 2 }}");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "0 0 |abab");
}

TEST(ChatTemplateTest, DeepNestingIsAnErrorNotACrash) {
  const std::string deep_expr =
      "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_FALSE(ChatTemplate::parse(deep_expr).ok());
  std::string deep_blocks;
  for (int i = 0; i < 5000; ++i) deep_blocks += "{% if true %}";
  EXPECT_FALSE(ChatTemplate::parse(deep_blocks).ok());
  const std::string deep_not = "{{ " + [] {
    std::string s;
    for (int i = 0; i < 5000; ++i) s += "not ";
    return s;
  }() + "1 }}";
  EXPECT_FALSE(ChatTemplate::parse(deep_not).ok());
}

TEST(ChatTemplateTest, StrftimeNowFormatsTheLocalDate) {
  const auto day = [] {
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char buf[64];
    std::strftime(buf, sizeof(buf), "%d %b %Y", &local);
    return std::string(buf);
  };
  const std::string before = day();
  const auto out = render("{{ strftime_now('%d %b %Y') }}");
  const std::string after = day();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_TRUE(*out == before || *out == after) << *out;
  EXPECT_EQ(out->size(), 11u) << *out;  // "26 Jul 2024"
}

TEST(ChatTemplateTest, ContextMatchesTransformers) {
  ChatTemplateOptions options;
  options.add_generation_prompt = false;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  const std::vector<ChatMessage> messages = {{"user", "hi \"there\""}};
  const auto out = render(
      "{{ messages|tojson }}|{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt "
      "}}|{{ bos_token }}"
      "{{ eos_token }}|{{ custom is defined }}",
      messages, options);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(
      *out,
      "[{\"role\": \"user\", \"content\": \"hi \\\"there\\\"\"}]|True|True|False|<s></s>|False");
}

TEST(ChatTemplateTest, ExtraContextOverridesAndKeepsKeyOrder) {
  const auto tmpl = ChatTemplate::parse(
      "{{ tools|tojson }}|{{ messages[0].tool_calls[0].id }}|{{ date_string }}");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  auto extra = nlohmann::ordered_json::parse(R"({
    "tools": [{"zeta": 1, "alpha": {"b": 2, "a": 1}}],
    "messages": [{"role": "assistant", "tool_calls": [{"id": "call1"}]}],
    "date_string": "01 Jan 2025"})");
  const auto out = tmpl->render({}, {}, extra);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "[{\"zeta\": 1, \"alpha\": {\"b\": 2, \"a\": 1}}]|call1|01 Jan 2025");

  // A plain (key-sorted) nlohmann::json converts.
  const nlohmann::json sorted = {{"tools", {{"b", 1}, {"a", 2}}}};
  const auto out2 = ChatTemplate::parse("{{ tools|tojson }}")->render({}, {}, sorted);
  ASSERT_TRUE(out2.ok()) << out2.status();
  EXPECT_EQ(*out2, "{\"a\": 2, \"b\": 1}");

  const auto bad = tmpl->render({}, {}, nlohmann::ordered_json::array());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChatTemplateTest, ParsedTemplateRendersConcurrently) {
  const auto tmpl = ChatTemplate::parse(read_file(data_dir() + "qwen3.jinja"));
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  const std::vector<ChatMessage> messages = {
      {"system", "S"}, {"user", "Q"}, {"assistant", "<think>r</think>A"}, {"user", "Q2"}};
  const auto expected = tmpl->render(messages, {});
  ASSERT_TRUE(expected.ok()) << expected.status();
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const auto out = tmpl->render(messages, {});
        if (!out.ok() || *out != *expected) ++mismatches[static_cast<size_t>(t)];
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_THAT(mismatches, testing::Each(0));
}

TEST(ChatTemplateTest, MoveKeepsTheProgram) {
  auto tmpl = ChatTemplate::parse("{{ 1 + 1 }}");
  ASSERT_TRUE(tmpl.ok());
  ChatTemplate moved = std::move(*tmpl);
  const auto out = moved.render({}, {});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "2");
}

}  // namespace
}  // namespace tessera
