#include "tools/bench_workload_flags.h"

#include "absl/strings/str_cat.h"

namespace tessera::cli {

namespace {

absl::StatusOr<int32_t> int_flag(const Args& args, const std::string& name, int32_t fallback,
                                 int32_t max) {
  auto v = args.get_int(name, fallback);
  if (!v.ok()) return v.status();
  if (*v < 1 || *v > max) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be in [1, ", max, "]"));
  }
  return static_cast<int32_t>(*v);
}

}  // namespace

const std::set<std::string>& bench_workload_value_flags() {
  static const std::set<std::string> flags = {"workload", "prefix-count", "prefix-len",
                                              "conversations", "turns", "admin-server"};
  return flags;
}

const char* bench_workload_usage() {
  return "  workloads:\n"
         "      --workload KIND         random (prompts of --prompt-len), shared-prefix,\n"
         "                              multi-turn, or sharegpt (log-normal lengths with\n"
         "                              ShareGPT's means as the vLLM paper reports them, within\n"
         "                              the model's context) (random)\n"
         "      --prefix-count N        shared-prefix: distinct system prompts, request i\n"
         "                              starting with prompt i mod N; --prompt-len is then the\n"
         "                              user part after it (4)\n"
         "      --prefix-len L          shared-prefix: tokens of each system prompt (256)\n"
         "      --conversations C       multi-turn: conversations sent side by side (8)\n"
         "      --turns T               multi-turn: turns of each; a turn's prompt is the whole\n"
         "                              conversation so far (earlier parts and the answers the\n"
         "                              server gave) and a user part of --prompt-len, sent once\n"
         "                              the turn before it finished; --output-len per answer (4)\n"
         "      --admin-server H:P      tesserad's admin listener: report the run's prefix-cache\n"
         "                              hit rate and preemptions from /metrics\n";
}

absl::StatusOr<WorkloadFlags> read_bench_workload_flags(const Args& args) {
  WorkloadFlags f;
  auto kind = parse_workload_kind(args.get("workload", "random"));
  if (!kind.ok()) return kind.status();
  f.kind = *kind;
  f.admin_address = args.get("admin-server");

  auto prefix_count = int_flag(args, "prefix-count", f.prefix_count, 1 << 20);
  auto prefix_len = int_flag(args, "prefix-len", f.prefix_len, 1 << 24);
  auto conversations = int_flag(args, "conversations", f.conversations, 1 << 20);
  auto turns = int_flag(args, "turns", f.turns, 1 << 16);
  for (const absl::Status& st : {prefix_count.status(), prefix_len.status(),
                                 conversations.status(), turns.status()}) {
    if (!st.ok()) return st;
  }
  f.prefix_count = *prefix_count;
  f.prefix_len = *prefix_len;
  f.conversations = *conversations;
  f.turns = *turns;

  auto only_for = [&](WorkloadKind owner, const std::string& flag) -> absl::Status {
    if (args.has(flag) && f.kind != owner) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " needs --workload ", workload_name(owner)));
    }
    return absl::OkStatus();
  };
  for (const absl::Status& st :
       {only_for(WorkloadKind::kSharedPrefix, "prefix-count"),
        only_for(WorkloadKind::kSharedPrefix, "prefix-len"),
        only_for(WorkloadKind::kMultiTurn, "conversations"),
        only_for(WorkloadKind::kMultiTurn, "turns")}) {
    if (!st.ok()) return st;
  }
  if (f.kind == WorkloadKind::kShareGpt) {
    for (const char* flag : {"prompt-len", "output-len"}) {
      if (args.has(flag)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", flag, " does not apply to --workload sharegpt: it draws its own"));
      }
    }
  }
  if (f.kind == WorkloadKind::kMultiTurn) {
    if (args.has("num-requests")) {
      return absl::InvalidArgumentError(
          "--num-requests does not apply to --workload multi-turn: it sends --conversations x "
          "--turns requests");
    }
    if (args.get("api", "grpc") == "openai" && args.get("prompt-kind", "token-ids") != "words") {
      return absl::InvalidArgumentError(
          "--workload multi-turn over --api openai needs --prompt-kind words (the answers come "
          "back as text)");
    }
  }
  return f;
}

}  // namespace tessera::cli
