// The tessera CLI's subcommands; each takes the arguments after its name and returns the
// process exit code (0 ok, 1 error, 2 bad usage, 130 interrupted; bench serve: 3 when requests
// failed).
#pragma once

namespace tessera::cli {

// tessera run --model PATH [--chat] [sampling flags] "PROMPT": offline generation, no server.
int run_command(int argc, char** argv);
int perplexity_command(int argc, char** argv);

// Against a running tesserad (--server HOST:PORT, default 127.0.0.1:50051):
// tessera generate [flags] "PROMPT": one completion, streamed.
int generate_command(int argc, char** argv);
// tessera chat [flags]: interactive conversation.
int chat_command(int argc, char** argv);
// tessera models: the served models, as a table.
int models_command(int argc, char** argv);
// tessera tokenize [--chat] "TEXT": token ids and texts.
int tokenize_command(int argc, char** argv);
// tessera warmup [flags]: tune the served model's GEMMs (Admin.Warmup), with a progress bar.
int warmup_command(int argc, char** argv);
// tessera bench serve [flags]: the load generator.
int bench_command(int argc, char** argv);
// tessera bench kernels [flags]: GPU attention kernel timings (needs a GPU build; in `tessera`,
// not tessera_tools_lib, because it links the backends).
int bench_kernels_command(int argc, char** argv);
// tessera bench gemm [flags]: Llama-3-8B GEMM timings, library default vs tuned (GPU builds; in
// `tessera`, not tessera_tools_lib).
int bench_gemm_command(int argc, char** argv);
// tessera bench all-reduce [flags]: the tensor-parallel all-reduce, NCCL vs the one-shot kernel,
// per message size (GPU builds; in `tessera`, not tessera_tools_lib).
int bench_all_reduce_command(int argc, char** argv);

}  // namespace tessera::cli
