#include "runtime/tokenizer/chat_prompt.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera {

namespace {

// A marker for each message that occurs in no content: unit separators around a per-call
// number and the message index.
std::vector<std::string> content_markers(std::span<const ChatMessage> messages) {
  static std::atomic<uint64_t> calls{0};
  const uint64_t nonce =
      calls.fetch_add(1) ^ static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::vector<std::string> markers;
  for (size_t i = 0; i < messages.size(); ++i) {
    markers.push_back(absl::StrFormat("\x1f" "content-%016x-%d\x1f", nonce, i));
  }
  return markers;
}

// The contents' places in `text`, from the render of `marked` (markers in place of contents),
// when putting the contents back gives `text`; empty otherwise.
std::vector<TextSpan> content_places(const std::string& text, const std::string& marked,
                                     std::span<const ChatMessage> messages,
                                     const std::vector<std::string>& markers) {
  struct Found {
    size_t at;
    size_t message;
  };
  std::vector<Found> found;
  for (size_t i = 0; i < markers.size(); ++i) {
    const size_t at = marked.find(markers[i]);
    if (at == std::string::npos) continue;  // the template left this message out
    if (marked.find(markers[i], at + 1) != std::string::npos) return {};  // used twice
    found.push_back({at, i});
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.at < b.at; });
  std::string rebuilt;
  std::vector<TextSpan> places;
  size_t from = 0;
  for (const Found& f : found) {
    rebuilt.append(marked, from, f.at - from);
    const std::string& content = messages[f.message].content;
    places.push_back({rebuilt.size(), rebuilt.size() + content.size()});
    rebuilt += content;
    from = f.at + markers[f.message].size();
  }
  rebuilt.append(marked, from, std::string::npos);
  if (rebuilt != text) return {};
  std::erase_if(places, [](const TextSpan& s) { return s.begin == s.end; });
  return places;
}

}  // namespace

absl::StatusOr<ChatPrompt> render_chat_prompt(const ChatTemplate& chat_template,
                                              std::span<const ChatMessage> messages,
                                              const ChatTemplateOptions& options,
                                              const Tokenizer& tokenizer) {
  ChatPrompt prompt;
  absl::StatusOr<std::string> text = chat_template.render(messages, options);
  if (!text.ok()) return text.status();
  prompt.text = *std::move(text);

  const std::vector<std::string> markers = content_markers(messages);
  std::vector<ChatMessage> marked_messages(messages.begin(), messages.end());
  for (size_t i = 0; i < marked_messages.size(); ++i) marked_messages[i].content = markers[i];
  absl::StatusOr<std::string> marked = chat_template.render(marked_messages, options);
  if (marked.ok()) prompt.contents = content_places(prompt.text, *marked, messages, markers);
  if (!prompt.contents.empty()) return prompt;

  // No places: only contents without control tokens are safe to tokenize as rendered.
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string_view token = tokenizer.find_control_token(messages[i].content);
    if (!token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "messages[", i, "].content contains \"", std::string(token),
          "\", a control token of this model; the chat template transforms message contents, "
          "so it cannot be kept as plain text: remove it"));
    }
  }
  return prompt;
}

}  // namespace tessera
