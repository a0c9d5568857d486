#include "tools/openai_stream_client.h"

#include <sys/socket.h>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tools/tcp_connect.h"

namespace tessera::cli {

namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using nlohmann::json;

absl::StatusCode code_for(int http_status) {
  switch (http_status) {
    case 400: return absl::StatusCode::kInvalidArgument;
    case 401: return absl::StatusCode::kUnauthenticated;
    case 404: return absl::StatusCode::kNotFound;
    case 429: return absl::StatusCode::kResourceExhausted;
    case 503: return absl::StatusCode::kUnavailable;
    default: return absl::StatusCode::kUnknown;
  }
}

}  // namespace

json openai_completion_body(const v1::GenerateRequest& request) {
  json body = {{"model", request.model()},
               {"max_tokens", request.stopping().max_tokens()},
               {"ignore_eos", request.stopping().ignore_eos()},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (request.sampling().has_temperature()) body["temperature"] = request.sampling().temperature();
  if (request.has_token_ids()) {
    body["prompt"] = json(std::vector<int32_t>(request.token_ids().ids().begin(),
                                               request.token_ids().ids().end()));
  } else {
    body["prompt"] = request.prompt();
  }
  return body;
}

absl::Status OpenAiStreamClient::run(const json& body,
                                     const std::function<void(const json& event)>& on_event) {
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  TESSERA_RETURN_IF_ERROR(connect_host_port(address_, stream));
  beast::error_code ec;
  fd_.store(stream.socket().native_handle());
  if (cancelled_.load()) return absl::CancelledError("cancelled");

  http::request<http::string_body> request(http::verb::post, "/v1/completions", 11);
  request.set(http::field::host, address_);
  request.set(http::field::content_type, "application/json");
  if (!api_key_.empty()) request.set(http::field::authorization, "Bearer " + api_key_);
  request.body() = body.dump();
  request.prepare_payload();
  http::write(stream, request, ec);

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::numeric_limits<uint64_t>::max());
  std::string pending;  // SSE bytes not yet split into events
  bool done = false;
  auto on_chunk = [&](uint64_t, beast::string_view data, beast::error_code&) -> size_t {
    pending.append(data.data(), data.size());
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
      std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (!event.starts_with("data: ")) continue;
      event.erase(0, 6);
      if (event == "[DONE]") {
        done = true;
        continue;
      }
      json parsed = json::parse(event, nullptr, false);
      if (!parsed.is_discarded()) on_event(parsed);
    }
    return data.size();
  };
  if (!ec) http::read_header(stream, buffer, parser, ec);
  if (!ec && parser.get().result_int() == 200) {
    parser.on_chunk_body(on_chunk);
    while (!ec && !parser.is_done()) http::read_some(stream, buffer, parser, ec);
  } else if (!ec) {
    http::read(stream, buffer, parser, ec);
  }
  fd_.store(-1);
  beast::error_code ignored;
  stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
  if (cancelled_.load()) return absl::CancelledError("cancelled");
  if (ec) return absl::UnavailableError(absl::StrCat("connection to ", address_, ": ", ec.message()));
  const int status = parser.get().result_int();
  if (status != 200) {
    const json error = json::parse(parser.get().body(), nullptr, false);
    const std::string message = error.is_object() && error.contains("error")
                                    ? error["error"].value("message", std::string())
                                    : parser.get().body();
    return absl::Status(code_for(status), absl::StrCat("HTTP ", status, ": ", message));
  }
  if (!done) return absl::DataLossError("the stream ended without data: [DONE]");
  return absl::OkStatus();
}

void OpenAiStreamClient::cancel() {
  cancelled_.store(true);
  if (const int fd = fd_.load(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

}  // namespace tessera::cli
