#include "server/metrics/registry.h"

#include <gtest/gtest.h>

#include "server/metrics/builder.h"

namespace tessera::metrics {
namespace {

TEST(FamilyTest, AddReturnsTheSameChildForTheSameLabels) {
  Registry registry;
  Family<Counter>& family = BuildCounter().Name("x_total").Help("h").Register(registry);
  Counter& a = family.Add({{"code", "OK"}});
  Counter& b = family.Add({{"code", "OK"}});
  Counter& c = family.Add({{"code", "CANCELLED"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
  EXPECT_TRUE(family.Has({{"code", "OK"}}));
  EXPECT_FALSE(family.Has({{"code", "INTERNAL"}}));
  family.Remove(&c);
  EXPECT_FALSE(family.Has({{"code", "CANCELLED"}}));
}

TEST(FamilyTest, CollectMergesConstantLabelsSortedByName) {
  Registry registry;
  Family<Gauge>& family =
      BuildGauge().Name("g").Help("h").Labels({{"zone", "a"}}).Register(registry);
  family.Add({{"device", "cpu"}}).Set(3);
  const std::vector<MetricFamily> collected = registry.Collect();
  ASSERT_EQ(collected.size(), 1u);
  ASSERT_EQ(collected[0].metric.size(), 1u);
  const auto& labels = collected[0].metric[0].label;
  ASSERT_EQ(labels.size(), 2u);
  EXPECT_EQ(labels[0], (ClientMetric::Label{"device", "cpu"}));
  EXPECT_EQ(labels[1], (ClientMetric::Label{"zone", "a"}));
  EXPECT_EQ(collected[0].metric[0].gauge.value, 3);
  EXPECT_EQ(collected[0].type, MetricType::Gauge);
}

TEST(FamilyTest, AFamilyWithoutChildrenCollectsNothing) {
  Registry registry;
  BuildGauge().Name("empty").Help("h").Register(registry);
  EXPECT_TRUE(registry.Collect().empty());
}

TEST(RegistryTest, CollectIsSortedByName) {
  Registry registry;
  BuildGauge().Name("b").Help("h").Register(registry).Add({});
  BuildGauge().Name("a").Help("h").Register(registry).Add({});
  BuildCounter().Name("c_total").Help("h").Register(registry).Add({});
  const std::vector<MetricFamily> collected = registry.Collect();
  ASSERT_EQ(collected.size(), 3u);
  EXPECT_EQ(collected[0].name, "a");
  EXPECT_EQ(collected[1].name, "b");
  EXPECT_EQ(collected[2].name, "c_total");
}

TEST(RegistryTest, RegisteringTheSameFamilyAgainReturnsIt) {
  Registry registry;
  Family<Counter>& a = BuildCounter().Name("x_total").Help("h").Register(registry);
  Family<Counter>& b = BuildCounter().Name("x_total").Help("h").Register(registry);
  EXPECT_EQ(&a, &b);
}

TEST(MetricNamesTest, Validity) {
  EXPECT_TRUE(is_valid_metric_name("tessera_x:y_1"));
  EXPECT_FALSE(is_valid_metric_name("1x"));
  EXPECT_FALSE(is_valid_metric_name("x-y"));
  EXPECT_FALSE(is_valid_metric_name(""));
  EXPECT_TRUE(is_valid_label_name("device_0"));
  EXPECT_FALSE(is_valid_label_name("__name"));
  EXPECT_FALSE(is_valid_label_name("a:b"));
  EXPECT_FALSE(check_family_name("requests", MetricType::Counter).ok());
  EXPECT_TRUE(check_family_name("requests_total", MetricType::Counter).ok());
  EXPECT_FALSE(check_family_name("latency_count", MetricType::Histogram).ok());
  EXPECT_FALSE(check_label_names({{"le", "1"}}, MetricType::Histogram).ok());
  EXPECT_TRUE(check_label_names({{"le", "1"}}, MetricType::Gauge).ok());
}

TEST(RegistryDeathTest, ProgrammingErrorsAreFatalAndNamed) {
  EXPECT_DEATH(
      {
        Registry r;
        BuildCounter().Name("requests").Help("h").Register(r);
      },
      "counter \"requests\" must end in \"_total\"");
  EXPECT_DEATH(
      {
        Registry r;
        BuildCounter().Name("x_total").Help("h").Register(r);
        BuildGauge().Name("x_total").Help("h").Register(r);
      },
      "already registered");
  EXPECT_DEATH(
      {
        Registry r;
        BuildHistogram().Name("h").Help("h").Register(r).Add({{"le", "1"}},
                                                             Histogram::BucketBoundaries{1});
      },
      "reserved");
  EXPECT_DEATH(
      {
        Registry r;
        BuildGauge().Name("g").Help("h").Labels({{"a", "1"}}).Register(r).Add({{"a", "2"}});
      },
      "already a constant label");
}

}  // namespace
}  // namespace tessera::metrics
