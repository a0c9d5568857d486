// The admin token check shared by the admin HTTP listener and the gRPC Admin service: an
// "Authorization: Bearer TOKEN" value (scheme in any case, one or more spaces) against the token,
// compared in time that depends on the lengths only.
#pragma once

#include <string_view>

namespace tessera {

bool bearer_token_matches(std::string_view authorization, std::string_view token);

}  // namespace tessera
