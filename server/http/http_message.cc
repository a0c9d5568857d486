#include "server/http/http_message.h"

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

}  // namespace tessera::server
