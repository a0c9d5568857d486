// Automatic prefix caching through tesserad: requests that share a prompt hit the cache (counted
// in /metrics), get the text they get without the cache, and the admin reset empties it.
#include <gtest/gtest.h>

#include <string>

#include "tests/e2e/test_server.h"
#include "tests/unit/metrics/http_test_client.h"

namespace tessera::e2e {
namespace {

using namespace std::chrono_literals;

tessera::testing::HttpReply admin_request(int port, const std::string& method, const std::string& path) {
  tessera::testing::HttpTestClient client(port);
  EXPECT_TRUE(client.connected());
  client.send(method + " " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n");
  client.closed_within(15s);
  return client.read_reply(100ms).value_or(tessera::testing::HttpReply{});
}

// The value of an unlabelled sample `name` in a Prometheus exposition, or -1.
double sample(const std::string& exposition, const std::string& name) {
  const size_t at = exposition.find("\n" + name + " ");
  return at == std::string::npos ? -1.0 : std::stod(exposition.substr(at + name.size() + 2));
}

// Long enough for several full KV blocks of 16 tokens.
const std::string kSharedPrompt =
    "You are a careful assistant. Answer in one short sentence, plainly, without lists. "
    "The question follows after this line and is about geography and capitals of countries. "
    "Question: what is the capital of France?";

std::string greedy_text(TestServer& server) {
  const UnaryResult r = generate(server.generation(), greedy_request(kSharedPrompt, 12));
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  return r.response.text();
}

TEST(PrefixCacheE2E, SharedPromptsHitTheCacheWithTheSameTextAndTheResetEmptiesIt) {
  TESSERA_SKIP_WITHOUT_MODEL();
  std::string uncached;
  {
    server::DaemonConfig off = test_config();
    off.enable_prefix_caching = "false";
    auto server = TestServer::start(off);
    ASSERT_NE(server, nullptr);
    uncached = greedy_text(*server);
    const int port = server->daemon().admin_port();
    EXPECT_EQ(sample(admin_request(port, "GET", "/metrics").body, "tessera_prefix_cache_hits_total"), 0.0);
  }
  auto server = TestServer::start(test_config());
  ASSERT_NE(server, nullptr);
  const int port = server->daemon().admin_port();
  EXPECT_EQ(greedy_text(*server), uncached);
  EXPECT_EQ(greedy_text(*server), uncached);  // its prompt's full blocks now come from the cache
  const std::string metrics = admin_request(port, "GET", "/metrics").body;
  EXPECT_GT(sample(metrics, "tessera_prefix_cache_hits_total"), 0.0) << metrics;
  EXPECT_GT(sample(metrics, "tessera_prefix_cache_hit_ratio"), 0.0);
  EXPECT_GT(sample(metrics, "tessera_prefix_cache_blocks"), 0.0);

  const tessera::testing::HttpReply reset = admin_request(port, "POST", "/v1/prefix_cache/reset");
  EXPECT_EQ(reset.status, 200) << reset.body;
  EXPECT_NE(reset.body.find("\"dropped_blocks\""), std::string::npos) << reset.body;
  EXPECT_EQ(sample(admin_request(port, "GET", "/metrics").body, "tessera_prefix_cache_blocks"), 0.0);
  EXPECT_EQ(greedy_text(*server), uncached);
}

}  // namespace
}  // namespace tessera::e2e
