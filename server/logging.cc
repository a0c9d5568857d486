#include "server/logging.h"

#include <grpc/support/log.h>

#include <chrono>
#include <ctime>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/stubs/logging.h"
#include "nlohmann/json.hpp"
#include "spdlog/formatter.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace tessera::server {

namespace {

thread_local std::string t_request_id;

// Control characters would let a client forge log lines through its request id or prompt.
std::string escape_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u == 0x7f) {
      out += absl::StrFormat("\\x%02x", u);
    } else {
      out += c;
    }
  }
  return out;
}

std::string json_string(std::string_view s) {
  return nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string format_time(std::chrono::system_clock::time_point tp) {
  const auto since = tp.time_since_epoch();
  const std::time_t secs = std::chrono::duration_cast<std::chrono::seconds>(since).count();
  const int64_t millis = std::chrono::duration_cast<std::chrono::milliseconds>(since).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return absl::StrFormat("%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, millis);
}

class LineFormatter final : public spdlog::formatter {
 public:
  explicit LineFormatter(LogFormat format) : format_(format) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
    const std::string line = format_log_line(
        format_, format_time(msg.time), std::string_view(level.data(), level.size()),
        t_request_id, std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<LineFormatter>(format_);
  }

 private:
  LogFormat format_;
};

void grpc_log(gpr_log_func_args* args) {
  spdlog::level::level_enum level = spdlog::level::info;
  if (args->severity == GPR_LOG_SEVERITY_DEBUG) level = spdlog::level::debug;
  if (args->severity == GPR_LOG_SEVERITY_ERROR) level = spdlog::level::err;
  spdlog::log(level, "grpc: {} ({}:{})", args->message, args->file, args->line);
}

void protobuf_log(google::protobuf::LogLevel level, const char* file, int line,
                  const std::string& message) {
  // protobuf logs malformed input (e.g. invalid UTF-8 in a request) at ERROR; the client is
  // answered with a clear status, so these are debug lines here.
  const spdlog::level::level_enum l =
      level == google::protobuf::LOGLEVEL_FATAL ? spdlog::level::critical : spdlog::level::debug;
  spdlog::log(l, "protobuf: {} ({}:{})", message, file, line);
}

}  // namespace

std::string format_log_line(LogFormat format, std::string_view time, std::string_view level,
                            std::string_view request_id, std::string_view message) {
  if (format == LogFormat::kJson) {
    std::string out = absl::StrCat("{\"time\":", json_string(time), ",\"level\":", json_string(level));
    if (!request_id.empty()) absl::StrAppend(&out, ",\"request_id\":", json_string(request_id));
    absl::StrAppend(&out, ",\"message\":", json_string(message), "}\n");
    return out;
  }
  std::string out = absl::StrCat(std::string(time), " ", std::string(level), " ");
  if (!request_id.empty()) absl::StrAppend(&out, "[req ", escape_text(request_id), "] ");
  absl::StrAppend(&out, escape_text(message), "\n");
  return out;
}

ScopedRequestId::ScopedRequestId(std::string_view request_id) : previous_(std::move(t_request_id)) {
  t_request_id = std::string(request_id);
}

ScopedRequestId::~ScopedRequestId() { t_request_id = std::move(previous_); }

const std::string& current_request_id() { return t_request_id; }

absl::Status setup_logging(std::string_view level, std::string_view format) {
  LogFormat f;
  if (format == "text") {
    f = LogFormat::kText;
  } else if (format == "json") {
    f = LogFormat::kJson;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("log_format: \"", std::string(format), "\" is not one of text, json"));
  }
  const spdlog::level::level_enum l = spdlog::level::from_str(std::string(level));
  if (l == spdlog::level::off && level != "off") {
    return absl::InvalidArgumentError(absl::StrCat(
        "log_level: \"", std::string(level), "\" is not one of trace, debug, info, warn, error, critical, off"));
  }
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  sink->set_formatter(std::make_unique<LineFormatter>(f));
  auto logger = std::make_shared<spdlog::logger>("tesserad", std::move(sink));
  logger->set_level(l);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(std::move(logger));
  gpr_set_log_function(grpc_log);
  gpr_set_log_verbosity(l <= spdlog::level::debug ? GPR_LOG_SEVERITY_DEBUG : GPR_LOG_SEVERITY_ERROR);
  google::protobuf::SetLogHandler(protobuf_log);
  return absl::OkStatus();
}

}  // namespace tessera::server
