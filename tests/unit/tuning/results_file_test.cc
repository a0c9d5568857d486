// The results file: round trip, validators, corrupt lines, hand edits, atomic replacement.
#include "runtime/tuning/results_file.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/tuning/atomic_file.h"

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A directory from mkdtemp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string templ = (std::filesystem::temp_directory_path() / "tessera_tuning_XXXXXX").string();
    char* p = ::mkdtemp(templ.data());
    path_ = p != nullptr ? std::string(p) : std::string();
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ec;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

  // Names in the directory, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(path_, ec)) {
      out.push_back(e.path().filename().string());
    }
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::string path_;
};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const Validators kValidators = {
    {"TESSERA_VERSION", "0.3.0"},
    {"CUDA_VERSION", "12.4"},
    {"BLASLT_VERSION", "120400"},
    {"GPU_ARCH", "sm_90"},
    {"DEVICE_NAME", "NVIDIA H100 80GB HBM3"},
};

GemmSignature linear(int64_t tokens, int64_t out, int64_t in,
                     GemmDType out_dtype = GemmDType::kBF16) {
  return GemmSignature::for_linear(tokens, out, in, GemmDType::kBF16, out_dtype);
}

class ResultsFileTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.path().empty()) << "mkdtemp failed"; }
  TempDir dir_;
};

TEST_F(ResultsFileTest, SaveThenLoadRoundTrips) {
  TunedEntries entries;
  entries[linear(1, 4096, 4096)] = {"cublaslt_algo_23_tile_128x64_splitk_4", 0.0123};
  entries[linear(64, 6144, 4096)] = {"Default", std::nullopt};
  entries[linear(8, 128256, 4096, GemmDType::kF32)] = {"small_m_gemv_v2", 0.5};
  const std::string path = dir_.file("results0.csv");
  ASSERT_TRUE(ResultsFile::save(path, kValidators, entries).ok());

  absl::StatusOr<LoadedResults> r = ResultsFile::load(path, kValidators);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->exists);
  EXPECT_TRUE(r->validators_match);
  EXPECT_THAT(r->warnings, IsEmpty());
  EXPECT_EQ(r->file_validators, kValidators);
  EXPECT_EQ(r->entries, entries);
}

TEST_F(ResultsFileTest, WritesValidatorsFirstThenSortedResults) {
  TunedEntries entries;
  entries[linear(128, 4096, 4096)] = {"a", 1.5};
  entries[linear(16, 4096, 4096)] = {"b", 0.25};
  entries[linear(2, 4096, 4096)] = {"c", std::nullopt};
  const std::string path = dir_.file("r.csv");
  ASSERT_TRUE(
      ResultsFile::save(path, {{"TESSERA_VERSION", "1"}, {"GPU_ARCH", "gfx942"}}, entries).ok());
  EXPECT_EQ(read_text(path),
            "Validator,GPU_ARCH,gfx942\n"
            "Validator,TESSERA_VERSION,1\n"
            "GemmTunableOp_BFloat16_TN,tn_4096_2_4096_ld_4096_4096_4096,c\n"
            "GemmTunableOp_BFloat16_TN,tn_4096_16_4096_ld_4096_4096_4096,b,0.25\n"
            "GemmTunableOp_BFloat16_TN,tn_4096_128_4096_ld_4096_4096_4096,a,1.5\n");
}

// An fp16 model's GEMMs are PyTorch's Half ops; the same shape in bf16 is another entry, so that
// switching a daemon's dtype never runs a solution tuned for the other type.
TEST_F(ResultsFileTest, HalfAndBFloat16ResultsOfOneShapeStayApart) {
  TunedEntries entries;
  const auto half = [](int64_t tokens, GemmDType out) {
    return GemmSignature::for_linear(tokens, 4096, 4096, GemmDType::kF16, out);
  };
  entries[half(1, GemmDType::kF16)] = {"lt_half", 0.02};
  entries[half(1, GemmDType::kF32)] = {"lt_half_logits", 0.03};
  entries[linear(1, 4096, 4096)] = {"lt_bf16", 0.01};
  const std::string path = dir_.file("r.csv");
  ASSERT_TRUE(ResultsFile::save(path, {}, entries).ok());
  EXPECT_EQ(read_text(path),
            "GemmTunableOp_BFloat16_TN,tn_4096_1_4096_ld_4096_4096_4096,lt_bf16,0.01\n"
            "GemmTunableOp_Half_TN,tn_4096_1_4096_ld_4096_4096_4096,lt_half,0.02\n"
            "GemmTunableOp_Half_TN_F32out,tn_4096_1_4096_ld_4096_4096_4096,lt_half_logits,0.03\n");
  absl::StatusOr<LoadedResults> r = ResultsFile::load(path, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->warnings, IsEmpty());
  EXPECT_EQ(r->entries, entries);
  EXPECT_EQ(r->entries.at(half(1, GemmDType::kF16)).solution, "lt_half");
  EXPECT_EQ(r->entries.at(linear(1, 4096, 4096)).solution, "lt_bf16");
}

TEST_F(ResultsFileTest, MissingFileIsEmptyNotAnError) {
  absl::StatusOr<LoadedResults> r = ResultsFile::load(dir_.file("nope.csv"), kValidators);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->exists);
  EXPECT_THAT(r->entries, IsEmpty());
  EXPECT_THAT(r->warnings, IsEmpty());
}

TEST_F(ResultsFileTest, UnreadableFileIsAnErrorNamingThePath) {
  const std::string path = dir_.file("a_directory.csv");
  ASSERT_EQ(::mkdir(path.c_str(), 0755), 0);
  absl::StatusOr<LoadedResults> r = ResultsFile::load(path, kValidators);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(path));
}

TEST_F(ResultsFileTest, ValidatorMismatchIgnoresTheWholeFile) {
  const std::string path = dir_.file("r.csv");
  TunedEntries entries;
  entries[linear(1, 4096, 4096)] = {"algo_1", 0.01};
  Validators old = kValidators;
  old["BLASLT_VERSION"] = "120300";
  ASSERT_TRUE(ResultsFile::save(path, old, entries).ok());

  absl::StatusOr<LoadedResults> r = ResultsFile::load(path, kValidators);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->exists);
  EXPECT_FALSE(r->validators_match);
  EXPECT_THAT(r->entries, IsEmpty());
  EXPECT_EQ(r->file_validators.at("BLASLT_VERSION"), "120300");
  ASSERT_FALSE(r->warnings.empty());
  // BLASLT_VERSION sorts first of the five validators: line 1.
  EXPECT_THAT(r->warnings[0], AllOf(HasSubstr(path + ":1:"), HasSubstr("BLASLT_VERSION"),
                                    HasSubstr("'120300'"), HasSubstr("'120400'")));
  EXPECT_THAT(r->warnings.back(), HasSubstr("ignoring the file's 1 tuned GEMM"));
}

TEST_F(ResultsFileTest, MissingAndUnknownValidatorsMismatch) {
  const std::string path = dir_.file("r.csv");
  write_text(path,
             "Validator,TESSERA_VERSION,0.3.0\n"
             "Validator,PT_VERSION,2.4.0\n"
             "GemmTunableOp_BFloat16_TN,tn_8_1_8_ld_8_8_8,x,1\n");
  absl::StatusOr<LoadedResults> r =
      ResultsFile::load(path, {{"TESSERA_VERSION", "0.3.0"}, {"GPU_ARCH", "gfx942"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->validators_match);
  EXPECT_THAT(r->entries, IsEmpty());
  EXPECT_THAT(r->warnings,
              ElementsAre(AllOf(HasSubstr("GPU_ARCH"), HasSubstr("missing"), HasSubstr("'gfx942'")),
                          AllOf(HasSubstr(path + ":2:"), HasSubstr("PT_VERSION='2.4.0'"),
                                HasSubstr("not one this build checks")),
                          HasSubstr("ignoring")));
}

TEST_F(ResultsFileTest, CorruptLinesAreSkippedWithTheirLineNumbers) {
  const std::string path = dir_.file("r.csv");
  write_text(path,
             "Validator,GPU_ARCH,sm_90\n"                                               // 1
             "GemmTunableOp_BFloat16_TN,tn_4096_1_4096_ld_4096_4096_4096,good_a,0.1\n"  // 2
             "GemmTunableOp_BFloat16_TN,tn_4096_2_4096_ld_4096_4096_4096\n"             // 3 fields
             "GemmTunableOp_BFloat16_TN,tn_4096_4_4096_ld_4096_4096_4096,x,fast\n"      // 4 number
             "GemmTunableOp_BFloat16_TN,tn_4096_four_4096,x,0.1\n"                      // 5 params
             "GemmTunableOp_BFloat16_TN,tn_4096_8_4096_ld_4096_4096_4096,,0.1\n"       // 6 solution
             "\n"                                                                      // 7 blank
             "GemmFancyOp,tn_1_1_1,x,0.1\n"                                            // 8 op
             "GemmTunableOp_BFloat16_TN,tn_4096_16_4096_ld_4096_4096_4096,x,-1\n"      // 9 negative
             "Validator,BROKEN\n"                                                      // 10
             "GemmTunableOp_BFloat16_TN,tn_4096_32_4096_ld_4096_4096_4096,good_b\n");  // 11
  absl::StatusOr<LoadedResults> r = ResultsFile::load(path, {{"GPU_ARCH", "sm_90"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->validators_match);
  TunedEntries want;
  want[linear(1, 4096, 4096)] = {"good_a", 0.1};
  want[linear(32, 4096, 4096)] = {"good_b", std::nullopt};
  EXPECT_EQ(r->entries, want);
  EXPECT_THAT(r->warnings,
              ElementsAre(AllOf(HasSubstr(path + ":3:"), HasSubstr("found 2 fields")),
                          AllOf(HasSubstr(path + ":4:"), HasSubstr("AVG_MS 'fast'")),
                          AllOf(HasSubstr(path + ":5:"), HasSubstr("N 'four' is not an integer")),
                          AllOf(HasSubstr(path + ":6:"), HasSubstr("solution (field 3) is empty")),
                          AllOf(HasSubstr(path + ":8:"), HasSubstr("'GemmFancyOp'")),
                          AllOf(HasSubstr(path + ":9:"), HasSubstr("AVG_MS '-1'")),
                          AllOf(HasSubstr(path + ":10:"), HasSubstr("Validator,KEY,VALUE"))));
  for (const std::string& w : r->warnings) EXPECT_THAT(w, HasSubstr("line skipped"));
}

TEST_F(ResultsFileTest, HandEditedSolutionIsHonoured) {
  const std::string path = dir_.file("r.csv");
  TunedEntries entries;
  entries[linear(1, 4096, 4096)] = {"cublaslt_algo_23", 0.01};
  ASSERT_TRUE(ResultsFile::save(path, kValidators, entries).ok());
  std::string text = read_text(path);
  const size_t at = text.find("cublaslt_algo_23");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::string("cublaslt_algo_23").size(), "my_own_kernel_v7");
  write_text(path, text);

  absl::StatusOr<LoadedResults> r = ResultsFile::load(path, kValidators);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->entries.size(), 1u);
  EXPECT_EQ(r->entries.begin()->second.solution, "my_own_kernel_v7");
}

TEST_F(ResultsFileTest, ReadsPyTorchStyleFiles) {
  // PyTorch 2.4 params without leading dimensions, CRLF line ends, a value with commas, spaces.
  const std::string path = dir_.file("r.csv");
  write_text(path,
             "Validator,GCN_ARCH_NAME,gfx942:sramecc+:xnack-\r\n"
             "Validator,NOTE,a,b\r\n"
             "GemmTunableOp_float_TN, tn_200_100_20 ,Gemm_Rocblas_32323,0.00669595\r\n");
  absl::StatusOr<LoadedResults> r =
      ResultsFile::load(path, {{"GCN_ARCH_NAME", "gfx942:sramecc+:xnack-"}, {"NOTE", "a,b"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->validators_match);
  EXPECT_THAT(r->warnings, IsEmpty());
  TunedEntries want;
  want[GemmSignature::for_linear(100, 200, 20, GemmDType::kF32, GemmDType::kF32)] = {
      "Gemm_Rocblas_32323", 0.00669595};
  EXPECT_EQ(r->entries, want);
}

TEST_F(ResultsFileTest, RepeatedResultLaterLineWins) {
  const std::string path = dir_.file("r.csv");
  write_text(path,
             "GemmTunableOp_BFloat16_TN,tn_8_1_8_ld_8_8_8,first,1\n"
             "GemmTunableOp_BFloat16_TN,tn_8_1_8,second,2\n");  // the same GEMM, older params
  absl::StatusOr<LoadedResults> r = ResultsFile::load(path, {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->entries.size(), 1u);
  EXPECT_EQ(r->entries.begin()->second.solution, "second");
  EXPECT_THAT(r->warnings,
              ElementsAre(AllOf(HasSubstr(path + ":2:"), HasSubstr("repeats line 1"))));
}

TEST_F(ResultsFileTest, EmptyFileWithValidatorsExpectedMismatches) {
  const std::string path = dir_.file("r.csv");
  write_text(path, "");
  absl::StatusOr<LoadedResults> r = ResultsFile::load(path, {{"GPU_ARCH", "sm_90"}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->exists);
  EXPECT_FALSE(r->validators_match);
}

TEST_F(ResultsFileTest, SaveReplacesAtomicallyAndLeavesNoTemporaries) {
  const std::string path = dir_.file("r.csv");
  write_text(path, "old\n");
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  TunedEntries entries;
  entries[linear(1, 8, 8)] = {"x", 1.0};
  ASSERT_TRUE(ResultsFile::save(path, kValidators, entries).ok());
  EXPECT_THAT(read_text(path), HasSubstr("GemmTunableOp_BFloat16_TN,tn_8_1_8_ld_8_8_8,x,1\n"));
  EXPECT_THAT(dir_.entries(), ElementsAre("r.csv"));
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);  // the old file's mode is kept
}

TEST_F(ResultsFileTest, SaveOverADirectoryFailsNamingThePath) {
  const std::string path = dir_.file("r.csv");
  ASSERT_EQ(::mkdir(path.c_str(), 0755), 0);
  write_text(path + "/inside", "keep");
  absl::Status s = ResultsFile::save(path, kValidators, {});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(path));
  EXPECT_EQ(read_text(path + "/inside"), "keep");
  EXPECT_THAT(dir_.entries(), ElementsAre("r.csv"));
}

TEST_F(ResultsFileTest, SaveIntoAMissingDirectoryFailsNamingThePath) {
  const std::string path = dir_.file("no/such/dir/r.csv");
  absl::Status s = ResultsFile::save(path, kValidators, {});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(path));
}

TEST_F(ResultsFileTest, FailedWriteLeavesTheOldFileIntact) {
  // A file-size limit makes write() fail with EFBIG, even for root (for whom a read-only
  // directory is no obstacle).
  const std::string path = dir_.file("r.csv");
  const std::string old = "Validator,GPU_ARCH,sm_90\nGemmTunableOp_BFloat16_TN,tn_8_1_8,old,1\n";
  write_text(path, old);
  TunedEntries entries;
  for (int t = 1; t <= 64; ++t) entries[linear(t, 4096, 4096)] = {"a_long_solution_name", 0.5};

  struct rlimit saved {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  struct sigaction ignore {
  }, saved_action{};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &saved_action), 0);
  struct rlimit small = saved;
  small.rlim_cur = 100;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const absl::Status s = ResultsFile::save(path, kValidators, entries);
  ::setrlimit(RLIMIT_FSIZE, &saved);
  ::sigaction(SIGXFSZ, &saved_action, nullptr);

  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr(path), HasSubstr("cannot write")));
  EXPECT_EQ(read_text(path), old);
  EXPECT_THAT(dir_.entries(), ElementsAre("r.csv"));
}

TEST_F(ResultsFileTest, ReadOnlyDirectoryFailsAndKeepsTheOldFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  const std::string path = dir_.file("r.csv");
  write_text(path, "old\n");
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0555), 0);
  const absl::Status s = ResultsFile::save(path, kValidators, {});
  ::chmod(dir_.path().c_str(), 0755);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr(path));
  EXPECT_EQ(read_text(path), "old\n");
  EXPECT_THAT(dir_.entries(), ElementsAre("r.csv"));
}

TEST_F(ResultsFileTest, UnwritableValuesAreRejectedBeforeWriting) {
  const std::string path = dir_.file("r.csv");
  write_text(path, "old\n");
  TunedEntries entries;
  entries[linear(1, 8, 8)] = {"has,comma", 1.0};
  absl::Status s = ResultsFile::save(path, kValidators, entries);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), AllOf(HasSubstr(path), HasSubstr("'has,comma'")));
  s = ResultsFile::save(path, {{"BAD,KEY", "1"}}, {});
  EXPECT_THAT(std::string(s.message()), HasSubstr("'BAD,KEY'"));
  s = ResultsFile::save(path, {{"KEY", "two\nlines"}}, {});
  EXPECT_THAT(std::string(s.message()), HasSubstr("validator KEY"));
  TunedEntries bad_sig;
  bad_sig[linear(0, 8, 8)] = {"x", 1.0};
  s = ResultsFile::save(path, {}, bad_sig);
  EXPECT_THAT(std::string(s.message()), HasSubstr("sizes must be positive"));
  EXPECT_EQ(read_text(path), "old\n");
  EXPECT_THAT(dir_.entries(), ElementsAre("r.csv"));
}

TEST(AtomicFile, WritesANewFile) {
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  const std::string path = dir.file("new.txt");
  ASSERT_TRUE(write_file_atomically(path, "hello\n").ok());
  EXPECT_EQ(read_text(path), "hello\n");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_FALSE(write_file_atomically(dir.path() + "/", "x").ok());
}

}  // namespace
}  // namespace tessera
