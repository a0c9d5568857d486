#include "tools/warmup_flags.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "runtime/tuning/token_buckets.h"

namespace tessera::cli {

const std::set<std::string>& warmup_value_flags() {
  static const std::set<std::string> flags = {"buckets", "prefill-pad", "max-prefill-tokens",
                                              "budget-s", "admin-token"};
  return flags;
}

const std::set<std::string>& warmup_bool_flags() {
  static const std::set<std::string> flags = {"force"};
  return flags;
}

absl::StatusOr<WarmupFlags> read_warmup_flags(const Args& args) {
  WarmupFlags out;
  if (args.has("buckets")) {
    absl::StatusOr<std::vector<int64_t>> buckets = parse_bucket_list(args.get("buckets"));
    if (!buckets.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--buckets: ", std::string(buckets.status().message())));
    }
    for (int64_t b : *buckets) out.request.add_decode_buckets(b);
  }
  for (const char* flag : {"prefill-pad", "max-prefill-tokens"}) {
    absl::StatusOr<int64_t> v = args.get_int(flag, 0);
    if (!v.ok()) return v.status();
    if (*v < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, "=", *v, ": must be positive (or 0 for the server's)"));
    }
    if (std::string(flag) == "prefill-pad") {
      out.request.set_prefill_pad(*v);
    } else {
      out.request.set_max_prefill_tokens(*v);
    }
  }
  absl::StatusOr<double> budget = args.get_double("budget-s", 0);
  if (!budget.ok()) return budget.status();
  if (!std::isfinite(*budget) || *budget < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--budget-s=", args.get("budget-s"), ": must be >= 0 seconds (0 = none)"));
  }
  out.request.set_time_budget_seconds(*budget);
  out.request.set_force(args.has("force"));
  if (args.has("admin-token")) {
    out.admin_token = args.get("admin-token");
  } else if (const char* env = std::getenv("TESSERA_ADMIN_TOKEN"); env != nullptr) {
    out.admin_token = env;
  }
  return out;
}

}  // namespace tessera::cli
