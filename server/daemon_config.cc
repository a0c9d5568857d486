#include "server/daemon_config.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/backend/quantization.h"
#include "runtime/backend_factory.h"
#include "runtime/placement/device_map.h"
#include "runtime/tuning/token_buckets.h"
#include "yaml-cpp/yaml.h"

namespace tessera::server {

namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;
constexpr int64_t kGiB = 1024 * kMiB;
constexpr int64_t kTiB = 1024 * kGiB;

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrCat("\\x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

absl::Status invalid(std::string_view key, std::string_view value, std::string_view origin,
                     std::string_view allowed) {
  return absl::InvalidArgumentError(absl::StrCat("config key ", std::string(key), " = ",
                                                 quote(value), " (", std::string(origin),
                                                 ") is invalid: allowed is ", std::string(allowed)));
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && absl::ascii_isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::optional<int64_t> parse_int(std::string_view s) {
  s = trim(s);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s) {
  s = trim(s);
  if (s.empty()) return std::nullopt;
  const std::string str(s);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(str.c_str(), &end);
  if (end != str.c_str() + str.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

// "536870912", "512MiB", "2GB", "1.5GiB" -> bytes.
std::optional<int64_t> parse_bytes(std::string_view s) {
  s = trim(s);
  size_t n = 0;
  while (n < s.size() && (absl::ascii_isdigit(static_cast<unsigned char>(s[n])) || s[n] == '.')) ++n;
  if (n == 0) return std::nullopt;
  const std::optional<double> number = parse_double(s.substr(0, n));
  if (!number) return std::nullopt;
  const std::string unit = absl::AsciiStrToLower(std::string(trim(s.substr(n))));
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  else if (unit == "kb") scale = 1e3;
  else if (unit == "mb") scale = 1e6;
  else if (unit == "gb") scale = 1e9;
  else if (unit == "tb") scale = 1e12;
  else if (unit == "kib") scale = static_cast<double>(kKiB);
  else if (unit == "mib") scale = static_cast<double>(kMiB);
  else if (unit == "gib") scale = static_cast<double>(kGiB);
  else if (unit == "tib") scale = static_cast<double>(kTiB);
  else return std::nullopt;
  const double bytes = *number * scale;
  if (bytes > 9.0e18 || bytes != std::floor(bytes)) return std::nullopt;
  return static_cast<int64_t>(bytes);
}

// "30", "30s", "500ms", "2m", "1h" -> seconds.
std::optional<double> parse_seconds(std::string_view s) {
  s = trim(s);
  double scale = 1;
  if (s.ends_with("ms")) {
    scale = 1e-3;
    s.remove_suffix(2);
  } else if (s.ends_with("s")) {
    s.remove_suffix(1);
  } else if (s.ends_with("m")) {
    scale = 60;
    s.remove_suffix(1);
  } else if (s.ends_with("h")) {
    scale = 3600;
    s.remove_suffix(1);
  }
  const std::optional<double> v = parse_double(s);
  if (!v) return std::nullopt;
  return *v * scale;
}

std::string format_seconds(double s) {
  std::ostringstream os;
  os << s << "s";
  return os.str();
}

std::string format_bytes(int64_t b) {
  if (b > 0 && b % kGiB == 0) return absl::StrCat(b / kGiB, "GiB");
  if (b > 0 && b % kMiB == 0) return absl::StrCat(b / kMiB, "MiB");
  if (b > 0 && b % kKiB == 0) return absl::StrCat(b / kKiB, "KiB");
  return absl::StrCat(b);
}

bool valid_listen_address(std::string_view a) {
  if (a.starts_with("unix:")) return a.size() > 5;
  const size_t colon = a.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view host = a.substr(0, colon);
  if (host.front() == '[' && host.back() != ']') return false;
  const std::optional<int64_t> port = parse_int(a.substr(colon + 1));
  if (!port || *port < 0 || *port > 65535) return false;
  for (char c : host) {
    if (absl::ascii_isspace(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

struct KeySpec {
  ConfigKey key;
  std::function<bool(DaemonConfig&, std::string_view)> set;  // false: value not allowed
  std::function<std::string(const DaemonConfig&)> get;
};

KeySpec int_key(std::string_view name, std::string_view allowed, std::string_view help,
                int32_t DaemonConfig::*field, int64_t lo, int64_t hi) {
  return {{name, allowed, help},
          [field, lo, hi](DaemonConfig& c, std::string_view v) {
            const std::optional<int64_t> n = parse_int(v);
            if (!n || *n < lo || *n > hi) return false;
            c.*field = static_cast<int32_t>(*n);
            return true;
          },
          [field](const DaemonConfig& c) { return absl::StrCat(c.*field); }};
}

KeySpec bytes_key(std::string_view name, std::string_view allowed, std::string_view help,
                  int64_t DaemonConfig::*field, int64_t lo, int64_t hi) {
  return {{name, allowed, help},
          [field, lo, hi](DaemonConfig& c, std::string_view v) {
            const std::optional<int64_t> n = parse_bytes(v);
            if (!n || *n < lo || *n > hi) return false;
            c.*field = *n;
            return true;
          },
          [field](const DaemonConfig& c) { return format_bytes(c.*field); }};
}

KeySpec seconds_key(std::string_view name, std::string_view allowed, std::string_view help,
                    double DaemonConfig::*field, double lo, double hi) {
  return {{name, allowed, help},
          [field, lo, hi](DaemonConfig& c, std::string_view v) {
            const std::optional<double> s = parse_seconds(v);
            if (!s || *s < lo || *s > hi) return false;
            c.*field = *s;
            return true;
          },
          [field](const DaemonConfig& c) { return format_seconds(c.*field); }};
}

KeySpec string_key(std::string_view name, std::string_view allowed, std::string_view help,
                   std::string DaemonConfig::*field, std::function<bool(std::string_view)> ok) {
  return {{name, allowed, help},
          [field, ok](DaemonConfig& c, std::string_view v) {
            if (!ok(v)) return false;
            c.*field = std::string(v);
            return true;
          },
          [field](const DaemonConfig& c) { return c.*field; }};
}

KeySpec enum_key(std::string_view name, std::string_view allowed, std::string_view help,
                 std::string DaemonConfig::*field, std::vector<std::string> values) {
  return string_key(name, allowed, help, field, [values](std::string_view v) {
    return std::find(values.begin(), values.end(), v) != values.end();
  });
}

const std::vector<KeySpec>& specs() {
  static const std::vector<KeySpec> kSpecs = [] {
    auto any = [](std::string_view) { return true; };
    auto non_empty = [](std::string_view v) { return !trim(v).empty(); };
    std::vector<KeySpec> s;
    s.push_back(string_key("listen", "HOST:PORT with PORT in [0, 65535] (0 picks a free port), or unix:PATH",
                           "address the gRPC server listens on", &DaemonConfig::listen,
                           valid_listen_address));
    s.push_back(bytes_key("max_message_bytes", "a byte count (e.g. 4194304, 4MiB) in [1KiB, 1GiB]",
                          "largest gRPC request; larger ones get RESOURCE_EXHAUSTED (answers may be "
                          "16x this: a Tokenize answer is larger than its text)",
                          &DaemonConfig::max_message_bytes, kKiB, kGiB));
    s.push_back(seconds_key("keepalive_time", "a duration (e.g. 60, 60s, 500ms, 2m) in [1s, 24h]",
                            "how often the server pings an idle connection",
                            &DaemonConfig::keepalive_time_seconds, 1, 86400));
    s.push_back(seconds_key("keepalive_timeout", "a duration in [1s, 1h]",
                            "how long a keepalive ping may go unanswered before the connection closes",
                            &DaemonConfig::keepalive_timeout_seconds, 1, 3600));
    s.push_back(seconds_key("keepalive_min_ping_interval", "a duration in [0s, 24h]",
                            "clients pinging more often than this are disconnected (too_many_pings)",
                            &DaemonConfig::keepalive_min_ping_interval_seconds, 0, 86400));
    s.push_back(string_key("tls_cert", "a path to a PEM certificate chain, or empty (plaintext)",
                           "server certificate; enables TLS", &DaemonConfig::tls_cert, any));
    s.push_back(string_key("tls_key", "a path to a PEM private key, or empty",
                           "private key of tls_cert", &DaemonConfig::tls_key, any));
    s.push_back(string_key("tls_client_ca", "a path to a PEM CA bundle, or empty (no client certificates)",
                           "clients must present a certificate signed by this CA (mTLS)",
                           &DaemonConfig::tls_client_ca, any));
    s.push_back(enum_key("grpc_reflection", "one of true, false",
                         "serve gRPC server reflection (grpcurl without the .proto); it lists the "
                         "services and their public schema, nothing about the host",
                         &DaemonConfig::grpc_reflection, {"true", "false"}));
    s.push_back(string_key("model", "a path to a .gguf file or a Hugging Face model directory",
                           "the model to serve", &DaemonConfig::model, non_empty));
    s.push_back(string_key("model_id", "any string; empty = the model's file name without extension",
                           "the model's id in requests and ListModels", &DaemonConfig::model_id, any));
    s.push_back(enum_key("backend", "one of auto, cpu, gpu",
                         "where the model runs: auto = a GPU when one is visible, else the CPU; "
                         "gpu = refuse to start without one", &DaemonConfig::backend,
                         {"auto", "cpu", "gpu"}));
    s.push_back(int_key("gpu_device", "an integer in [0, 1023]", "GPU ordinal for the GPU backend",
                        &DaemonConfig::gpu_device, 0, 1023));
    s.push_back({{"dtype", "one of bfloat16 (or bf16), float16 (or fp16)",
                  "GPU compute dtype of weights, activations and the KV cache (logits stay "
                  "float32); the CPU backend computes in float32 and refuses float16"},
                 [](DaemonConfig& c, std::string_view v) {
                   const absl::StatusOr<DType> dtype = parse_gpu_dtype(v);
                   if (!dtype.ok()) return false;
                   c.dtype = std::string(gpu_dtype_name(*dtype));
                   return true;
                 },
                 [](const DaemonConfig& c) { return c.dtype; }});
    s.push_back(enum_key("quantization", "one of auto, none, fp8",
                         "fp8: the decoder layers' linear weights kept in FP8 (e4m3, a scale per "
                         "output feature, quantized at load; an FP8 checkpoint's codes kept); "
                         "embeddings, norms and lm_head stay in dtype. Needs a GPU with FP8 tensor "
                         "cores (compute capability 8.9+): refused at start elsewhere. auto: fp8 "
                         "for an FP8 checkpoint where every device has FP8, else none",
                         &DaemonConfig::quantization, {"auto", "none", "fp8"}));
    s.push_back(string_key("quantization_keep",
                           "a comma-separated list of qkv, o, gate_up, down, layers.N, "
                           "layers.N.<projection> (or empty)",
                           "linear weights quantization: fp8 leaves in dtype (every layer's "
                           "projection, a whole layer, or one projection of a layer)",
                           &DaemonConfig::quantization_keep,
                           [](std::string_view v) { return QuantizationKeep::parse(v).ok(); }));
    s.push_back(enum_key("kv_cache_dtype", "one of auto, fp8",
                         "the KV cache's elements: auto (the compute dtype) or fp8 (e4m3 with a "
                         "scale per layer for K and for V, from the checkpoint's k_scale/v_scale "
                         "or calibrated at load; twice the tokens). Needs a GPU with FP8 tensor "
                         "cores and head_dim 64, 128 or 256: refused at start elsewhere",
                         &DaemonConfig::kv_cache_dtype, {"auto", "fp8"}));
    s.push_back(int_key("threads", "an integer in [0, 1024] (0 = every core)",
                        "CPU backend threads", &DaemonConfig::threads, 0, 1024));
    s.push_back(string_key("devices", "device ordinals in pipeline order (e.g. 0,1), all, or empty (gpu_device alone)",
                           "the devices the model is split over", &DaemonConfig::devices,
                           [](std::string_view v) { return v == "all" || parse_devices(v).ok(); }));
    s.push_back(string_key("device_map",
                           "auto, balanced, balanced_low_0, sequential, or an explicit map "
                           "prefix=device,... (e.g. model.layers.0-15=0,model.layers.16-31=1,...)",
                           "how layers are placed on the devices (accelerate's semantics)",
                           &DaemonConfig::device_map,
                           [](std::string_view v) { return parse_device_map(v).ok(); }));
    s.push_back(string_key("max_memory", "device=bytes,... (e.g. 0=40GiB,1=70GiB), or empty (free memory)",
                           "memory each device may give the model", &DaemonConfig::max_memory,
                           [](std::string_view v) { return parse_max_memory(v).ok(); }));
    s.push_back(bytes_key("kv_reserve", "a byte count (e.g. 8GiB) in [0, 1PiB] (0 = 10% of each device's memory)",
                          "memory per device kept free of weights for its KV cache when placing layers",
                          &DaemonConfig::kv_reserve, 0, 1024 * kTiB));
    s.push_back(int_key("tensor_parallel_size", "an integer in [1, 64]",
                        "devices each layer is split over (tensor parallelism; consecutive devices of "
                        "`devices` form a pipeline stage)",
                        &DaemonConfig::tensor_parallel_size, 1, 64));
    s.push_back(int_key("micro_batches", "an integer in [1, 64]",
                        "parts a step of at least 512 tokens is split into (each >= 256) so that the "
                        "devices of a split model work at once",
                        &DaemonConfig::micro_batches, 1, 64));
    s.push_back(enum_key("decode_graphs", "one of auto, off",
                         "decode steps padded to the decode buckets and replayed as CUDA/HIP graphs "
                         "recorded per bucket: auto = where the backend records them (GPU); off = "
                         "every step launched op by op", &DaemonConfig::decode_graphs,
                         {"auto", "off"}));
    s.push_back(enum_key("enable_prefix_caching", "one of true, false",
                         "keep full KV blocks after their sequence finishes and reuse them for "
                         "prompts that start with the same tokens",
                         &DaemonConfig::enable_prefix_caching, {"true", "false"}));
    s.push_back(int_key("max_batch_tokens", "an integer in [1, 1048576]",
                        "tokens per engine step: decode tokens plus prefill chunks",
                        &DaemonConfig::max_batch_tokens, 1, 1 << 20));
    s.push_back(int_key("max_num_seqs", "an integer in [1, 65536]",
                        "sequences running at once (batch size)", &DaemonConfig::max_num_seqs, 1, 65536));
    s.push_back(int_key("admission_headroom_steps", "an integer in [0, 65536]",
                        "a new request is admitted only while the KV blocks left free cover every "
                        "running sequence's next this-many decode tokens; 0 = whenever it fits",
                        &DaemonConfig::admission_headroom_steps, 0, 65536));
    s.push_back(int_key("max_queue", "an integer in [1, 10000000]",
                        "requests waiting to run; more get RESOURCE_EXHAUSTED",
                        &DaemonConfig::max_queue, 1, 10000000));
    s.push_back(int_key("max_model_len", "an integer in [0, 16777216] (0 = the model's context length)",
                        "prompt + max_tokens limit per request", &DaemonConfig::max_model_len, 0,
                        1 << 24));
    s.push_back(int_key("block_size", "an integer in [1, 1024]", "KV cache tokens per block",
                        &DaemonConfig::block_size, 1, 1024));
    s.push_back(bytes_key("kv_cache_bytes", "a byte count (e.g. 536870912, 512MiB, 2GB) in [0, 1PiB] (0 = use kv_cache_fraction)",
                          "KV cache memory", &DaemonConfig::kv_cache_bytes, 0, 1024 * kTiB));
    s.push_back({{"kv_cache_fraction", "a number in [0, 1] (0 = 0.25 on CPU, 0.9 on GPU)",
                  "share of free memory after loading for the KV cache when kv_cache_bytes is 0"},
                 [](DaemonConfig& c, std::string_view v) {
                   const std::optional<double> f = parse_double(v);
                   if (!f || !(*f >= 0 && *f <= 1)) return false;
                   c.kv_cache_fraction = *f;
                   return true;
                 },
                 [](const DaemonConfig& c) {
                   std::ostringstream os;
                   os << c.kv_cache_fraction;
                   return os.str();
                 }});
    s.push_back(enum_key("tuning_mode", "one of off, use, tune, warmup",
                         "GEMM tuning: off = library defaults; use = the results file; tune = also "
                         "tune a GEMM the first time it runs; warmup = tune, plus tune every GEMM "
                         "of the model before serving",
                         &DaemonConfig::tuning_mode, {"off", "use", "tune", "warmup"}));
    s.push_back(string_key("tuning_file", "a file path (the device ordinal is inserted before the "
                           "extension, or replaces %d), or empty: tunableop_results0.csv on GPU 0, "
                           "tunableop_results_cpu0.csv on the CPU",
                           "GEMM tuning results file (PyTorch TunableOp CSV), one per device",
                           &DaemonConfig::tuning_file,
                           [](std::string_view v) { return v.empty() || !trim(v).empty(); }));
    s.push_back(int_key("tuning_max_duration_ms", "an integer in [0, 3600000] (0 = no time cap)",
                        "timing of one GEMM candidate stops after this many milliseconds",
                        &DaemonConfig::tuning_max_duration_ms, 0, 3600000));
    s.push_back(int_key("tuning_max_iterations", "an integer in [0, 1000000] (0 = no cap)",
                        "timing of one GEMM candidate stops after this many calls",
                        &DaemonConfig::tuning_max_iterations, 0, 1000000));
    s.push_back(int_key("tuning_rotating_buffer_mb",
                        "an integer in [-1, 1048576] (-1 = the device's cache size, 0 = off)",
                        "MiB of rotated operand copies while timing, so that GEMMs run cold",
                        &DaemonConfig::tuning_rotating_buffer_mb, -1, 1 << 20));
    s.push_back({{"tuning_decode_buckets", "ascending positive integers, comma-separated",
                  "decode token counts tuned (a decode step is padded up to one of them)"},
                 [](DaemonConfig& c, std::string_view v) {
                   absl::StatusOr<std::vector<int64_t>> b = parse_bucket_list(v);
                   if (!b.ok()) return false;
                   c.tuning_decode_buckets = *std::move(b);
                   return true;
                 },
                 [](const DaemonConfig& c) { return format_bucket_list(c.tuning_decode_buckets); }});
    s.push_back(int_key("tuning_prefill_pad", "an integer in [1, 65536]",
                        "prefill token counts tuned are multiples of this",
                        &DaemonConfig::tuning_prefill_pad, 1, 65536));
    s.push_back(string_key("admin_listen", "HOST:PORT with PORT in [0, 65535]",
                           "address of the admin HTTP listener (/metrics, /healthz, /readyz, /v1/tuning)",
                           &DaemonConfig::admin_listen, [](std::string_view v) {
                             return !v.starts_with("unix:") && valid_listen_address(v);
                           }));
    s.push_back(string_key("admin_token", "any string; empty = no token",
                           "bearer token that mutating admin endpoints and Admin.Warmup require; whoever presents "
                           "it sees host details (GetModelInfo placement, GET /v1/tuning validators)",
                           &DaemonConfig::admin_token, any));
    s.push_back(string_key("openai_listen", "HOST:PORT with PORT in [0, 65535], or empty (off)",
                           "address of the OpenAI-compatible HTTP API (same TLS files as gRPC)",
                           &DaemonConfig::openai_listen, [](std::string_view v) {
                             return v.empty() || (!v.starts_with("unix:") && valid_listen_address(v));
                           }));
    s.push_back(string_key("api_key", "any string; empty = api_key_file, then $TESSERA_API_KEY",
                           "bearer key the OpenAI API's /v1 routes and the gRPC Generation and Admin "
                           "services require; none = open",
                           &DaemonConfig::api_key, any));
    s.push_back(string_key("api_key_file", "a file path, or empty",
                           "file whose first line is the API key (when api_key is empty)",
                           &DaemonConfig::api_key_file, any));
    s.push_back(int_key("http_max_connections", "an integer in [1, 1000000]",
                        "open connections the OpenAI listener holds; a newcomer beyond them "
                        "evicts the connection waiting longest for a request",
                        &DaemonConfig::http_max_connections, 1, 1000000));
    s.push_back(int_key("http_threads", "an integer in [1, 256]",
                        "io threads of the OpenAI listener (connections are asynchronous)",
                        &DaemonConfig::http_threads, 1, 256));
    s.push_back(seconds_key("http_request_timeout", "a duration in [1ms, 1h]",
                            "an HTTP request must arrive whole within this of its first byte",
                            &DaemonConfig::http_request_timeout_seconds, 0.001, 3600));
    s.push_back(seconds_key("http_write_timeout", "a duration in [1ms, 1h]",
                            "a client that takes no part of a response for this long is dropped "
                            "(its request cancelled)",
                            &DaemonConfig::http_write_timeout_seconds, 0.001, 3600));
    s.push_back(seconds_key("drain_timeout", "a duration (e.g. 30, 30s, 500ms, 2m) in [0s, 1h]",
                            "on SIGTERM/SIGINT, how long in-flight requests may still run",
                            &DaemonConfig::drain_timeout_seconds, 0, 3600));
    s.push_back(enum_key("log_level", "one of trace, debug, info, warn, error, critical, off",
                         "log verbosity", &DaemonConfig::log_level,
                         {"trace", "debug", "info", "warn", "error", "critical", "off"}));
    s.push_back(enum_key("log_format", "one of text, json", "text lines or JSON objects, one per line",
                         &DaemonConfig::log_format, {"text", "json"}));
    return s;
  }();
  return kSpecs;
}

const KeySpec* find_spec(std::string_view key) {
  for (const KeySpec& s : specs()) {
    if (s.key.name == key) return &s;
  }
  return nullptr;
}

std::string key_names() {
  std::vector<std::string> names;
  for (const KeySpec& s : specs()) names.emplace_back(s.key.name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

const std::vector<ConfigKey>& config_keys() {
  static const std::vector<ConfigKey> kKeys = [] {
    std::vector<ConfigKey> keys;
    for (const KeySpec& s : specs()) keys.push_back(s.key);
    return keys;
  }();
  return kKeys;
}

absl::Status set_config_value(DaemonConfig& config, std::string_view key, std::string_view value,
                              std::string_view origin) {
  const KeySpec* spec = find_spec(key);
  if (spec == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown config key ", quote(key), " (",
                                                   std::string(origin), "); known keys: ", key_names()));
  }
  if (!spec->set(config, value)) return invalid(key, value, origin, spec->key.allowed);
  return absl::OkStatus();
}

std::string config_value(const DaemonConfig& config, std::string_view key) {
  const KeySpec* spec = find_spec(key);
  return spec == nullptr ? std::string() : spec->get(config);
}

absl::Status apply_config_yaml(DaemonConfig& config, std::string_view yaml, std::string_view origin) {
  // yaml-cpp reports errors by throwing: they stop here.
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    if (root.IsNull()) return absl::OkStatus();  // an empty file: every default
    if (!root.IsMap()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config ", std::string(origin), ": the top level must be a mapping of keys to values"));
    }
    for (const auto& entry : root) {
      const std::string key = entry.first.as<std::string>();
      const YAML::Node& node = entry.second;
      const std::string where = absl::StrCat(std::string(origin), " line ", entry.first.Mark().line + 1);
      if (find_spec(key) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("unknown config key ", quote(key), " (", where,
                                                       "); known keys: ", key_names()));
      }
      std::string value;
      if (node.IsNull()) {
        value = "";
      } else if (node.IsScalar()) {
        value = node.Scalar();
      } else {
        return invalid(key, node.IsSequence() ? "<a list>" : "<a mapping>", where,
                       absl::StrCat(std::string(find_spec(key)->key.allowed), " (a single value)"));
      }
      if (absl::Status s = set_config_value(config, key, value, where); !s.ok()) return s;
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config ", std::string(origin),
                                                   ": not valid YAML: line ", e.mark.line + 1,
                                                   ", column ", e.mark.column + 1, ": ", e.msg));
  }
  return absl::OkStatus();
}

absl::Status apply_config_file(DaemonConfig& config, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("config file ", quote(path), ": cannot open: ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("config file ", quote(path), ": read error"));
  return apply_config_yaml(config, text.str(), absl::StrCat("file ", path));
}

absl::Status validate_config(const DaemonConfig& config) {
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config keys tls_cert = ", quote(config.tls_cert), " and tls_key = ", quote(config.tls_key),
        " are invalid: allowed is both set (TLS) or both empty (plaintext)"));
  }
  if (!config.tls_client_ca.empty() && config.tls_cert.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config key tls_client_ca = ", quote(config.tls_client_ca),
        " is invalid without tls_cert and tls_key: mTLS needs the server's own certificate"));
  }
  if (config.tuning_max_duration_ms == 0 && config.tuning_max_iterations == 0) {
    return absl::InvalidArgumentError(
        "config keys tuning_max_duration_ms = 0 and tuning_max_iterations = 0 are invalid: "
        "allowed is at least one of them positive (timing a GEMM candidate must stop)");
  }
  return absl::OkStatus();
}

// A YAML scalar: plain when that reads back as the same string, quoted otherwise.
std::string yaml_scalar(std::string_view v) {
  const bool plain = !v.empty() && v == trim(v) && v.find_first_of(":#{}[],&*!|>'\"%@`\\") == std::string_view::npos &&
                     v != "~" && v != "null" && v != "true" && v != "false";
  return plain ? std::string(v) : quote(v);
}

std::string config_to_yaml(const DaemonConfig& config) {
  std::string out;
  for (const KeySpec& s : specs()) {
    absl::StrAppend(&out, std::string(s.key.name), ": ", yaml_scalar(s.get(config)), "\n");
  }
  return out;
}

std::string usage() {
  std::string out =
      "usage: tesserad [--config FILE] [--KEY VALUE ...]\n"
      "Serves a Llama-family model over gRPC (tessera.v1.Generation, tessera.v1.Admin, grpc.health.v1,\n"
      "server reflection). Precedence: flags > --config file > defaults.\n\n"
      "  --config FILE      YAML file with any of the keys below (see config/tessera.yaml)\n"
      "  --print-config     print the effective configuration as YAML and exit\n"
      "  --help, --version\n\n";
  const DaemonConfig defaults;
  for (const KeySpec& s : specs()) {
    std::string flag = std::string(s.key.name);
    std::replace(flag.begin(), flag.end(), '_', '-');
    absl::StrAppend(&out, "  --", flag, " (default ", quote(s.get(defaults)), ")\n      ",
                    std::string(s.key.help), "; ", std::string(s.key.allowed), "\n");
  }
  return out;
}

absl::StatusOr<CommandLine> parse_command_line(int argc, const char* const* argv) {
  CommandLine cl;
  std::vector<std::pair<std::string, std::string>> flags;  // key, value
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      cl.help = true;
      continue;
    }
    if (arg == "--version") {
      cl.version = true;
      continue;
    }
    if (arg == "--print-config") {
      cl.print_config = true;
      continue;
    }
    if (!arg.starts_with("--") || arg.size() == 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected argument ", quote(arg), ": flags are --KEY VALUE or --KEY=VALUE; see tesserad --help"));
    }
    arg.remove_prefix(2);
    std::string name;
    std::string value;
    if (const size_t eq = arg.find('='); eq != std::string_view::npos) {
      name = std::string(arg.substr(0, eq));
      value = std::string(arg.substr(eq + 1));
    } else {
      name = std::string(arg);
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
      }
      value = argv[++i];
    }
    std::replace(name.begin(), name.end(), '-', '_');
    if (name == "config") {
      cl.config_file = value;
      continue;
    }
    if (find_spec(name) == nullptr) {
      std::replace(name.begin(), name.end(), '_', '-');
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, "; see tesserad --help for the known flags"));
    }
    flags.emplace_back(std::move(name), std::move(value));
  }
  if (!cl.config_file.empty()) {
    if (absl::Status s = apply_config_file(cl.config, cl.config_file); !s.ok()) return s;
  }
  for (const auto& [key, value] : flags) {
    std::string flag = key;
    std::replace(flag.begin(), flag.end(), '_', '-');
    if (absl::Status s = set_config_value(cl.config, key, value, absl::StrCat("flag --", flag)); !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = validate_config(cl.config); !s.ok()) return s;
  return cl;
}

}  // namespace tessera::server
