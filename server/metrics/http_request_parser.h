// Parses one HTTP/1.x request from the bytes received so far (RFC 9112, strictly: what a
// minimal server must not guess about is rejected). Pure: the admin listener calls it on its
// connection buffer each time bytes arrive, and tests call it on crafted input.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "server/metrics/http_message.h"

namespace tessera::server {

struct HttpLimits {
  size_t max_header_bytes = 8 * 1024;  // request line + header lines + the blank line
  size_t max_headers = 64;
  size_t max_body_bytes = 1024 * 1024;
};

enum class HttpParseState { kIncomplete, kComplete, kError };

struct HttpParseResult {
  HttpParseState state = HttpParseState::kIncomplete;
  size_t consumed = 0;   // kComplete: bytes of `data` the request took (pipelined bytes follow)
  int error_status = 0;  // kError: 400, 413, 431, 501 or 505
  std::string error;     // kError: what was wrong, for the response body
  // kIncomplete with the header section complete and the body still to come, where the client
  // sent "Expect: 100-continue" and waits for an interim "100 Continue".
  bool expect_continue = false;
};

// Errors: a malformed request line or header (400), a target that is not origin-form ("/...")
// (400), header section over max_header_bytes or more than max_headers lines (431), a bad or
// conflicting Content-Length (400), a body over max_body_bytes (413), any Transfer-Encoding (501:
// send Content-Length), an HTTP version other than 1.0/1.1 (505). Malformed lines are reported as
// soon as they are complete, without waiting for the rest. `request` is written on kComplete only.
HttpParseResult parse_http_request(std::string_view data, const HttpLimits& limits,
                                   HttpRequest* request);

}  // namespace tessera::server
