#include "server/open_listener.h"

#include <gtest/gtest.h>

namespace tessera::server {
namespace {

TEST(OpenListener, LoopbackAndUnixSocketsAreLocal) {
  for (const char* a : {"127.0.0.1:50051", "127.1.2.3:0", "localhost:8000", "LOCALHOST:1",
                        "[::1]:50051", "unix:/run/tesserad.sock"}) {
    EXPECT_TRUE(is_loopback_listen(a)) << a;
  }
  for (const char* a : {"0.0.0.0:50051", "[::]:50051", "10.0.0.5:8000", "example.com:443",
                        "128.0.0.1:1", "[::2]:1"}) {
    EXPECT_FALSE(is_loopback_listen(a)) << a;
  }
}

TEST(OpenListener, WarnsOnlyForAnUnguardedListenerOffLoopback) {
  const std::optional<std::string> w =
      open_listener_warning("gRPC", "0.0.0.0:50051", "0.0.0.0:50051", false, "no API key");
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(*w, "gRPC on 0.0.0.0:50051 is open to anyone who can reach it: no API key");
  EXPECT_FALSE(open_listener_warning("gRPC", "0.0.0.0:50051", "0.0.0.0:50051", true, "x"));
  EXPECT_FALSE(open_listener_warning("gRPC", "127.0.0.1:0", "127.0.0.1:4321", false, "x"));
}

}  // namespace
}  // namespace tessera::server
