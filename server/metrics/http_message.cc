#include "server/metrics/http_message.h"

#include "absl/strings/str_cat.h"

namespace tessera::server {

std::optional<std::string_view> HttpRequest::header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (n == name) return std::string_view(v);
  }
  return std::nullopt;
}

HttpResponse HttpResponse::text(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  if (body.empty() || body.back() != '\n') body += '\n';
  r.body = std::move(body);
  return r;
}

const char* http_reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 411:
      return "Length Required";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
  }
  return "Unknown";
}

std::string serialize_http_response(const HttpResponse& response, bool keep_alive,
                                    bool include_body) {
  std::string out =
      absl::StrCat("HTTP/1.1 ", response.status, " ", http_reason_phrase(response.status), "\r\n");
  absl::StrAppend(&out, "Content-Type: ", response.content_type, "\r\n");
  absl::StrAppend(&out, "Content-Length: ", response.body.size(), "\r\n");
  absl::StrAppend(&out, "Connection: ", keep_alive ? "keep-alive" : "close", "\r\n");
  absl::StrAppend(&out, "Cache-Control: no-store\r\n");
  for (const auto& [name, value] : response.headers) {
    absl::StrAppend(&out, name, ": ", value, "\r\n");
  }
  out += "\r\n";
  if (include_body) out += response.body;
  return out;
}

}  // namespace tessera::server
