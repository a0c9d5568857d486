#include "server/metrics/text_serializer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "server/metrics/builder.h"

namespace tessera::metrics {
namespace {

TEST(TextSerializerTest, LabelValueEscaping) {
  EXPECT_EQ(escape_label_value("plain"), "plain");
  EXPECT_EQ(escape_label_value("a\\b"), "a\\\\b");
  EXPECT_EQ(escape_label_value("say \"hi\""), "say \\\"hi\\\"");
  EXPECT_EQ(escape_label_value("two\nlines"), "two\\nlines");
  EXPECT_EQ(escape_label_value("\\\"\n"), "\\\\\\\"\\n");
  // UTF-8 passes; invalid bytes become U+FFFD.
  EXPECT_EQ(escape_label_value("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(escape_label_value("bad\xFF!"), "bad\xEF\xBF\xBD!");
  EXPECT_EQ(escape_label_value("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
  EXPECT_EQ(escape_label_value("\xED\xA0\x80"),
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(escape_label_value("cut\xE2\x82"), "cut\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(TextSerializerTest, HelpEscapingKeepsQuotes) {
  EXPECT_EQ(escape_help("a \"quoted\" \\ word\nnext"), "a \"quoted\" \\\\ word\\nnext");
}

TEST(TextSerializerTest, ValueFormatting) {
  EXPECT_EQ(format_metric_value(0), "0");
  EXPECT_EQ(format_metric_value(3), "3");
  EXPECT_EQ(format_metric_value(0.25), "0.25");
  EXPECT_EQ(format_metric_value(-1.5), "-1.5");
  EXPECT_EQ(format_metric_value(1234567), "1234567");
  EXPECT_EQ(format_metric_value(1e21), "1e+21");
  EXPECT_EQ(format_metric_value(0.1), "0.1");
  EXPECT_EQ(format_metric_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_metric_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_metric_value(std::nan("")), "NaN");
}

TEST(TextSerializerTest, GoldenExposition) {
  Registry registry;
  auto& requests = BuildCounter()
                       .Name("demo_requests_total")
                       .Help("Requests \"served\", by code.\nSecond line \\ here.")
                       .Register(registry);
  requests.Add({{"code", "OK"}, {"path", "/a"}}).Increment(3);
  requests.Add({{"code", "CANCELLED"}, {"path", "we\"ird\\\n"}}).Increment();
  BuildGauge()
      .Name("demo_temperature_celsius")
      .Help("A gauge.")
      .Labels({{"device", "cpu"}})
      .Register(registry)
      .Add({})
      .Set(-2.5);
  auto& latency = BuildHistogram()
                      .Name("demo_latency_seconds")
                      .Help("A histogram.")
                      .Register(registry)
                      .Add({{"model", "m"}}, Histogram::BucketBoundaries{0.1, 0.5, 1});
  latency.Observe(0.05);
  latency.Observe(0.1);
  latency.Observe(0.7);
  latency.Observe(3);
  BuildGauge().Name("demo_unused").Help("No children: left out.").Register(registry);

  const std::string expected =
      "# HELP demo_latency_seconds A histogram.\n"
      "# TYPE demo_latency_seconds histogram\n"
      "demo_latency_seconds_bucket{model=\"m\",le=\"0.1\"} 2\n"
      "demo_latency_seconds_bucket{model=\"m\",le=\"0.5\"} 2\n"
      "demo_latency_seconds_bucket{model=\"m\",le=\"1\"} 3\n"
      "demo_latency_seconds_bucket{model=\"m\",le=\"+Inf\"} 4\n"
      "demo_latency_seconds_sum{model=\"m\"} 3.85\n"
      "demo_latency_seconds_count{model=\"m\"} 4\n"
      "# HELP demo_requests_total Requests \"served\", by code.\\nSecond line \\\\ here.\n"
      "# TYPE demo_requests_total counter\n"
      "demo_requests_total{code=\"CANCELLED\",path=\"we\\\"ird\\\\\\n\"} 1\n"
      "demo_requests_total{code=\"OK\",path=\"/a\"} 3\n"
      "# HELP demo_temperature_celsius A gauge.\n"
      "# TYPE demo_temperature_celsius gauge\n"
      "demo_temperature_celsius{device=\"cpu\"} -2.5\n";
  EXPECT_EQ(TextSerializer().Serialize(registry.Collect()), expected);
}

TEST(TextSerializerTest, UnlabelledHistogramHasOnlyLe) {
  Registry registry;
  BuildHistogram()
      .Name("h")
      .Help("x")
      .Register(registry)
      .Add({}, Histogram::BucketBoundaries{1})
      .Observe(2);
  EXPECT_EQ(TextSerializer().Serialize(registry.Collect()),
            "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 1\n"
            "h_sum 2\nh_count 1\n");
}

TEST(TextSerializerTest, FamiliesFromSeveralSourcesComeOutSorted) {
  MetricFamily b{"b", "x", MetricType::Gauge, {ClientMetric{}}};
  MetricFamily a{"a", "x", MetricType::Untyped, {ClientMetric{}}};
  a.metric[0].untyped.value = 7;
  const std::string text = TextSerializer().Serialize({b, a});
  EXPECT_EQ(text, "# HELP a x\n# TYPE a untyped\na 7\n# HELP b x\n# TYPE b gauge\nb 0\n");
}

}  // namespace
}  // namespace tessera::metrics
