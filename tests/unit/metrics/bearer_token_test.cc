// The admin token check both admin surfaces (HTTP and gRPC) use.
#include "server/metrics/bearer_token.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(BearerToken, MatchesTheSchemeInAnyCaseAndTheExactToken) {
  EXPECT_TRUE(bearer_token_matches("Bearer s3cret", "s3cret"));
  EXPECT_TRUE(bearer_token_matches("bearer s3cret", "s3cret"));
  EXPECT_TRUE(bearer_token_matches("BEARER   s3cret", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("Bearer s3cre", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("Bearer s3cretx", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("Bearers3cret", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("Basic s3cret", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("Bearer", "s3cret"));
  EXPECT_FALSE(bearer_token_matches("", "s3cret"));
}

}  // namespace
}  // namespace tessera
