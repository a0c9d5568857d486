#include "server/daemon_config.h"

#include "server/served_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

namespace tessera::server {
namespace {

std::string message(const absl::Status& s) { return std::string(s.message()); }

absl::StatusOr<CommandLine> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "tesserad");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(DaemonConfig, DefaultsServeTheDefaultModelOnPort50051) {
  auto cl = parse({});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->config.listen, "0.0.0.0:50051");
  EXPECT_EQ(cl->config.model, "models/SmolLM2-135M-Instruct.Q4_1.gguf");
  EXPECT_EQ(cl->config.max_num_seqs, 256);
  EXPECT_EQ(cl->config.block_size, 16);
  EXPECT_EQ(cl->config.drain_timeout_seconds, 30);
  EXPECT_EQ(cl->config.log_format, "text");
}

TEST(DaemonConfig, FlagsOverrideTheFileWhichOverridesDefaults) {
  const std::string file = write_temp("precedence.yaml",
                                      "listen: 127.0.0.1:7000\nmax_num_seqs: 8\nkv_cache_bytes: 512MiB\n"
                                      "drain_timeout: 500ms\nlog_format: json\n");
  auto cl = parse({"--config", file, "--max-num-seqs", "4", "--listen=127.0.0.1:7001"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(cl->config.listen, "127.0.0.1:7001");  // flag
  EXPECT_EQ(cl->config.max_num_seqs, 4);            // flag
  EXPECT_EQ(cl->config.kv_cache_bytes, 512ll << 20);  // file
  EXPECT_DOUBLE_EQ(cl->config.drain_timeout_seconds, 0.5);
  EXPECT_EQ(cl->config.log_format, "json");
  EXPECT_EQ(cl->config.block_size, 16);  // default
  // Flag order does not matter: --config after a flag still loses to the flag.
  auto later = parse({"--max-num-seqs", "4", "--config", file});
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->config.max_num_seqs, 4);
}

TEST(DaemonConfig, EveryKeyHasAFlag) {
  for (const ConfigKey& key : config_keys()) {
    std::string flag = "--" + std::string(key.name);
    std::replace(flag.begin(), flag.end(), '_', '-');
    const std::string value = config_value(DaemonConfig(), key.name);
    auto cl = parse({flag, value.empty() && key.name == "model" ? "x.gguf" : value});
    EXPECT_TRUE(cl.ok()) << flag << " " << value << ": " << cl.status();
  }
}

TEST(DaemonConfig, InvalidValuesNameKeyValueOriginAndWhatIsAllowed) {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {{"--max-num-seqs", "0"}, {"max_num_seqs", "\"0\"", "flag --max-num-seqs", "[1, 65536]"}},
      {{"--max-batch-tokens", "12x"}, {"max_batch_tokens", "12x", "integer"}},
      {{"--block-size", "2000"}, {"block_size", "2000", "[1, 1024]"}},
      {{"--admission-headroom-steps", "-1"}, {"admission_headroom_steps", "-1", "[0, 65536]"}},
      {{"--kv-cache-bytes", "5 parsecs"}, {"kv_cache_bytes", "5 parsecs", "byte count"}},
      {{"--kv-cache-fraction", "1.5"}, {"kv_cache_fraction", "[0, 1]"}},
      {{"--backend", "tpu"}, {"backend", "tpu", "auto, cpu, gpu"}},
      {{"--gpu-device", "-1"}, {"gpu_device", "-1"}},
      {{"--dtype", "float32"}, {"dtype", "float32", "bfloat16 (or bf16), float16 (or fp16)"}},
      {{"--dtype", "FP16"}, {"dtype", "FP16"}},
      {{"--drain-timeout", "soon"}, {"drain_timeout", "soon", "duration"}},
      {{"--drain-timeout", "2h"}, {"drain_timeout", "2h", "[0s, 1h]"}},
      {{"--log-level", "loud"}, {"log_level", "loud", "trace, debug, info"}},
      {{"--log-format", "xml"}, {"log_format", "xml", "text, json"}},
      {{"--listen", "50051"}, {"listen", "50051", "HOST:PORT"}},
      {{"--listen", "host:99999"}, {"listen", "host:99999"}},
      {{"--max-message-bytes", "10"}, {"max_message_bytes", "[1KiB, 1GiB]"}},
      {{"--threads", "-1"}, {"threads", "-1"}},
      {{"--quantization", "int4"}, {"quantization", "int4", "auto, none, fp8"}},
      {{"--kv-cache-dtype", "fp16"}, {"kv_cache_dtype", "fp16", "auto, fp8"}},
      {{"--quantization-keep", "down_proj"},
       {"quantization_keep", "down_proj", "qkv, o, gate_up, down, layers.N"}},
      {{"--model", ""}, {"model"}},
      {{"--tls-cert", "c.pem"}, {"tls_cert", "tls_key", "both"}},
      {{"--tls-client-ca", "ca.pem"}, {"tls_client_ca", "tls_cert"}},
      {{"--nope", "1"}, {"--nope"}},
      {{"--max-num-seqs"}, {"--max-num-seqs", "needs a value"}},
      {{"stray"}, {"stray"}},
  };
  for (const Case& c : cases) {
    auto cl = parse(c.args);
    ASSERT_FALSE(cl.ok()) << c.args[0];
    EXPECT_EQ(cl.status().code(), absl::StatusCode::kInvalidArgument) << cl.status();
    const std::string m = message(cl.status());
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    for (const std::string& want : c.mentions) EXPECT_NE(m.find(want), std::string::npos) << want << " not in: " << m;
  }
}

TEST(DaemonConfig, FileErrorsNameTheFileAndLine) {
  const std::string unknown = write_temp("unknown.yaml", "listen: 127.0.0.1:1\n\nmax_seqs: 3\n");
  auto a = parse({"--config", unknown});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(message(a.status()).find("unknown config key \"max_seqs\""), std::string::npos) << a.status();
  EXPECT_NE(message(a.status()).find(unknown + " line 3"), std::string::npos) << a.status();
  EXPECT_NE(message(a.status()).find("max_num_seqs"), std::string::npos) << "lists the known keys";

  const std::string list = write_temp("list.yaml", "max_queue: [1, 2]\n");
  auto b = parse({"--config", list});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(message(b.status()).find("max_queue"), std::string::npos) << b.status();
  EXPECT_NE(message(b.status()).find("single value"), std::string::npos) << b.status();

  const std::string syntax = write_temp("syntax.yaml", "listen: [unclosed\n");
  auto c = parse({"--config", syntax});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(message(c.status()).find("not valid YAML"), std::string::npos) << c.status();
  EXPECT_NE(message(c.status()).find(syntax), std::string::npos) << c.status();

  const std::string top = write_temp("top.yaml", "- a\n- b\n");
  EXPECT_FALSE(parse({"--config", top}).ok());

  auto d = parse({"--config", ::testing::TempDir() + "/absent.yaml"});
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(message(d.status()).find("absent.yaml"), std::string::npos);

  EXPECT_TRUE(parse({"--config", write_temp("empty.yaml", "# nothing\n")}).ok());
}

TEST(DaemonConfig, UnitsOfBytesAndDurations) {
  DaemonConfig c;
  ASSERT_TRUE(set_config_value(c, "kv_cache_bytes", "2GB", "t").ok());
  EXPECT_EQ(c.kv_cache_bytes, 2000000000);
  ASSERT_TRUE(set_config_value(c, "kv_cache_bytes", "1.5GiB", "t").ok());
  EXPECT_EQ(c.kv_cache_bytes, 1536ll << 20);
  ASSERT_TRUE(set_config_value(c, "kv_cache_bytes", "123", "t").ok());
  EXPECT_EQ(c.kv_cache_bytes, 123);
  ASSERT_TRUE(set_config_value(c, "drain_timeout", "2m", "t").ok());
  EXPECT_DOUBLE_EQ(c.drain_timeout_seconds, 120);
  ASSERT_TRUE(set_config_value(c, "drain_timeout", "45", "t").ok());
  EXPECT_DOUBLE_EQ(c.drain_timeout_seconds, 45);
  ASSERT_TRUE(set_config_value(c, "listen", "unix:/tmp/tessera.sock", "t").ok());
  ASSERT_TRUE(set_config_value(c, "listen", "[::]:50051", "t").ok());
}

TEST(DaemonConfig, PrintedConfigReadsBackTheSame) {
  DaemonConfig c;
  c.max_num_seqs = 7;
  c.kv_cache_bytes = 3ll << 30;
  c.drain_timeout_seconds = 2.5;
  c.tls_cert = "a b.pem";
  c.tls_key = "k.pem";
  DaemonConfig back;
  ASSERT_TRUE(apply_config_yaml(back, config_to_yaml(c), "printed").ok());
  EXPECT_EQ(config_to_yaml(back), config_to_yaml(c));
}

TEST(DaemonConfig, TuningKeysBecomeTheTuningConfig) {
  absl::StatusOr<CommandLine> cl =
      parse({"--tuning-mode", "warmup", "--tuning-file", "/tmp/t.csv", "--tuning-max-duration-ms",
             "5", "--tuning-max-iterations", "0", "--tuning-rotating-buffer-mb", "0",
             "--tuning-decode-buckets", "1,8,64", "--tuning-prefill-pad", "16"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  const TuningConfig t = tuning_config(cl->config);
  EXPECT_EQ(t.mode, TuningMode::kWarmup);
  EXPECT_EQ(t.filename, "/tmp/t.csv");
  EXPECT_EQ(t.max_tuning_duration_ms, 5);
  EXPECT_EQ(t.max_tuning_iterations, 0);
  EXPECT_EQ(t.rotating_buffer_size_mb, 0);
  EXPECT_EQ(t.buckets.decode, (std::vector<int64_t>{1, 8, 64}));
  EXPECT_EQ(t.buckets.prefill_pad, 16);
  EXPECT_TRUE(t.validate().ok());
  // Unset, the file is named by the device kind (results_path_for_device); blank is refused.
  EXPECT_EQ(tuning_config(DaemonConfig()).filename, "");
  EXPECT_FALSE(parse({"--tuning-file", " "}).ok());

  absl::StatusOr<CommandLine> bad = parse({"--tuning-decode-buckets", "8,1"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(message(bad.status()).find("tuning_decode_buckets"), std::string::npos) << bad.status();
  absl::StatusOr<CommandLine> never_stops =
      parse({"--tuning-max-duration-ms", "0", "--tuning-max-iterations", "0"});
  ASSERT_FALSE(never_stops.ok());
  EXPECT_NE(message(never_stops.status()).find("tuning_max_iterations"), std::string::npos);
  EXPECT_FALSE(parse({"--tuning-mode", "always"}).ok());
}

TEST(DaemonConfig, AdmissionHeadroomReachesTheEngine) {
  EXPECT_EQ(instance_options(DaemonConfig()).engine.admission_headroom_steps, 16);
  absl::StatusOr<CommandLine> cl = parse({"--admission-headroom-steps", "0"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(instance_options(cl->config).engine.admission_headroom_steps, 0);
}

TEST(DaemonConfig, QuantizationAndKvCacheDtypeReachTheInstance) {
  EXPECT_EQ(instance_options(DaemonConfig()).kv_cache_dtype, KvCacheDtype::kAuto);
  // auto by default: the load chooses (ModelInstance::quantization).
  EXPECT_EQ(instance_options(DaemonConfig()).quantization, std::nullopt);
  absl::StatusOr<CommandLine> none = parse({"--quantization", "none"});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(instance_options(none->config).quantization, Quantization::kNone);
  absl::StatusOr<CommandLine> cl = parse({"--kv-cache-dtype", "fp8", "--quantization", "fp8"});
  ASSERT_TRUE(cl.ok()) << cl.status();
  EXPECT_EQ(instance_options(cl->config).kv_cache_dtype, KvCacheDtype::kFp8);
  EXPECT_EQ(instance_options(cl->config).quantization, Quantization::kFp8);
  DaemonConfig from_file;
  ASSERT_TRUE(apply_config_yaml(from_file, "kv_cache_dtype: fp8\n", "test.yaml").ok());
  EXPECT_EQ(instance_options(from_file).kv_cache_dtype, KvCacheDtype::kFp8);
}

TEST(DaemonConfig, DtypeTakesTheLongAndShortNamesAndBecomesTheBackendsDtype) {
  EXPECT_EQ(DaemonConfig().dtype, "bfloat16");
  EXPECT_EQ(instance_options(DaemonConfig()).backend.gpu_dtype, DType::kBF16);
  for (const auto& [value, dtype, name] : std::vector<std::tuple<std::string, DType, std::string>>{
           {"float16", DType::kF16, "float16"},
           {"fp16", DType::kF16, "float16"},
           {"bfloat16", DType::kBF16, "bfloat16"},
           {"bf16", DType::kBF16, "bfloat16"}}) {
    absl::StatusOr<CommandLine> cl = parse({"--dtype", value});
    ASSERT_TRUE(cl.ok()) << value << ": " << cl.status();
    // Stored under its long name, as --print-config shows it and the file reads it back.
    EXPECT_EQ(cl->config.dtype, name) << value;
    EXPECT_EQ(config_value(cl->config, "dtype"), name) << value;
    EXPECT_EQ(instance_options(cl->config).backend.gpu_dtype, dtype) << value;
  }
  DaemonConfig from_file;
  ASSERT_TRUE(apply_config_yaml(from_file, "dtype: fp16\n", "test.yaml").ok());
  EXPECT_EQ(from_file.dtype, "float16");
}

// config/tessera.yaml documents every key with its default; the examples are valid.
TEST(DaemonConfig, ShippedConfigFilesAreValidAndCompleteWithDefaults) {
  const std::string root = TESSERA_SOURCE_DIR;
  const std::string main_file = root + "/config/tessera.yaml";
  DaemonConfig c;
  ASSERT_TRUE(apply_config_file(c, main_file).ok()) << apply_config_file(c, main_file);
  EXPECT_EQ(config_to_yaml(c), config_to_yaml(DaemonConfig())) << "tessera.yaml must hold the defaults";
  std::ifstream in(main_file);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  for (const ConfigKey& key : config_keys()) {
    EXPECT_NE(text.find("\n" + std::string(key.name) + ":"), std::string::npos)
        << key.name << " is not in config/tessera.yaml";
  }
  int examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root + "/config/examples")) {
    if (entry.path().extension() != ".yaml") continue;
    DaemonConfig e;
    const absl::Status s = apply_config_file(e, entry.path().string());
    EXPECT_TRUE(s.ok()) << entry.path() << ": " << s;
    EXPECT_TRUE(validate_config(e).ok()) << entry.path();
    ++examples;
  }
  EXPECT_GE(examples, 2);
}

}  // namespace
}  // namespace tessera::server
