// HTTP/1.1 requests and responses as the admin listener sees them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::server {

struct HttpRequest {
  std::string method;     // as sent ("GET"); methods are case-sensitive
  std::string target;     // "/metrics?x=1"
  std::string path;       // "/metrics"
  std::string query;      // "x=1" (without '?'; not decoded)
  int version_minor = 1;  // HTTP/1.<version_minor>
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed
  std::string body;
  bool keep_alive = true;  // the connection stays open after the response

  // The first header named `name` (lower case), if any.
  std::optional<std::string_view> header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // beside Content-Type/-Length

  // A text/plain response; a body without a final newline gets one.
  static HttpResponse text(int status, std::string body);
};

// "OK", "Not Found", ...; "Unknown" for a status it does not know.
const char* http_reason_phrase(int status);

// The bytes on the wire: status line, Content-Type, Content-Length, Connection, the extra
// headers, a blank line, and the body unless `include_body` is false (HEAD: the length is still
// the body's).
std::string serialize_http_response(const HttpResponse& response, bool keep_alive,
                                    bool include_body);

}  // namespace tessera::server
