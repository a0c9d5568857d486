// tesserad's configuration: one YAML file plus a command-line flag for every key.
// Precedence: flags > file (--config) > defaults. An unknown key or flag, or a value outside what
// the key allows, is an error naming the key, the value, where it came from and what is allowed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessera::server {

struct DaemonConfig {
  // Transport.
  std::string listen = "0.0.0.0:50051";           // HOST:PORT (port 0: pick one) or unix:PATH
  int64_t max_message_bytes = 4 * 1024 * 1024;    // largest request; answers up to 16x
  double keepalive_time_seconds = 60;             // server pings an idle connection this often
  double keepalive_timeout_seconds = 20;          // ...and closes it when no ack comes in time
  double keepalive_min_ping_interval_seconds = 10;  // clients may ping at most this often
  std::string tls_cert;       // PEM server certificate chain; empty = plaintext
  std::string tls_key;        // PEM private key of tls_cert
  std::string tls_client_ca;  // PEM CA bundle; set = mTLS (clients must present a cert it signed)
  std::string grpc_reflection = "true";  // true or false: serve grpc.reflection.v1alpha

  // Model.
  std::string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";  // GGUF file or HF directory
  std::string model_id;  // the id clients name; empty = the model file's name without extension
  std::string backend = "auto";  // auto (GPU if visible, else CPU), cpu, or gpu (required)
  int32_t gpu_device = 0;          // GPU ordinal for the GPU backend
  std::string dtype = "bfloat16";  // GPU compute dtype: bfloat16 or float16 (CPU: float32)
  std::string quantization = "auto";  // auto, none or fp8: the decoder's linear weights in FP8
  std::string quantization_keep;      // linear weights fp8 leaves in dtype (QuantizationKeep)
  std::string kv_cache_dtype = "auto";  // auto (the compute dtype) or fp8
  int32_t threads = 0;   // CPU backend threads; 0 = every core

  // Placement over several devices (docs/architecture.md, "Placement").
  std::string devices;            // "0,1" in pipeline order, "all", or empty = gpu_device alone
  std::string device_map = "auto";  // auto, balanced, balanced_low_0, sequential, or prefix=device,...
  std::string max_memory;         // per-device caps "0=40GiB,1=70GiB"; empty = free memory
  int64_t kv_reserve = 0;         // per device kept free of weights for KV; 0 = 10% of its memory
  int32_t tensor_parallel_size = 1;  // devices each pipeline stage's layers are split over
  int32_t micro_batches = 2;      // parts a large step is split into across the devices' pipeline
  std::string decode_graphs = "auto";  // auto (recorded where the backend can: GPU) or off

  // Engine.
  int32_t max_batch_tokens = 2048;  // tokens per engine step (decode + prefill chunks)
  int32_t max_num_seqs = 256;       // sequences running at once
  std::string enable_prefix_caching = "true";  // true or false: reuse cached prompt prefixes
  int32_t admission_headroom_steps = 16;  // decode tokens of room kept free per running sequence
  int32_t max_queue = 1024;         // requests submitted but not yet running
  int32_t max_model_len = 0;        // prompt + max_tokens limit; 0 = the model's context
  int32_t block_size = 16;          // KV cache tokens per block
  int64_t kv_cache_bytes = 0;       // KV cache memory; 0 = kv_cache_fraction of free memory
  double kv_cache_fraction = 0;     // of free memory when kv_cache_bytes is 0; 0 = 0.25 CPU, 0.9 GPU

  // GEMM tuning (runtime/tuning/); TESSERA_TUNABLEOP_* and PYTORCH_TUNABLEOP_* variables
  // override these at model load.
  std::string tuning_mode = "off";  // off, use, tune, warmup (tune + the whole plan before serving)
  std::string tuning_file;  // per device: "results.csv" -> "results0.csv"; empty = by backend
  int32_t tuning_max_duration_ms = 30;     // per candidate; 0 = no time cap
  int32_t tuning_max_iterations = 100;     // per candidate; 0 = no iteration cap
  int32_t tuning_rotating_buffer_mb = -1;  // operand pool while timing; -1 = cache size, 0 = off
  std::vector<int64_t> tuning_decode_buckets = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  int32_t tuning_prefill_pad = 64;  // prefill token counts padded to a multiple of this

  // Admin HTTP listener: /metrics, /healthz, /readyz, /v1/tuning.
  std::string admin_listen = "127.0.0.1:8002";  // HOST:PORT; loopback by default
  std::string admin_token;  // bearer token required by mutating admin endpoints; empty = none

  // OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions, /v1/models, /health).
  std::string openai_listen = "0.0.0.0:8000";  // HOST:PORT; empty = no OpenAI listener
  std::string api_key;        // bearer key the /v1 routes require; empty = api_key_file, env
  std::string api_key_file;   // file holding the key (first line)
  int32_t http_max_connections = 4096;  // open connections on the OpenAI listener
  int32_t http_threads = 2;             // io threads of the OpenAI listener
  double http_request_timeout_seconds = 10;  // a request's first byte to its last
  double http_write_timeout_seconds = 30;    // a client must take each write within this

  // Lifecycle and logs.
  double drain_timeout_seconds = 30;  // on SIGTERM/SIGINT: how long in-flight requests may run
  std::string log_level = "info";     // trace, debug, info, warn, error, critical, off
  std::string log_format = "text";    // text or json (one object per line)
};

// One configuration key: its YAML name (the flag is the same with '-' for '_').
struct ConfigKey {
  std::string_view name;
  std::string_view allowed;  // what values it takes, for errors and --help
  std::string_view help;     // one line
};
const std::vector<ConfigKey>& config_keys();

// Sets `key` from its text form; errors name the key, the value, `origin` and what is allowed.
absl::Status set_config_value(DaemonConfig& config, std::string_view key, std::string_view value,
                              std::string_view origin);
// The key's current value in the form set_config_value takes.
std::string config_value(const DaemonConfig& config, std::string_view key);

// Applies a YAML file (a mapping of keys to scalars) over `config`.
absl::Status apply_config_file(DaemonConfig& config, const std::string& path);
// Applies YAML text (origin names it in errors).
absl::Status apply_config_yaml(DaemonConfig& config, std::string_view yaml, std::string_view origin);
// Checks what single keys cannot (TLS key without certificate, ...).
absl::Status validate_config(const DaemonConfig& config);
// The whole configuration as YAML (every key), as --print-config shows it.
std::string config_to_yaml(const DaemonConfig& config);

struct CommandLine {
  DaemonConfig config;
  std::string config_file;  // --config, empty when not given
  bool help = false;
  bool version = false;
  bool print_config = false;
};

// Parses argv: --config FILE, then one --KEY VALUE / --KEY=VALUE per config key, --help,
// --version, --print-config. Applies defaults, then the file, then the flags, and validates.
absl::StatusOr<CommandLine> parse_command_line(int argc, const char* const* argv);
std::string usage();

}  // namespace tessera::server
