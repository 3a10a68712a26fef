#include "common/base/stats.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace mtb {
namespace {

// 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population variance 4, sample variance 32/7.
const std::vector<double> kKnown = {2, 4, 4, 4, 5, 5, 7, 9};

TEST(Stats, MeanAndBothStandardDeviationsOfAKnownSample) {
  EXPECT_DOUBLE_EQ(Mean(kKnown), 5.0);
  EXPECT_DOUBLE_EQ(PopulationStd(kKnown), 2.0);
  EXPECT_DOUBLE_EQ(SampleStd(kKnown), std::sqrt(32.0 / 7.0));
}

TEST(Stats, MinMaxAndMedian) {
  EXPECT_EQ(Min(kKnown), 2);
  EXPECT_EQ(Max(kKnown), 9);
  EXPECT_DOUBLE_EQ(Median(kKnown), 4.5);
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
}

TEST(Stats, PercentilesInterpolateLinearlyLikeNumpy) {
  // numpy.percentile([1,2,3,4], q) with the default "linear" method.
  const std::vector<double> values = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(Percentile(values, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(values, 25), 1.75);
  EXPECT_DOUBLE_EQ(Percentile(values, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(values, 99), 3.97);
  EXPECT_DOUBLE_EQ(Percentile(values, 100), 4);
}

TEST(Stats, SingleValue) {
  EXPECT_EQ(SampleStd({7}), 0);
  EXPECT_EQ(PopulationStd({7}), 0);
  EXPECT_EQ(Percentile({7}, 99), 7);
}

TEST(Stats, SummarizeAgreesWithTheParts) {
  Summary summary = Summarize(kKnown);
  EXPECT_EQ(summary.count, 8);
  EXPECT_DOUBLE_EQ(summary.mean, 5);
  EXPECT_DOUBLE_EQ(summary.sample_std, SampleStd(kKnown));
  EXPECT_EQ(summary.min, 2);
  EXPECT_DOUBLE_EQ(summary.p50, 4.5);
  EXPECT_DOUBLE_EQ(summary.p99, Percentile(kKnown, 99));
  EXPECT_EQ(summary.max, 9);
}

TEST(StatsDeathTest, EmptySampleIsABug) {
  EXPECT_DEATH(Mean({}), "empty");
}

}  // namespace
}  // namespace mtb
