// absl::StrCat that also accepts std::string_view. Debian's abseil is built with its own
// absl::string_view class, to which std::string_view does not convert, so plain absl::StrCat
// rejects std::string_view arguments.
#pragma once

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace str_cat_internal {

inline absl::string_view to_alpha(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}
template <typename T>
const T& to_alpha(const T& x) {
  return x;
}

}  // namespace str_cat_internal

template <typename... Args>
std::string str_cat(const Args&... args) {
  return absl::StrCat(str_cat_internal::to_alpha(args)...);
}

}  // namespace tessera
