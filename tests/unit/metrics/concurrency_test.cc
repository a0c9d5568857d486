// Updates from many threads at once lose nothing (the hot path is atomics, no lock), and
// scrapes and child creation may run beside them.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "server/metrics/builder.h"
#include "server/metrics/text_serializer.h"

namespace tessera::metrics {
namespace {

constexpr int kThreads = 8;
constexpr int kPerThread = 20000;

TEST(ConcurrencyTest, ConcurrentUpdatesAreAllCounted) {
  Registry registry;
  Counter& counter = BuildCounter().Name("c_total").Help("h").Register(registry).Add({});
  Gauge& gauge = BuildGauge().Name("g").Help("h").Register(registry).Add({});
  Histogram& hist = BuildHistogram().Name("h").Help("h").Register(registry).Add(
      {}, Histogram::BucketBoundaries{1, 2, 3});

  std::atomic<bool> go{false};
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) {
      }
      for (int i = 0; i < kPerThread; ++i) {
        counter.Increment();
        counter.Increment(0.5);
        gauge.Increment(2);
        gauge.Decrement();
        hist.Observe(static_cast<double>((t + i) % 4));  // 0, 1, 2, 3 in turn
      }
    });
  }
  // A scraper beside the writers: each scrape is internally consistent (+Inf == count).
  std::thread scraper([&] {
    while (!done.load()) {
      for (const MetricFamily& f : registry.Collect()) {
        if (f.type != MetricType::Histogram) continue;
        const ClientMetric::Histogram& h = f.metric[0].histogram;
        ASSERT_EQ(h.bucket.back().cumulative_count, h.sample_count);
        for (size_t i = 1; i < h.bucket.size(); ++i) {
          ASSERT_LE(h.bucket[i - 1].cumulative_count, h.bucket[i].cumulative_count);
        }
      }
    }
  });
  go.store(true);
  for (std::thread& t : threads) t.join();
  done.store(true);
  scraper.join();

  const double n = static_cast<double>(kThreads) * kPerThread;
  EXPECT_DOUBLE_EQ(counter.Value(), 1.5 * n);
  EXPECT_DOUBLE_EQ(gauge.Value(), n);
  const ClientMetric m = hist.Collect();
  EXPECT_EQ(m.histogram.sample_count, static_cast<uint64_t>(n));
  // Each of 0, 1, 2, 3 was observed n / 4 times: buckets le=1 holds 0 and 1, le=2 adds 2, ...
  EXPECT_EQ(m.histogram.bucket[0].cumulative_count, static_cast<uint64_t>(n / 2));
  EXPECT_EQ(m.histogram.bucket[1].cumulative_count, static_cast<uint64_t>(3 * n / 4));
  EXPECT_EQ(m.histogram.bucket[2].cumulative_count, static_cast<uint64_t>(n));
  EXPECT_DOUBLE_EQ(m.histogram.sample_sum, n / 4 * (0 + 1 + 2 + 3));
}

TEST(ConcurrencyTest, ChildrenCreatedFromManyThreadsAreSharedAndCounted) {
  Registry registry;
  Family<Counter>& family = BuildCounter().Name("c_total").Help("h").Register(registry);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 1000; ++i) {
        family.Add({{"k", std::to_string(i % 10)}}).Increment();
        if (i % 100 == 0) TextSerializer().Serialize(registry.Collect());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<MetricFamily> collected = registry.Collect();
  ASSERT_EQ(collected.size(), 1u);
  ASSERT_EQ(collected[0].metric.size(), 10u);
  for (const ClientMetric& m : collected[0].metric) EXPECT_EQ(m.counter.value, kThreads * 100.0);
}

}  // namespace
}  // namespace tessera::metrics
