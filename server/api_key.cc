#include "server/api_key.h"

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tessera::server {

absl::StatusOr<std::string> resolve_api_key(const DaemonConfig& config,
                                            const std::function<const char*(const char*)>& getenv) {
  if (!config.api_key.empty()) return config.api_key;
  if (!config.api_key_file.empty()) {
    std::ifstream in(config.api_key_file);
    std::string line;
    if (!in || !std::getline(in, line)) {
      return absl::InvalidArgumentError(
          absl::StrCat("api_key_file \"", config.api_key_file, "\" cannot be read"));
    }
    std::string key(absl::StripAsciiWhitespace(line));
    if (key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("api_key_file \"", config.api_key_file, "\": the first line is empty"));
    }
    return key;
  }
  const char* env = getenv("TESSERA_API_KEY");
  return env == nullptr ? std::string() : std::string(env);
}

}  // namespace tessera::server
