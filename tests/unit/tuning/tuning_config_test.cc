// Tuning modes and the environment: every variable, TESSERA_ over PYTORCH_, PyTorch's
// ENABLED/TUNING semantics, bad values named.
#include "runtime/tuning/tuning_config.h"

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;

// A fake environment.
class Env {
 public:
  Env(std::initializer_list<std::pair<const std::string, std::string>> vars) : vars_(vars) {}
  GetEnv getenv() const {
    return [this](const char* name) -> const char* {
      const auto it = vars_.find(name);
      return it == vars_.end() ? nullptr : it->second.c_str();
    };
  }

 private:
  std::map<std::string, std::string> vars_;
};

absl::StatusOr<TuningConfig> apply(const Env& env, TuningConfig config = {}) {
  absl::Status s = apply_environment(env.getenv(), &config);
  if (!s.ok()) return s;
  return config;
}

TuningMode mode_of(const Env& env, TuningMode initial = TuningMode::kOff) {
  TuningConfig c;
  c.mode = initial;
  absl::StatusOr<TuningConfig> r = apply(env, c);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->mode : TuningMode::kOff;
}

TEST(TuningMode, NamesRoundTrip) {
  for (TuningMode m :
       {TuningMode::kOff, TuningMode::kUse, TuningMode::kTune, TuningMode::kWarmup}) {
    absl::StatusOr<TuningMode> back = parse_tuning_mode(tuning_mode_name(m));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, m);
  }
  absl::StatusOr<TuningMode> bad = parse_tuning_mode("fast");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("'fast'"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("off, use, tune, warmup"));
}

TEST(TuningMode, WhatEachModeDoes) {
  EXPECT_FALSE(reads_results(TuningMode::kOff));
  EXPECT_TRUE(reads_results(TuningMode::kUse));
  EXPECT_FALSE(tunes_on_miss(TuningMode::kUse));
  EXPECT_TRUE(tunes_on_miss(TuningMode::kTune));
  EXPECT_FALSE(tunes_upfront(TuningMode::kTune));
  EXPECT_TRUE(tunes_on_miss(TuningMode::kWarmup));
  EXPECT_TRUE(tunes_upfront(TuningMode::kWarmup));
}

TEST(TuningConfig, DefaultsArePyTorchs) {
  const TuningConfig c;
  EXPECT_EQ(c.mode, TuningMode::kOff);
  EXPECT_EQ(c.filename, "");  // the device kind's default (results_path_for_device)
  EXPECT_EQ(c.max_tuning_duration_ms, 30);
  EXPECT_EQ(c.max_tuning_iterations, 100);
  EXPECT_EQ(c.rotating_buffer_size_mb, -1);
  EXPECT_EQ(c.buckets.prefill_pad, 64);
  EXPECT_EQ(c.buckets.decode, (std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256}));
  EXPECT_TRUE(c.validate().ok()) << c.validate();
  EXPECT_DOUBLE_EQ(c.tolerance(GemmDType::kBF16).rtol, 1e-2);
  EXPECT_DOUBLE_EQ(c.tolerance(GemmDType::kF8E4M3FN).rtol, 2e-2);
  EXPECT_DOUBLE_EQ(c.tolerance(GemmDType::kF8E4M3FNUZ).atol, 2e-2);
}

TEST(TuningEnv, EmptyEnvironmentChangesNothing) {
  TuningConfig c;
  c.mode = TuningMode::kUse;
  c.filename = "x.csv";
  absl::StatusOr<TuningConfig> r = apply(Env{}, c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mode, TuningMode::kUse);
  EXPECT_EQ(r->filename, "x.csv");
}

TEST(TuningEnv, PyTorchEnabledAndTuning) {
  EXPECT_EQ(mode_of({{"PYTORCH_TUNABLEOP_ENABLED", "1"}}), TuningMode::kTune);  // TUNING defaults 1
  EXPECT_EQ(mode_of({{"PYTORCH_TUNABLEOP_ENABLED", "1"}, {"PYTORCH_TUNABLEOP_TUNING", "1"}}),
            TuningMode::kTune);
  EXPECT_EQ(mode_of({{"PYTORCH_TUNABLEOP_ENABLED", "1"}, {"PYTORCH_TUNABLEOP_TUNING", "0"}}),
            TuningMode::kUse);
  EXPECT_EQ(mode_of({{"PYTORCH_TUNABLEOP_ENABLED", "0"}}, TuningMode::kTune), TuningMode::kOff);
  EXPECT_EQ(mode_of({{"PYTORCH_TUNABLEOP_ENABLED", "0"}, {"PYTORCH_TUNABLEOP_TUNING", "1"}},
                    TuningMode::kTune),
            TuningMode::kOff);
  EXPECT_EQ(mode_of({{"PYTORCH_TUNABLEOP_ENABLED", "true"}}), TuningMode::kTune);
  EXPECT_EQ(mode_of({{"PYTORCH_TUNABLEOP_ENABLED", "FALSE"}}, TuningMode::kUse), TuningMode::kOff);
}

TEST(TuningEnv, TuningAloneAdjustsAnEnabledConfig) {
  EXPECT_EQ(mode_of({{"PYTORCH_TUNABLEOP_TUNING", "1"}}, TuningMode::kOff), TuningMode::kOff);
  EXPECT_EQ(mode_of({{"PYTORCH_TUNABLEOP_TUNING", "1"}}, TuningMode::kUse), TuningMode::kTune);
  EXPECT_EQ(mode_of({{"PYTORCH_TUNABLEOP_TUNING", "0"}}, TuningMode::kTune), TuningMode::kUse);
  EXPECT_EQ(mode_of({{"PYTORCH_TUNABLEOP_TUNING", "0"}}, TuningMode::kWarmup), TuningMode::kUse);
  EXPECT_EQ(mode_of({{"PYTORCH_TUNABLEOP_TUNING", "1"}}, TuningMode::kWarmup), TuningMode::kWarmup);
}

TEST(TuningEnv, EnabledKeepsAConfiguredWarmup) {
  EXPECT_EQ(mode_of({{"PYTORCH_TUNABLEOP_ENABLED", "1"}}, TuningMode::kWarmup),
            TuningMode::kWarmup);
  EXPECT_EQ(mode_of({{"PYTORCH_TUNABLEOP_ENABLED", "1"}, {"PYTORCH_TUNABLEOP_TUNING", "0"}},
                    TuningMode::kWarmup),
            TuningMode::kUse);
}

TEST(TuningEnv, TesseraModeDecides) {
  EXPECT_EQ(mode_of({{"TESSERA_TUNABLEOP_MODE", "warmup"}}), TuningMode::kWarmup);
  EXPECT_EQ(mode_of({{"TESSERA_TUNABLEOP_MODE", "use"}}, TuningMode::kTune), TuningMode::kUse);
  EXPECT_EQ(mode_of({{"TESSERA_TUNABLEOP_MODE", "off"}, {"PYTORCH_TUNABLEOP_ENABLED", "1"}}),
            TuningMode::kOff);
  EXPECT_EQ(mode_of({{"TESSERA_TUNABLEOP_MODE", "tune"}, {"TESSERA_TUNABLEOP_ENABLED", "0"}}),
            TuningMode::kTune);
  // No PYTORCH_ twin of MODE.
  EXPECT_EQ(mode_of({{"PYTORCH_TUNABLEOP_MODE", "tune"}}), TuningMode::kOff);
}

TEST(TuningEnv, TesseraNamesWinEachSettingOnItsOwn) {
  EXPECT_EQ(mode_of({{"TESSERA_TUNABLEOP_ENABLED", "0"}, {"PYTORCH_TUNABLEOP_ENABLED", "1"}}),
            TuningMode::kOff);
  EXPECT_EQ(mode_of({{"TESSERA_TUNABLEOP_ENABLED", "1"}, {"PYTORCH_TUNABLEOP_ENABLED", "0"}}),
            TuningMode::kTune);
  // TESSERA ENABLED with PYTORCH TUNING: both are read.
  EXPECT_EQ(mode_of({{"TESSERA_TUNABLEOP_ENABLED", "1"}, {"PYTORCH_TUNABLEOP_TUNING", "0"}}),
            TuningMode::kUse);
  EXPECT_EQ(mode_of({{"TESSERA_TUNABLEOP_ENABLED", "1"},
                     {"TESSERA_TUNABLEOP_TUNING", "1"},
                     {"PYTORCH_TUNABLEOP_TUNING", "0"}}),
            TuningMode::kTune);

  absl::StatusOr<TuningConfig> r = apply({{"TESSERA_TUNABLEOP_FILENAME", "t.csv"},
                                          {"PYTORCH_TUNABLEOP_FILENAME", "p.csv"},
                                          {"TESSERA_TUNABLEOP_VERBOSE", "2"},
                                          {"PYTORCH_TUNABLEOP_VERBOSE", "3"},
                                          {"TESSERA_TUNABLEOP_MAX_TUNING_DURATION_MS", "5"},
                                          {"PYTORCH_TUNABLEOP_MAX_TUNING_DURATION_MS", "6"},
                                          {"TESSERA_TUNABLEOP_MAX_TUNING_ITERATIONS", "7"},
                                          {"PYTORCH_TUNABLEOP_MAX_TUNING_ITERATIONS", "8"},
                                          {"TESSERA_TUNABLEOP_ROTATING_BUFFER_SIZE", "9"},
                                          {"PYTORCH_TUNABLEOP_ROTATING_BUFFER_SIZE", "10"},
                                          {"TESSERA_TUNABLEOP_NUMERICAL_CHECK", "0"},
                                          {"PYTORCH_TUNABLEOP_NUMERICAL_CHECK", "1"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->filename, "t.csv");
  EXPECT_EQ(r->verbose, 2);
  EXPECT_EQ(r->max_tuning_duration_ms, 5);
  EXPECT_EQ(r->max_tuning_iterations, 7);
  EXPECT_EQ(r->rotating_buffer_size_mb, 9);
  EXPECT_FALSE(r->numerical_check);
}

TEST(TuningEnv, EveryPyTorchVariableIsRead) {
  absl::StatusOr<TuningConfig> r = apply({{"PYTORCH_TUNABLEOP_FILENAME", "dir/p.csv"},
                                          {"PYTORCH_TUNABLEOP_VERBOSE", "3"},
                                          {"PYTORCH_TUNABLEOP_MAX_TUNING_DURATION_MS", "0"},
                                          {"PYTORCH_TUNABLEOP_MAX_TUNING_ITERATIONS", "8"},
                                          {"PYTORCH_TUNABLEOP_ROTATING_BUFFER_SIZE", "0"},
                                          {"PYTORCH_TUNABLEOP_NUMERICAL_CHECK", "0"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->filename, "dir/p.csv");
  EXPECT_EQ(r->verbose, 3);
  EXPECT_EQ(r->max_tuning_duration_ms, 0);
  EXPECT_EQ(r->max_tuning_iterations, 8);
  EXPECT_EQ(r->rotating_buffer_size_mb, 0);
  EXPECT_FALSE(r->numerical_check);
}

TEST(TuningEnv, NegativeRotatingBufferMeansL2Sized) {
  TuningConfig c;
  c.rotating_buffer_size_mb = 0;
  absl::StatusOr<TuningConfig> r = apply({{"PYTORCH_TUNABLEOP_ROTATING_BUFFER_SIZE", "-5"}}, c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rotating_buffer_size_mb, -1);
}

TEST(TuningEnv, EmptyValueIsUnset) {
  TuningConfig c;
  c.mode = TuningMode::kUse;
  c.filename = "configured.csv";  // not the default (empty): an empty variable must not clear it
  absl::StatusOr<TuningConfig> r =
      apply({{"TESSERA_TUNABLEOP_ENABLED", ""}, {"TESSERA_TUNABLEOP_FILENAME", ""}}, c);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->mode, TuningMode::kUse);
  EXPECT_EQ(r->filename, "configured.csv");
  // An empty TESSERA_ name falls through to the PYTORCH_ one.
  EXPECT_EQ(mode_of({{"TESSERA_TUNABLEOP_ENABLED", ""}, {"PYTORCH_TUNABLEOP_ENABLED", "1"}}),
            TuningMode::kTune);
}

TEST(TuningEnv, BadValuesNameTheVariableAndValue) {
  struct Case {
    const char* name;
    const char* value;
  };
  const Case cases[] = {
      {"PYTORCH_TUNABLEOP_ENABLED", "yes-please"},
      {"TESSERA_TUNABLEOP_ENABLED", "2"},
      {"PYTORCH_TUNABLEOP_TUNING", "on"},
      {"TESSERA_TUNABLEOP_MODE", "fast"},
      {"TESSERA_TUNABLEOP_VERBOSE", "4"},
      {"PYTORCH_TUNABLEOP_VERBOSE", "-1"},
      {"PYTORCH_TUNABLEOP_MAX_TUNING_DURATION_MS", "-30"},
      {"TESSERA_TUNABLEOP_MAX_TUNING_DURATION_MS", "30ms"},
      {"PYTORCH_TUNABLEOP_MAX_TUNING_ITERATIONS", "-1"},
      {"TESSERA_TUNABLEOP_MAX_TUNING_ITERATIONS", "1e3"},
      {"PYTORCH_TUNABLEOP_ROTATING_BUFFER_SIZE", "256MB"},
      {"TESSERA_TUNABLEOP_NUMERICAL_CHECK", "maybe"},
      {"PYTORCH_TUNABLEOP_MAX_TUNING_ITERATIONS", "99999999999999999999999"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<TuningConfig> r = apply({{c.name, c.value}});
    ASSERT_FALSE(r.ok()) << c.name << "=" << c.value;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr(std::string(c.name) + "='" + c.value + "'"));
  }
}

TEST(TuningEnv, BadValueIsReportedEvenWhenModeDecides) {
  absl::StatusOr<TuningConfig> r =
      apply({{"TESSERA_TUNABLEOP_MODE", "tune"}, {"PYTORCH_TUNABLEOP_ENABLED", "yes"}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("PYTORCH_TUNABLEOP_ENABLED='yes'"));
}

TEST(TuningEnv, BothLimitsZeroIsRejected) {
  absl::StatusOr<TuningConfig> r = apply({{"TESSERA_TUNABLEOP_MAX_TUNING_DURATION_MS", "0"},
                                          {"TESSERA_TUNABLEOP_MAX_TUNING_ITERATIONS", "0"}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("both 0"));
}

TEST(TuningConfig, ValidateNamesTheField) {
  TuningConfig c;
  c.verbose = 9;
  EXPECT_THAT(std::string(c.validate().message()), HasSubstr("verbose is 9"));
  c = TuningConfig{};
  c.rotating_buffer_size_mb = -2;
  EXPECT_THAT(std::string(c.validate().message()), HasSubstr("rotating_buffer_size_mb is -2"));
  c = TuningConfig{};
  c.bf16_tolerance.atol = -1;
  EXPECT_THAT(std::string(c.validate().message()), HasSubstr("bf16 tolerance"));
  c = TuningConfig{};
  c.buckets.decode = {1, 4, 2};
  EXPECT_THAT(std::string(c.validate().message()), HasSubstr("bucket 2 (2)"));
}

TEST(ResultsPath, InsertsTheOrdinalBeforeTheExtension) {
  constexpr TuningDeviceKind kGpu = TuningDeviceKind::kGpu;
  TuningConfig c;
  c.filename = "src/matmul_result.csv";
  EXPECT_EQ(results_path_for_device(c, kGpu, 0), "src/matmul_result0.csv");
  c.filename = "/var/lib/tessera.d/results";  // the dot is in the directory, not the file name
  EXPECT_EQ(results_path_for_device(c, kGpu, 1), "/var/lib/tessera.d/results1");
  c.filename = "dir/.hidden";
  EXPECT_EQ(results_path_for_device(c, kGpu, 2), "dir/.hidden2");
  c.filename = "gpu%d/results.csv";
  EXPECT_EQ(results_path_for_device(c, kGpu, 7), "gpu7/results.csv");
  c.filename = "a.b.csv";
  EXPECT_EQ(results_path_for_device(c, kGpu, 1), "a.b1.csv");
}

// A CPU and a GPU daemon started in one directory must not share a file: each would find the
// other's validators wrong, re-tune, and overwrite it. GPUs keep PyTorch's per-ordinal name.
TEST(ResultsPath, DefaultNamesDifferByDeviceKind) {
  const TuningConfig c;
  EXPECT_EQ(results_path_for_device(c, TuningDeviceKind::kGpu, 0), "tunableop_results0.csv");
  EXPECT_EQ(results_path_for_device(c, TuningDeviceKind::kGpu, 3), "tunableop_results3.csv");
  EXPECT_EQ(results_path_for_device(c, TuningDeviceKind::kCpu, 0), "tunableop_results_cpu0.csv");
  EXPECT_EQ(results_path_for_device(c, TuningDeviceKind::kCpu, 1), "tunableop_results_cpu1.csv");
}

// A name the user gives is the same for every kind of device, as before.
TEST(ResultsPath, AGivenNameIsUsedOnEveryKind) {
  TuningConfig c;
  c.filename = "tunableop_results.csv";
  EXPECT_EQ(results_path_for_device(c, TuningDeviceKind::kCpu, 0), "tunableop_results0.csv");
  EXPECT_EQ(results_path_for_device(c, TuningDeviceKind::kGpu, 0), "tunableop_results0.csv");
  c.filename = "tuned/%d.csv";
  EXPECT_EQ(results_path_for_device(c, TuningDeviceKind::kCpu, 2), "tuned/2.csv");
}

TEST(TimedIterations, IterationCapAndDurationCap) {
  TuningConfig c;                                  // 30 ms, 100 iterations
  EXPECT_EQ(timed_iterations(c, 0.0078125), 100);  // 3840 would fit; capped at 100
  EXPECT_EQ(timed_iterations(c, 1.0), 30);
  EXPECT_EQ(timed_iterations(c, 100.0), 1);  // at least one
  c.max_tuning_iterations = 0;               // no iteration cap
  EXPECT_EQ(timed_iterations(c, 0.0078125), 3840);
  c.max_tuning_iterations = 10;
  c.max_tuning_duration_ms = 0;  // no time cap
  EXPECT_EQ(timed_iterations(c, 100.0), 10);
}

}  // namespace
}  // namespace tessera
