#include "runtime/output/stop_strings.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(StopStrings, FindsStopSpanningPiecesAndCutsIt) {
  StopStringMatcher m({"</end>"});
  std::string out;
  auto r = m.push("hello </");
  out += r.text;
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(out, "hello ");  // "</" is held back: it may start the stop string
  r = m.push("en");
  out += r.text;
  EXPECT_FALSE(r.stopped);
  r = m.push("d> tail");
  out += r.text;
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(out, "hello ");
}

TEST(StopStrings, ReleasesHeldTextThatTurnsOutNotToStop) {
  StopStringMatcher m({"STOP"});
  std::string out;
  out += m.push("ST").text;
  EXPECT_EQ(out, "");
  out += m.push("ART").text;
  EXPECT_EQ(out, "START");
  out += m.push("S").text;
  out += m.flush();
  EXPECT_EQ(out, "STARTS");
}

TEST(StopStrings, EarliestOfSeveralWinsAndNoStopsPassThrough) {
  StopStringMatcher m({"bb", "a"});
  auto r = m.push("xxbbya");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "xx");
  StopStringMatcher none({});
  EXPECT_EQ(none.push("anything").text, "anything");
}

TEST(StopStrings, MultibyteStopStrings) {
  StopStringMatcher m({"。"});
  auto r = m.push("你好");
  EXPECT_EQ(r.text, "你好");
  r = m.push("。more");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
}

}  // namespace
}  // namespace tessera
