#include "runtime/tokenizer/vocab.h"

#include <algorithm>
#include <string_view>

namespace tessera {

void add_end_of_turn_stop_ids(Vocab& v) {
  static constexpr std::string_view kEndOfTurnTexts[] = {
      "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"};
  for (size_t i = 0; i < v.tokens.size() && i < v.types.size(); ++i) {
    if (v.types[i] != TokenType::kControl) continue;
    for (std::string_view text : kEndOfTurnTexts) {
      if (v.tokens[i] == text) v.stop_ids.push_back(static_cast<int32_t>(i));
    }
  }
  std::sort(v.stop_ids.begin(), v.stop_ids.end());
  v.stop_ids.erase(std::unique(v.stop_ids.begin(), v.stop_ids.end()), v.stop_ids.end());
}

}  // namespace tessera
