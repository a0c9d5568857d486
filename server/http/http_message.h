// HTTP/1.1 requests and responses as the HTTP front's handlers see them, and the seam for a
// response that comes later (it waits for the engine): a ResponseProducer.
#pragma once

#include <functional>
#include <memory>
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
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;

  // The first header named `name` (lower case), if any.
  std::optional<std::string_view> header(std::string_view name) const;
};

class ResponseProducer;

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // beside Content-Type/-Length
  // Set: the response comes from the producer. When `streamed`, status, content type and
  // headers go out at once and the body follows in chunks (chunked transfer encoding, e.g.
  // server-sent events); otherwise this response is a placeholder and the producer gives the
  // whole response once it has it.
  std::shared_ptr<ResponseProducer> producer;
  bool streamed = false;

  // A text/plain response; a body without a final newline gets one.
  static HttpResponse text(int status, std::string body);
};

// What a producer has ready: the whole response (not streamed), or the next piece of a streamed
// body.
struct ProducedPart {
  std::optional<HttpResponse> response;  // not streamed: the response; ends the exchange
  std::string chunk;                     // streamed: body bytes (may be empty when `last`)
  bool last = false;                     // streamed: the body ends after `chunk`
};

// A response that is not ready when the handler returns. The connection calls start() once,
// then next() on its own strand whenever `wake` was called (from any thread, e.g. the engine's)
// and no write is in flight, so a reader slower than the producer holds one piece at a time.
// cancel(): the client went away or stopped reading; stop the work behind the response.
// Destroying the producer must detach it from whatever calls `wake`.
class ResponseProducer {
 public:
  virtual ~ResponseProducer() = default;
  virtual void start(std::function<void()> wake) = 0;
  virtual std::optional<ProducedPart> next() = 0;
  virtual void cancel() = 0;
};

}  // namespace tessera::server
