// Human-readable renderings of API values for the CLI's output: finish reasons and token bytes.
#pragma once

#include <string>

#include "tessera/v1/tessera.pb.h"

namespace tessera::cli {

// "length", "stop", "eos", "cancelled"; "unspecified" for 0.
const char* finish_reason_name(v1::FinishReason reason);

// A token's bytes, quoted, with spaces kept visible by the quotes: printable ASCII and valid
// multi-byte UTF-8 as they are; \n \t \r \" \\ escaped; any other byte as \xNN.
std::string quote_token(const std::string& bytes);

// How many terminal columns `text` takes (UTF-8 code points; no wide-character handling).
size_t display_width(const std::string& text);

}  // namespace tessera::cli
