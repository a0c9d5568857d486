#include "server/call_auth.h"

#include <gtest/gtest.h>

namespace tessera::server {
namespace {

TEST(CallAuth, WithoutAnApiKeyEveryCallPasses) {
  const CallAuth auth("", "");
  EXPECT_FALSE(auth.api_key_required());
  EXPECT_TRUE(auth.authenticate(std::nullopt).ok());
  EXPECT_TRUE(auth.authenticate("Bearer anything").ok());
}

TEST(CallAuth, AMissingKeyIsUnauthenticatedAndSaysAKeyIsRequired) {
  const CallAuth auth("k3y", "");
  const absl::Status s = auth.authenticate(std::nullopt);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_NE(s.message().find("requires an API key"), absl::string_view::npos) << s.message();
  EXPECT_NE(s.message().find("authorization: Bearer <key>"), absl::string_view::npos);
}

TEST(CallAuth, AWrongKeyIsUnauthenticatedAndSaysItIsWrong) {
  const CallAuth auth("k3y", "admin");
  for (const char* value : {"Bearer k3z", "Bearer k3y2", "k3y", "Basic k3y", "Bearer ", ""}) {
    const absl::Status s = auth.authenticate(value);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << value;
    EXPECT_NE(s.message().find("wrong API key"), absl::string_view::npos) << s.message();
  }
}

TEST(CallAuth, TheKeyOrTheAdminTokenPasses) {
  const CallAuth auth("k3y", "admin");
  EXPECT_TRUE(auth.authenticate("Bearer k3y").ok());
  EXPECT_TRUE(auth.authenticate("bearer   k3y").ok());
  EXPECT_TRUE(auth.authenticate("Bearer admin").ok());
}

TEST(CallAuth, OnlyTheAdminTokenMakesAnAdmin) {
  const CallAuth with_token("k3y", "admin");
  EXPECT_TRUE(with_token.is_admin("Bearer admin"));
  EXPECT_FALSE(with_token.is_admin("Bearer k3y"));
  EXPECT_FALSE(with_token.is_admin(std::nullopt));
  // No admin token configured: nobody is an admin, whatever is sent.
  const CallAuth without_token("k3y", "");
  EXPECT_FALSE(without_token.is_admin("Bearer "));
  EXPECT_FALSE(without_token.is_admin("Bearer k3y"));
}

}  // namespace
}  // namespace tessera::server
