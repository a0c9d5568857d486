#include "server/metrics/http_request_parser.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera::server {
namespace {

HttpParseResult parse(std::string_view data, HttpRequest* request = nullptr,
                      HttpLimits limits = {}) {
  HttpRequest scratch;
  return parse_http_request(data, limits, request != nullptr ? request : &scratch);
}

TEST(HttpRequestParserTest, SimpleGet) {
  HttpRequest r;
  const std::string data =
      "GET /metrics?name=x HTTP/1.1\r\nHost: a\r\nAccept:  text/plain \r\n\r\n";
  const HttpParseResult p = parse(data, &r);
  ASSERT_EQ(p.state, HttpParseState::kComplete) << p.error;
  EXPECT_EQ(p.consumed, data.size());
  EXPECT_EQ(r.method, "GET");
  EXPECT_EQ(r.target, "/metrics?name=x");
  EXPECT_EQ(r.path, "/metrics");
  EXPECT_EQ(r.query, "name=x");
  EXPECT_EQ(r.version_minor, 1);
  EXPECT_EQ(r.header("accept"), "text/plain");
  EXPECT_EQ(r.header("host"), "a");
  EXPECT_FALSE(r.header("cookie").has_value());
  EXPECT_TRUE(r.keep_alive);
  EXPECT_TRUE(r.body.empty());
}

TEST(HttpRequestParserTest, BareLineFeedsAndLeadingEmptyLines) {
  HttpRequest r;
  const HttpParseResult p = parse("\r\n\nGET / HTTP/1.0\nConnection: keep-alive\n\n", &r);
  ASSERT_EQ(p.state, HttpParseState::kComplete) << p.error;
  EXPECT_EQ(r.path, "/");
  EXPECT_EQ(r.version_minor, 0);
  EXPECT_TRUE(r.keep_alive);
}

TEST(HttpRequestParserTest, KeepAliveDefaults) {
  HttpRequest r;
  ASSERT_EQ(parse("GET / HTTP/1.0\r\n\r\n", &r).state, HttpParseState::kComplete);
  EXPECT_FALSE(r.keep_alive);
  ASSERT_EQ(parse("GET / HTTP/1.1\r\nConnection: Keep-Alive, Close\r\n\r\n", &r).state,
            HttpParseState::kComplete);
  EXPECT_FALSE(r.keep_alive);
}

TEST(HttpRequestParserTest, IncompleteUntilTheBlankLineAndTheBody) {
  EXPECT_EQ(parse("").state, HttpParseState::kIncomplete);
  EXPECT_EQ(parse("GET /metr").state, HttpParseState::kIncomplete);
  EXPECT_EQ(parse("GET /metrics HTTP/1.1\r\nHost: a\r\n").state, HttpParseState::kIncomplete);
  EXPECT_EQ(parse("GET /metrics HTTP/1.1\r\nHost: a\r\n\r").state, HttpParseState::kIncomplete);
  const std::string head = "POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n";
  EXPECT_EQ(parse(head + "abc").state, HttpParseState::kIncomplete);
  HttpRequest r;
  const HttpParseResult p = parse(head + "abcdeGET / HTTP/1.1\r\n\r\n", &r);
  ASSERT_EQ(p.state, HttpParseState::kComplete);
  EXPECT_EQ(r.body, "abcde");
  EXPECT_EQ(p.consumed, head.size() + 5);  // the pipelined request is left for the next call
}

TEST(HttpRequestParserTest, ExpectContinue) {
  const HttpParseResult p =
      parse("POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  EXPECT_EQ(p.state, HttpParseState::kIncomplete);
  EXPECT_TRUE(p.expect_continue);
  EXPECT_FALSE(parse("POST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\n").expect_continue);
}

struct BadCase {
  const char* name;
  std::string data;
  int status;
};

class HttpRequestParserErrorTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(HttpRequestParserErrorTest, Rejects) {
  const BadCase& c = GetParam();
  const HttpParseResult p = parse(c.data);
  EXPECT_EQ(p.state, HttpParseState::kError) << c.name;
  EXPECT_EQ(p.error_status, c.status) << c.name << ": " << p.error;
  EXPECT_FALSE(p.error.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, HttpRequestParserErrorTest,
    ::testing::Values(
        BadCase{"garbage", "\x16\x03\x01\x02\x10\x01\x05\x01\xfc\x03\x03\n", 400},
        BadCase{"two words", "GET /\r\n\r\n", 400},
        BadCase{"four words", "GET / x HTTP/1.1\r\n\r\n", 400},
        BadCase{"double space", "GET  / HTTP/1.1\r\n\r\n", 400},
        BadCase{"absolute form", "GET http://a/ HTTP/1.1\r\n\r\n", 400},
        BadCase{"asterisk", "OPTIONS * HTTP/1.1\r\n\r\n", 400},
        BadCase{"bad method", "G(T / HTTP/1.1\r\n\r\n", 400},
        BadCase{"control in target", std::string("GET /a\x01 HTTP/1.1\r\n\r\n"), 400},
        BadCase{"not http", "GET / FTP/1.1\r\n\r\n", 400},
        BadCase{"http2", "GET / HTTP/2.0\r\n\r\n", 505},
        BadCase{"http 1.2", "GET / HTTP/1.2\r\n\r\n", 505},
        BadCase{"no colon", "GET / HTTP/1.1\r\nHost a\r\n\r\n", 400},
        BadCase{"space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400},
        BadCase{"empty name", "GET / HTTP/1.1\r\n: a\r\n\r\n", 400},
        BadCase{"folding", "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", 400},
        BadCase{"nul in value", std::string("GET / HTTP/1.1\r\nA: b\0c\r\n\r\n", 26), 400},
        BadCase{"bare cr", "GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", 400},
        BadCase{"content-length letters", "POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400},
        BadCase{"content-length negative", "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
        BadCase{"content-length huge",
                "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400},
        BadCase{"content-length conflict",
                "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", 400},
        BadCase{"content-length list", "POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\na", 400},
        BadCase{"chunked", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501},
        BadCase{"body too large", "POST / HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n", 413}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      std::string name = info.param.name;
      for (char& c : name) {
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

TEST(HttpRequestParserTest, MalformedLinesAreReportedBeforeTheRequestEnds) {
  // The request line is bad: no need to wait for the headers.
  EXPECT_EQ(parse("GET\r\nHost: a\r\n").state, HttpParseState::kError);
}

TEST(HttpRequestParserTest, HeaderLimits) {
  HttpLimits limits;
  limits.max_header_bytes = 64;
  limits.max_headers = 2;
  // Too long while still incomplete.
  EXPECT_EQ(parse("GET /" + std::string(100, 'a'), nullptr, limits).error_status, 431);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nA: " + std::string(100, 'a') + "\r\n\r\n", nullptr, limits)
                .error_status,
            431);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", nullptr, limits).error_status,
            431);
  EXPECT_EQ(parse("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\n\r\n", nullptr, limits).state,
            HttpParseState::kComplete);
  EXPECT_EQ(parse(std::string(100, '\n'), nullptr, limits).error_status, 431);
}

TEST(HttpRequestParserTest, EveryPrefixOfAValidRequestIsIncompleteNeverAnError) {
  const std::string data =
      "POST /tuning/warmup HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\nContent-Length: 4\r\n"
      "\r\n{\"\"}";
  for (size_t n = 0; n < data.size(); ++n) {
    EXPECT_EQ(parse(data.substr(0, n)).state, HttpParseState::kIncomplete) << n;
  }
  EXPECT_EQ(parse(data).state, HttpParseState::kComplete);
}

TEST(HttpRequestParserTest, ArbitraryBytesNeverCrash) {
  // A cheap fuzz: pseudo-random bytes, and random mutations of a valid request.
  uint64_t x = 88172645463325252ull;
  const auto next = [&x] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  const std::string valid = "GET /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nab";
  for (int i = 0; i < 20000; ++i) {
    std::string data;
    if (i % 2 == 0) {
      data.resize(next() % 200);
      for (char& c : data) c = static_cast<char>(next() % 256);
    } else {
      data = valid;
      for (int k = 0; k < 3; ++k) data[next() % data.size()] = static_cast<char>(next() % 256);
    }
    HttpRequest r;
    const HttpParseResult p = parse(data, &r);
    if (p.state == HttpParseState::kComplete) {
      EXPECT_LE(p.consumed, data.size());
    }
    if (p.state == HttpParseState::kError) {
      EXPECT_GE(p.error_status, 400);
    }
  }
}

}  // namespace
}  // namespace tessera::server
