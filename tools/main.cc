// tessera: the command-line tool. `tessera run` generates offline; the other subcommands
// (generate, chat, models, tokenize, warmup, bench serve) talk to a running tesserad.
#include <cstdio>
#include <cstring>
#include <string>

#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "tools/commands.h"

namespace {

void usage() {
  std::fprintf(stderr,
               "usage: tessera <command> [flags]     (tessera <command> --help for its flags)\n"
               "commands:\n"
               "  run --model PATH [--chat] [--max-tokens N] [--temperature T] [--top-k K]\n"
               "      [--top-p P] [--min-p P] [--seed S] [--threads N] \"PROMPT\"\n"
               "                      generate offline, streaming text, then a summary line\n"
               "  perplexity --model PATH --text FILE [--context N] [--stride N] [--json PATH]\n"
               "                      score a text offline: its perplexity under the model\n"
               "  generate [--server HOST:PORT] [--model ID] [--chat] [--unary] [sampling and\n"
               "      stopping flags] \"PROMPT\"\n"
               "                      generate on tesserad, streaming text, then a summary line\n"
               "  chat [--server HOST:PORT] [--system TEXT] [sampling flags]\n"
               "                      interactive chat with tesserad (/reset, /exit)\n"
               "  models [--server HOST:PORT]\n"
               "                      the models tesserad serves\n"
               "  tokenize [--server HOST:PORT] [--chat] \"TEXT\"\n"
               "                      token ids and texts from tesserad's tokenizer\n"
               "  warmup [--server HOST:PORT] [--buckets 1,2,4] [--budget-s N] [--force]\n"
               "      [--admin-token T]\n"
               "                      tune the served model's GEMMs, with a progress bar\n"
               "  bench kernels [--device N] [--json PATH]   (GPU builds: attention kernel timings)\n"
               "  bench gemm [--device N] [--json PATH] [--m LIST]   (GPU builds: GEMM timings)\n"
               "  bench all-reduce [--devices 0,1] [--json PATH] [--sizes LIST]\n"
               "                      (GPU builds: NCCL vs one-shot all-reduce timings)\n"
               "  bench serve [--server HOST:PORT] [--concurrency N | --request-rate R]\n"
               "      [--num-requests N] [--duration S] [--prompt-len DIST] [--output-len DIST]\n"
               "      [--seed S] [--json FILE]\n"
               "                      load-test tesserad: TTFT, ITL, latency, throughput\n");
}

}  // namespace

int main(int argc, char** argv) {
  // Logs go to stderr: stdout carries the generated text (tessera run pipes cleanly).
  spdlog::set_default_logger(spdlog::stderr_color_mt("tessera"));
  spdlog::set_level(spdlog::level::warn);
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  using Command = int (*)(int, char**);
  Command run = nullptr;
  if (command == "run") run = tessera::cli::run_command;
  if (command == "perplexity") run = tessera::cli::perplexity_command;
  if (command == "generate") run = tessera::cli::generate_command;
  if (command == "chat") run = tessera::cli::chat_command;
  if (command == "models") run = tessera::cli::models_command;
  if (command == "tokenize") run = tessera::cli::tokenize_command;
  if (command == "warmup") run = tessera::cli::warmup_command;
  if (command == "bench") run = tessera::cli::bench_command;
  if (command == "bench" && argc > 2 && std::string(argv[2]) == "kernels") {
    return tessera::cli::bench_kernels_command(argc - 3, argv + 3);
  }
  if (command == "bench" && argc > 2 && std::string(argv[2]) == "gemm") {
    return tessera::cli::bench_gemm_command(argc - 3, argv + 3);
  }
  if (command == "bench" && argc > 2 && std::string(argv[2]) == "all-reduce") {
    return tessera::cli::bench_all_reduce_command(argc - 3, argv + 3);
  }
  if (run != nullptr) return run(argc - 2, argv + 2);
  std::fprintf(stderr, "tessera: unknown command '%s'\n", command.c_str());
  usage();
  return 2;
}
