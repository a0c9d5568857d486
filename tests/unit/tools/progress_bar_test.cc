#include "tools/progress_bar.h"

#include <cstdio>

#include "gtest/gtest.h"

namespace tessera::cli {
namespace {

TEST(ProgressLine, CountsRequests) {
  RunProgress p;
  p.sent = 50;
  p.succeeded = 38;
  p.failed = 2;
  p.in_flight = 10;
  p.output_tokens = 1000;
  p.elapsed_seconds = 4;
  EXPECT_EQ(progress_line(p, 100, 0, 10),
            "[####------] 40/100 done, 10 running, 2 failed, 4.0 s, 250 out tok/s");
}

TEST(ProgressLine, TimedRunsFillByElapsedTime) {
  RunProgress p;
  p.succeeded = 7;
  p.elapsed_seconds = 15;
  EXPECT_EQ(progress_line(p, 0, 60, 8),
            "[##------] 7 done, 0 running, 0 failed, 15.0 s, 0 out tok/s");
  p.elapsed_seconds = 90;  // past the end while the last requests finish: full, not beyond
  EXPECT_EQ(progress_line(p, 0, 60, 4).substr(0, 6), "[####]");
}

TEST(ProgressBar, LogModePrintsLinesAndAFinalOne) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  {
    ProgressBar bar([] { return RunProgress{.sent = 3, .succeeded = 3}; }, 3, 0, /*tty=*/false,
                    out);
    bar.finish();
    bar.finish();  // once only
  }
  std::rewind(out);
  char buffer[256] = {};
  const size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, out);
  std::fclose(out);
  EXPECT_EQ(std::string(buffer, n),
            "[##############################] 3/3 done, 0 running, 0 failed, 0.0 s, 0 out tok/s\n");
}

}  // namespace
}  // namespace tessera::cli
