// OutputStream: messages in order, and a consumer that falls behind gets what it has not read
// merged into one message instead of a queue that grows by one message per token.
#include "runtime/request/request.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

RequestOutput tokens(std::vector<int32_t> ids, std::string text) {
  RequestOutput o;
  o.token_ids = std::move(ids);
  o.text = std::move(text);
  for (int32_t id : o.token_ids) {
    SampleResult s;
    s.token = id;
    o.logprobs.push_back(s);
  }
  return o;
}

TEST(OutputStream, ReadInTimeEachMessageArrivesAlone) {
  OutputStream stream;
  stream.push(tokens({1}, "a"));
  EXPECT_EQ(stream.next().token_ids, std::vector<int32_t>{1});
  stream.push(tokens({2}, "b"));
  EXPECT_EQ(stream.next().text, "b");
  EXPECT_FALSE(stream.try_next().has_value());
}

TEST(OutputStream, UnreadMessagesMergeIntoOne) {
  OutputStream stream;
  for (int32_t i = 0; i < 1000; ++i) stream.push(tokens({i}, std::string(1, static_cast<char>('a' + i % 26))));
  RequestOutput last = tokens({1000, 1001}, "!");
  last.finished = true;
  last.finish_reason = FinishReason::kLength;
  last.completion_tokens = 1002;
  stream.push(std::move(last));
  const RequestOutput merged = stream.next();
  ASSERT_EQ(merged.token_ids.size(), 1002u);
  ASSERT_EQ(merged.logprobs.size(), 1002u);
  for (int32_t i = 0; i < 1002; ++i) {
    EXPECT_EQ(merged.token_ids[i], i);
    EXPECT_EQ(merged.logprobs[i].token, i);
  }
  EXPECT_EQ(merged.text.size(), 1001u);
  EXPECT_EQ(merged.text.substr(0, 3), "abc");
  EXPECT_EQ(merged.text.back(), '!');
  EXPECT_TRUE(merged.finished);
  EXPECT_EQ(merged.finish_reason, FinishReason::kLength);
  EXPECT_EQ(merged.completion_tokens, 1002);
  EXPECT_FALSE(stream.try_next().has_value());
}

TEST(OutputStream, AFinishedMessageIsNeverExtended) {
  OutputStream stream;
  RequestOutput done = tokens({7}, "x");
  done.finished = true;
  stream.push(std::move(done));
  stream.push(tokens({8}, "y"));  // the engine never does this; the stream keeps them apart
  EXPECT_TRUE(stream.next().finished);
  EXPECT_EQ(stream.next().token_ids, std::vector<int32_t>{8});
}

}  // namespace
}  // namespace tessera
