// How deeply a JSON value nests, found without recursion. nlohmann's parser and destructor are
// iterative, but copying, dumping and comparing a value recurse once per level, so a client's
// `[[[[...]]]]` of a few hundred thousand levels (a 1 MiB body) would overflow an io thread's
// stack. Request JSON is checked against kMaxJsonNesting right after parsing, before anything
// recursive walks it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace tessera::server {

// Deeper than any real request (OpenAI tool schemas nest a few levels; chat templates read at
// most 256) and far from any stack's limit.
inline constexpr size_t kMaxJsonNesting = 128;

// The nesting depth of `root`: 0 for a scalar, 1 for an array or object of scalars (or empty).
template <class Json>
size_t json_nesting(const Json& root) {
  size_t deepest = 0;
  std::vector<std::pair<const Json*, size_t>> stack = {{&root, 0}};
  while (!stack.empty()) {
    const auto [value, depth] = stack.back();
    stack.pop_back();
    if (!value->is_structured()) continue;
    deepest = std::max(deepest, depth + 1);
    for (const Json& child : *value) stack.emplace_back(&child, depth + 1);
  }
  return deepest;
}

}  // namespace tessera::server
