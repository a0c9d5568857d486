// Tokenizer for the chat-template Jinja subset. Reproduces Jinja's whitespace rules exactly
// (they decide every newline of a prompt): `{%-`/`-%}` stripping, `+` opt-outs, and the
// trim_blocks/lstrip_blocks behaviour that transformers turns on for every chat template.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::jinja {

enum class TokenType : uint8_t {
  kText,           // literal template data (already whitespace-processed)
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,  // value holds the unescaped string
  kInteger,
  kFloat,
  kOperator,  // value holds the operator text: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ]
              // { } ;
  kEnd,
};

struct Token {
  TokenType type;
  std::string value;
  int line = 1;
  int64_t int_value = 0;
  double float_value = 0.0;
};

struct LexerOptions {
  // transformers: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Splits a template into tokens, dropping comments and resolving `{% raw %}` to text. Errors
// (unterminated tag, comment or string, stray character) name the line.
absl::StatusOr<std::vector<Token>> tokenize(std::string_view source,
                                            const LexerOptions& options = {});

}  // namespace tessera::jinja
