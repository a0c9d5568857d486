#include "server/message_limits.h"

#include <gtest/gtest.h>

#include <climits>

namespace tessera::server {
namespace {

TEST(MessageLimits, AnswersMayBeLargerThanRequests) {
  constexpr int64_t kMiB = 1024 * 1024;
  EXPECT_EQ(max_receive_message_bytes(4 * kMiB), 4 * kMiB);
  EXPECT_EQ(max_send_message_bytes(4 * kMiB), 64 * kMiB);
  // A Tokenize answer is at most ~9 bytes per byte of text (message_limits.h).
  EXPECT_GE(max_send_message_bytes(4 * kMiB), 9 * 4 * kMiB);
}

TEST(MessageLimits, LimitsStayWithinGrpcsInt) {
  constexpr int64_t kGiB = 1024LL * 1024 * 1024;
  EXPECT_EQ(max_receive_message_bytes(kGiB), kGiB);
  EXPECT_EQ(max_send_message_bytes(kGiB), INT32_MAX);
}

}  // namespace
}  // namespace tessera::server
