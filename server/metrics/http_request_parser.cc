#include "server/metrics/http_request_parser.h"

#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace tessera::server {

namespace {

constexpr size_t kMaxMethodBytes = 32;
constexpr size_t kMaxContentLengthDigits = 18;

bool is_tchar(char c) {
  if (absl::ascii_isalnum(static_cast<unsigned char>(c))) return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
  }
  return false;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_tchar(c)) return false;
  }
  return true;
}

// Field values: visible characters, obs-text, SP and HTAB; no other control characters.
bool is_field_value(std::string_view s) {
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7F) return false;
  }
  return true;
}

bool is_target(std::string_view s) {
  if (s.empty() || s[0] != '/') return false;
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7F) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = absl::ascii_tolower(static_cast<unsigned char>(c));
  return out;
}

HttpParseResult error(int status, std::string message) {
  HttpParseResult r;
  r.state = HttpParseState::kError;
  r.error_status = status;
  r.error = std::move(message);
  return r;
}

// Whether the comma-separated token list `value` holds `token` (case-insensitive).
bool has_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    const std::string_view item = trim(value.substr(0, comma));
    if (lower(item) == token) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

HttpParseResult parse_http_request(std::string_view data, const HttpLimits& limits,
                                   HttpRequest* request) {
  // Empty lines before the request line are ignored (RFC 9112 section 2.2).
  size_t pos = 0;
  while (true) {
    if (data.substr(pos).starts_with("\r\n")) {
      pos += 2;
    } else if (data.substr(pos).starts_with("\n")) {
      pos += 1;
    } else {
      break;
    }
    if (pos > limits.max_header_bytes) return error(431, "too many empty lines before the request");
  }
  const size_t start = pos;

  // Reads the next line (without its CRLF or LF) into `line`; false when no complete line is
  // there yet. A CR anywhere but before the LF makes the line invalid.
  bool bare_cr = false;
  const auto next_line = [&](std::string_view& line) {
    const size_t lf = data.find('\n', pos);
    if (lf == std::string_view::npos) return false;
    line = data.substr(pos, lf - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    bare_cr = line.find('\r') != std::string_view::npos;
    pos = lf + 1;
    return true;
  };
  const auto incomplete_or_too_long = [&]() {
    if (data.size() - start > limits.max_header_bytes) {
      return error(431, absl::StrCat("the request line and headers exceed ",
                                     limits.max_header_bytes, " bytes"));
    }
    return HttpParseResult{};
  };

  // Request line: method SP request-target SP HTTP-version.
  std::string_view line;
  if (!next_line(line)) return incomplete_or_too_long();
  if (pos - start > limits.max_header_bytes) {
    return error(431, absl::StrCat("the request line exceeds ", limits.max_header_bytes, " bytes"));
  }
  if (bare_cr) return error(400, "a CR inside the request line");
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return error(400, "the request line is not \"METHOD /path HTTP/1.1\"");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method) || method.size() > kMaxMethodBytes) {
    return error(400, "the method is not an HTTP token");
  }
  if (!is_target(target)) return error(400, "the request target must be a path starting with /");
  const bool version_shape = version.size() == 8 && version.starts_with("HTTP/") &&
                             absl::ascii_isdigit(static_cast<unsigned char>(version[5])) &&
                             version[6] == '.' &&
                             absl::ascii_isdigit(static_cast<unsigned char>(version[7]));
  if (!version_shape) return error(400, "the HTTP version is not HTTP/<digit>.<digit>");
  if (version[5] != '1' || (version[7] != '0' && version[7] != '1')) {
    return error(505, "only HTTP/1.0 and HTTP/1.1 are supported");
  }
  const int version_minor = version[7] - '0';

  // Header lines up to the blank line.
  std::vector<std::pair<std::string, std::string>> headers;
  while (true) {
    if (!next_line(line)) return incomplete_or_too_long();
    if (pos - start > limits.max_header_bytes) {
      return error(431, absl::StrCat("the request line and headers exceed ",
                                     limits.max_header_bytes, " bytes"));
    }
    if (bare_cr) return error(400, "a CR inside a header line");
    if (line.empty()) break;
    if (line[0] == ' ' || line[0] == '\t') return error(400, "obsolete header line folding");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return error(400, "a header line without ':'");
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = trim(line.substr(colon + 1));
    if (!is_token(name)) return error(400, "a header name is not an HTTP token");
    if (!is_field_value(value)) return error(400, "a control character in a header value");
    if (headers.size() == limits.max_headers) {
      return error(431, absl::StrCat("more than ", limits.max_headers, " header lines"));
    }
    headers.emplace_back(lower(name), std::string(value));
  }
  const size_t header_end = pos;

  // Body framing: Content-Length only.
  std::optional<size_t> content_length;
  bool expect_continue = false;
  bool connection_close = false;
  bool connection_keep_alive = false;
  for (const auto& [name, value] : headers) {
    if (name == "transfer-encoding") {
      return error(501, "Transfer-Encoding is not supported: send the body with Content-Length");
    }
    if (name == "content-length") {
      if (value.empty() || value.size() > kMaxContentLengthDigits) {
        return error(400, "Content-Length is not a decimal number");
      }
      size_t n = 0;
      for (char c : value) {
        if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
          return error(400, "Content-Length is not a decimal number");
        }
        n = n * 10 + static_cast<size_t>(c - '0');
      }
      if (content_length && *content_length != n) return error(400, "conflicting Content-Length");
      content_length = n;
    } else if (name == "expect") {
      expect_continue = lower(value) == "100-continue";
    } else if (name == "connection") {
      connection_close = connection_close || has_token(value, "close");
      connection_keep_alive = connection_keep_alive || has_token(value, "keep-alive");
    }
  }
  const size_t body_bytes = content_length.value_or(0);
  if (body_bytes > limits.max_body_bytes) {
    return error(413, absl::StrCat("the body exceeds ", limits.max_body_bytes, " bytes"));
  }
  if (data.size() - header_end < body_bytes) {
    HttpParseResult r;
    r.expect_continue = expect_continue && version_minor == 1;
    return r;
  }

  request->method = std::string(method);
  request->target = std::string(target);
  const size_t question = target.find('?');
  request->path = std::string(target.substr(0, question));
  request->query =
      question == std::string_view::npos ? "" : std::string(target.substr(question + 1));
  request->version_minor = version_minor;
  request->headers = std::move(headers);
  request->body = std::string(data.substr(header_end, body_bytes));
  request->keep_alive =
      version_minor == 1 ? !connection_close : connection_keep_alive && !connection_close;

  HttpParseResult r;
  r.state = HttpParseState::kComplete;
  r.consumed = header_end + body_bytes;
  return r;
}

}  // namespace tessera::server
