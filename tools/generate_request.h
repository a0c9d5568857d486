// Builds GenerateRequest messages from the CLI's generation flags and inputs.
#pragma once

#include <string>
#include <vector>

#include "tessera/v1/tessera.pb.h"
#include "tools/generation_flags.h"

namespace tessera::cli {

// Sets sampling, stopping and logprobs from `flags`. Every sampling field is sent explicitly,
// so the CLI's defaults (temperature 0.7, as in `tessera run`) apply rather than the server's.
void apply_generation_flags(const GenerationFlags& flags, v1::GenerateRequest& request);

// Appends one chat message to `chat`.
void add_chat_message(v1::ChatInput& chat, const std::string& role, const std::string& content);

}  // namespace tessera::cli
