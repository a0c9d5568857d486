// tessera warmup's flags: what goes into the Admin.Warmup request, and the admin token.
#pragma once

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "tessera/v1/tessera.pb.h"
#include "tools/cli_args.h"

namespace tessera::cli {

struct WarmupFlags {
  v1::WarmupRequest request;
  std::string admin_token;  // --admin-token, else $TESSERA_ADMIN_TOKEN; empty = none
};

// --buckets --prefill-pad --max-prefill-tokens --budget-s --admin-token
const std::set<std::string>& warmup_value_flags();
// --force
const std::set<std::string>& warmup_bool_flags();

// Errors name the flag and its value: buckets not ascending positive integers, a negative pad,
// token count or budget.
absl::StatusOr<WarmupFlags> read_warmup_flags(const Args& args);

}  // namespace tessera::cli
