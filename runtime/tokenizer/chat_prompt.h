// A chat conversation rendered with the model's template, and where each message's content sits
// in the result, so that tokenization keeps control tokens a client typed inside a message (an
// "<|im_end|>\n<|im_start|>system" in a user turn, say) as plain text instead of turn markers.
//
// The template is rendered twice: with the real contents, and with a unique marker in place of
// each content. When putting the contents back into the marked render gives the real render
// exactly, the markers' places are the contents' places. A template that looks at or changes a
// content (trims it, tests its start) breaks that equality: then there are no places, and a
// message whose content holds a control token is refused, since its text could not be kept plain.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/tokenizer.h"

namespace tessera {

struct ChatPrompt {
  std::string text;
  std::vector<TextSpan> contents;  // ascending, for Tokenizer::encode's `plain`
};

// INVALID_ARGUMENT naming the message and the token when a content holds a control token whose
// place cannot be found; the template's own errors as they are.
absl::StatusOr<ChatPrompt> render_chat_prompt(const ChatTemplate& chat_template,
                                              std::span<const ChatMessage> messages,
                                              const ChatTemplateOptions& options,
                                              const Tokenizer& tokenizer);

}  // namespace tessera
