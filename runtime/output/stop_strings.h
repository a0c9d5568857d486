// Finds stop strings in text that arrives piece by piece: a stop string may span several tokens,
// so text that could still become one is held back until it either completes or cannot.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;      // safe to emit now (everything before a stop string)
    bool stopped = false;  // a stop string was found; it and what follows are dropped
  };
  // `piece` is complete UTF-8; so is every Result::text.
  Result push(std::string_view piece);
  // Text still held back, when the sequence ends for another reason.
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string held_;
};

}  // namespace tessera
