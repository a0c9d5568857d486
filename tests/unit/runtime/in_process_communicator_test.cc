// The CPU ranks' collectives and the threads that drive them: every rank ends an all-reduce with
// the same bits (the rank-order sum), a column gather lands each part in rank 0's columns clipped
// to the vocabulary, and a refused tensor is an error, not a hang.
#include "kernels/cpu/in_process_communicator.h"

#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/runner/rank_threads.h"

namespace tessera {
namespace {

TEST(InProcessCommunicatorTest, AllReduceGivesEveryRankTheRankOrderSum) {
  for (int32_t size : {2, 3, 4}) {
    auto comms = make_in_process_communicators(size);
    const int64_t n = 1001;  // not a multiple of the ranks: shares of different sizes
    std::vector<std::vector<float>> data(static_cast<size_t>(size), std::vector<float>(n));
    for (int32_t r = 0; r < size; ++r) {
      for (int64_t i = 0; i < n; ++i) data[r][i] = 1.0f / static_cast<float>(1 + i + 7 * r) + 1e7f * (r == 1);
    }
    std::vector<float> want(n, 0.0f);
    for (int32_t r = 0; r < size; ++r) {
      for (int64_t i = 0; i < n; ++i) want[i] += data[r][i];
    }
    RankThreads threads(size);
    threads.run([&](int32_t r) {
      comms[r]->all_reduce_sum(Tensor(data[r].data(), DType::kF32, {n}));
    });
    for (int32_t r = 0; r < size; ++r) {
      EXPECT_EQ(data[r], want) << "rank " << r << " of " << size;
      EXPECT_TRUE(comms[r]->take_error().ok());
    }
  }
}

TEST(InProcessCommunicatorTest, GatherColumnsClipsTheLastPart) {
  const int32_t size = 3;
  const int64_t rows = 2, cols = 4, vocab = 10;  // 3 x 4 columns, the last 2 padding
  auto comms = make_in_process_communicators(size);
  std::vector<std::vector<float>> parts(size, std::vector<float>(rows * cols));
  for (int32_t r = 0; r < size; ++r) {
    for (int64_t i = 0; i < rows * cols; ++i) parts[r][i] = static_cast<float>(100 * r + i);
  }
  std::vector<float> full(rows * vocab, -1.0f);
  RankThreads threads(size);
  threads.run([&](int32_t r) {
    comms[r]->gather_columns(Tensor(parts[r].data(), DType::kF32, {rows, cols}),
                             r == 0 ? Tensor(full.data(), DType::kF32, {rows, vocab}) : Tensor{});
  });
  for (int64_t row = 0; row < rows; ++row) {
    for (int64_t c = 0; c < vocab; ++c) {
      EXPECT_EQ(full[row * vocab + c], parts[c / cols][row * cols + c % cols]) << row << "," << c;
    }
  }
  for (auto& c : comms) EXPECT_TRUE(c->take_error().ok());

  // A `full` with fewer rows than the parts is refused, not written past.
  std::vector<float> short_full(1 * vocab, -1.0f);
  threads.run([&](int32_t r) {
    comms[r]->gather_columns(Tensor(parts[r].data(), DType::kF32, {rows, cols}),
                             r == 0 ? Tensor(short_full.data(), DType::kF32, {1, vocab}) : Tensor{});
  });
  const absl::Status s = comms[0]->take_error();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(std::string(s.message()).find("full must be [2, <= 12]"), std::string::npos) << s;
  for (float v : short_full) EXPECT_EQ(v, -1.0f);
}

TEST(InProcessCommunicatorTest, ARefusedTensorIsAnErrorOnEveryRankAndNobodyHangs) {
  auto comms = make_in_process_communicators(2);
  std::vector<uint16_t> half(8);
  RankThreads threads(2);
  threads.run([&](int32_t r) { comms[r]->all_reduce_sum(Tensor(half.data(), DType::kBF16, {8})); });
  for (auto& c : comms) {
    const absl::Status s = c->take_error();
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("takes fp32 tensors"), std::string::npos) << s;
    EXPECT_TRUE(c->take_error().ok());  // taken: the next step starts clean
  }
}

// Sleeping between runs (CPU ranks) and polling (device ranks); runs that come while the threads
// poll, and after the poll ran out and they slept; destroyed while they poll.
class RankThreadsTest : public testing::TestWithParam<std::chrono::microseconds> {};

TEST_P(RankThreadsTest, RunsEveryRankConcurrentlyAndReturnsWhenAllHave) {
  RankThreads threads(4, GetParam());
  auto comms = make_in_process_communicators(4);
  std::vector<int> ran(4, 0);
  for (int step = 0; step < 50; ++step) {
    // The all-reduce only completes when all four ranks run at once.
    threads.run([&](int32_t r) {
      float x = 1.0f;
      comms[r]->all_reduce_sum(Tensor(&x, DType::kF32, {1}));
      ran[r] += x == 4.0f;
    });
    if (step % 10 == 9) std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  EXPECT_EQ(ran, (std::vector<int>{50, 50, 50, 50}));
  RankThreads one(1, GetParam());
  int calls = 0;
  one.run([&](int32_t r) { calls += r == 0; });
  EXPECT_EQ(calls, 1);
}

INSTANTIATE_TEST_SUITE_P(Wait, RankThreadsTest,
                         testing::Values(std::chrono::microseconds(0),
                                         std::chrono::microseconds(1000)),
                         [](const testing::TestParamInfo<std::chrono::microseconds>& p) {
                           return p.param.count() == 0 ? "Sleeps" : "Polls";
                         });

}  // namespace
}  // namespace tessera
