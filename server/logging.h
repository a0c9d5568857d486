// Log setup for tesserad: spdlog on stderr, as text lines or JSON objects (one per line), with
// the request id of the request a line is about. gRPC's and protobuf's own log output is routed
// through the same logger so that the format holds for every line.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "spdlog/spdlog.h"

namespace tessera::server {

enum class LogFormat { kText, kJson };

// Replaces the default logger. `level`: trace, debug, info, warn, error, critical, off.
absl::Status setup_logging(std::string_view level, std::string_view format);

// Lines logged on this thread while it lives carry `request_id` (a field in JSON, "[req ID]" in
// text). Scopes nest.
class ScopedRequestId {
 public:
  explicit ScopedRequestId(std::string_view request_id);
  ~ScopedRequestId();
  ScopedRequestId(const ScopedRequestId&) = delete;
  ScopedRequestId& operator=(const ScopedRequestId&) = delete;

 private:
  std::string previous_;
};

// The id set by the innermost ScopedRequestId on this thread ("" when none).
const std::string& current_request_id();

// One log line about one request.
template <typename... Args>
void log_request(spdlog::level::level_enum level, std::string_view request_id,
                 spdlog::format_string_t<Args...> format, Args&&... args) {
  if (!spdlog::should_log(level)) return;
  ScopedRequestId scope(request_id);
  spdlog::log(level, format, std::forward<Args>(args)...);
}

// Formats one log line (exposed for tests).
std::string format_log_line(LogFormat format, std::string_view time, std::string_view level,
                            std::string_view request_id, std::string_view message);

}  // namespace tessera::server
