// The latency histogram against exact percentiles (within its stated relative error), merging,
// and the edges; the option and target parsers of pkserve-bench.
#include "client/bench/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "client/bench/channels.h"
#include "client/bench/options.h"

namespace pkserve::bench {
namespace {

constexpr double kQuantiles[] = {0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1.0};

// The value at rank ceil(q * n) (at least 1) of the sorted values: the histogram's definition.
uint64_t ExactPercentile(std::vector<uint64_t> sorted, double q) {
  std::sort(sorted.begin(), sorted.end());
  const auto rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(sorted.size()))));
  return sorted[rank - 1];
}

void ExpectWithinBound(const LogHistogram& histogram, const std::vector<uint64_t>& values,
                       const char* what) {
  for (double q : kQuantiles) {
    const uint64_t exact = ExactPercentile(values, q);
    const uint64_t reported = histogram.Percentile(q);
    const double error = std::abs(static_cast<double>(reported) - static_cast<double>(exact)) /
                         std::max(1.0, static_cast<double>(exact));
    EXPECT_LE(error, LogHistogram::kRelativeError)
        << what << ": percentile " << q << " expected " << exact << " (exact), got " << reported;
  }
}

TEST(Histogram, PercentilesWithinTheRelativeErrorOfExact) {
  std::mt19937_64 engine(7);
  // Latencies in ns: log-normal around 100 us with a long tail, plus a few stalls.
  std::lognormal_distribution<double> latency(std::log(100e3), 1.0);
  std::vector<uint64_t> values;
  LogHistogram histogram;
  for (int i = 0; i < 200000; ++i) {
    uint64_t value = static_cast<uint64_t>(latency(engine));
    if (i % 10007 == 0) value = 2'000'000'000 + static_cast<uint64_t>(i);  // 2 s stalls
    values.push_back(value);
    histogram.Record(value);
  }
  ExpectWithinBound(histogram, values, "log-normal latencies");
  EXPECT_EQ(histogram.count(), values.size());
  EXPECT_EQ(histogram.min(), *std::min_element(values.begin(), values.end()));
  EXPECT_EQ(histogram.max(), *std::max_element(values.begin(), values.end()));
  double sum = 0;
  for (uint64_t value : values) sum += static_cast<double>(value);
  EXPECT_NEAR(histogram.mean(), sum / static_cast<double>(values.size()), 1e-6 * histogram.mean());
}

TEST(Histogram, EveryScaleFromOneToHours) {
  std::mt19937_64 engine(11);
  std::uniform_real_distribution<double> exponent(0.0, 43.0);
  std::vector<uint64_t> values;
  LogHistogram histogram;
  for (int i = 0; i < 50000; ++i) {
    const auto value = static_cast<uint64_t>(std::exp2(exponent(engine)));
    values.push_back(value);
    histogram.Record(value);
  }
  ExpectWithinBound(histogram, values, "values over 43 powers of two");
}

TEST(Histogram, SmallValuesAreExact) {
  LogHistogram histogram;
  std::vector<uint64_t> values;
  for (uint64_t value = 0; value < 2048; ++value) {
    for (uint64_t copies = 0; copies <= value % 3; ++copies) {
      values.push_back(value);
      histogram.Record(value);
    }
  }
  for (double q : kQuantiles) {
    EXPECT_EQ(histogram.Percentile(q), ExactPercentile(values, q)) << "percentile " << q;
  }
}

TEST(Histogram, MergeEqualsOneHistogramOfEverything) {
  std::mt19937_64 engine(3);
  std::lognormal_distribution<double> latency(std::log(50e3), 1.5);
  LogHistogram whole;
  LogHistogram parts[4];
  std::vector<uint64_t> values;
  for (int i = 0; i < 40000; ++i) {
    const auto value = static_cast<uint64_t>(latency(engine));
    values.push_back(value);
    whole.Record(value);
    parts[i % 4].Record(value);
  }
  LogHistogram merged;
  for (const LogHistogram& part : parts) merged.Merge(part);
  merged.Merge(LogHistogram());  // an empty one changes nothing
  EXPECT_EQ(merged.count(), whole.count());
  EXPECT_EQ(merged.min(), whole.min());
  EXPECT_EQ(merged.max(), whole.max());
  for (double q : kQuantiles) {
    EXPECT_EQ(merged.Percentile(q), whole.Percentile(q)) << "percentile " << q;
  }
  ExpectWithinBound(merged, values, "merged");
}

TEST(Histogram, EmptySingleAndHuge) {
  LogHistogram histogram;
  EXPECT_EQ(histogram.Percentile(0.5), 0u);
  EXPECT_EQ(histogram.max(), 0u);
  EXPECT_EQ(histogram.mean(), 0.0);
  histogram.Record(123456789);
  for (double q : kQuantiles) EXPECT_EQ(histogram.Percentile(q), 123456789u) << q;
  histogram.Clear();
  histogram.Record(~uint64_t{0});  // clamps to the largest value kept
  EXPECT_EQ(histogram.max(), (uint64_t{1} << LogHistogram::kValueBits) - 1);
  EXPECT_EQ(histogram.Percentile(1.0), histogram.max());
}

TEST(Options, ParsesListsRangesAndNames) {
  EXPECT_EQ(*ParseConcurrency("1,4,16,64"), (std::vector<int>{1, 4, 16, 64}));
  EXPECT_FALSE(ParseConcurrency("0").ok());
  EXPECT_FALSE(ParseConcurrency("4,x").ok());
  EXPECT_EQ(*ParseRates("1000,2500.5"), (std::vector<double>{1000, 2500.5}));
  EXPECT_FALSE(ParseRates("-5").ok());
  EXPECT_EQ(*ParseRowRange("8"), std::make_pair(8u, 8u));
  EXPECT_EQ(*ParseRowRange("1-64"), std::make_pair(1u, 64u));
  EXPECT_FALSE(ParseRowRange("64-1").ok());
  EXPECT_FALSE(ParseRowRange("0").ok());
  EXPECT_EQ(*ParseDType("bf16"), pk::DType::kBFloat16);
  EXPECT_EQ(*ParseDType("f32"), pk::DType::kFloat32);
  EXPECT_FALSE(ParseDType("f16").ok());
  EXPECT_EQ(*ParseCallMode("stream"), CallMode::kStream);
  EXPECT_EQ(*ParseArrivals("constant"), Arrivals::kConstant);
  EXPECT_FALSE(ParseSeconds(0, "duration", false).ok());
  EXPECT_TRUE(ParseSeconds(0, "warmup", true).ok());
}

TEST(Options, TargetsSeveralAddressesRoundRobin) {
  TargetSpec one = *ParseTarget("127.0.0.1:50051");
  EXPECT_EQ(one.target, "127.0.0.1:50051");
  EXPECT_EQ(one.load_balancing, "");
  TargetSpec two = *ParseTarget("127.0.0.1:1,127.0.0.1:2");
  EXPECT_EQ(two.target, "ipv4:127.0.0.1:1,127.0.0.1:2");
  EXPECT_EQ(two.load_balancing, "round_robin");
  TargetSpec six = *ParseTarget("[::1]:1,[::1]:2");
  EXPECT_EQ(six.target, "ipv6:[::1]:1,[::1]:2");
  EXPECT_FALSE(ParseTarget("host-a:1,host-b:2").ok());
  EXPECT_FALSE(ParseTarget("").ok());
}

}  // namespace
}  // namespace pkserve::bench
