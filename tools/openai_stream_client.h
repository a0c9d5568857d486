// One streamed OpenAI completion over plain HTTP/1.1 (Boost.Beast, blocking), for `tessera bench
// serve --api openai`: POSTs the body to /v1/completions with "stream": true and hands each
// server-sent event's JSON to a callback as it arrives. cancel() from another thread ends it.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "tessera/v1/tessera.pb.h"

namespace tessera::cli {

// The OpenAI completions body for a bench request: prompt (text or token ids), max_tokens,
// temperature, ignore_eos, stream with usage.
nlohmann::json openai_completion_body(const v1::GenerateRequest& request);

class OpenAiStreamClient {
 public:
  // `address` is HOST:PORT; `api_key`, when not empty, goes as "Authorization: Bearer KEY".
  OpenAiStreamClient(std::string address, std::string api_key)
      : address_(std::move(address)), api_key_(std::move(api_key)) {}

  // Blocks until the stream ends ("data: [DONE]"), fails or is cancelled. `on_event` gets each
  // event's JSON. Errors: UNAVAILABLE (cannot connect, connection lost), the HTTP status mapped
  // to a code with the server's error message (RESOURCE_EXHAUSTED for 429, ...), CANCELLED.
  absl::Status run(const nlohmann::json& body,
                   const std::function<void(const nlohmann::json& event)>& on_event);
  // Any thread: ends run() soon.
  void cancel();

 private:
  const std::string address_;
  const std::string api_key_;
  std::atomic<int> fd_{-1};
  std::atomic<bool> cancelled_{false};
};

}  // namespace tessera::cli
