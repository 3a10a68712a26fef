#include "common/base/counter_rng.h"

#include <cmath>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace mtb {
namespace {

TEST(CounterRng, DrawIsSplitMix64FromTheKeyAsState) {
  // SplitMix64 seeded with 0 starts 0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4
  // (the reference sequence of Vigna's splitmix64.c).
  EXPECT_EQ(CounterDraw(0, 0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(CounterDraw(0, 1), 0x6e789e6aa1b965f4ULL);
}

TEST(CounterRng, KeyDependsOnEveryWordItsOrderAndTheTupleLength) {
  std::set<uint64_t> keys = {
      CounterKey({1, 2, 3}), CounterKey({3, 2, 1}), CounterKey({1, 2, 4}),
      CounterKey({1, 2}),    CounterKey({1, 2, 3, 0}), CounterKey({0}),
      CounterKey({}),        CounterKey({0, 0})};
  EXPECT_EQ(keys.size(), 8u);
  EXPECT_EQ(CounterKey({7, 8}), CounterKey({7, 8}));
}

TEST(CounterRng, UniformHasMeanOneHalfAndStaysInRange) {
  const uint64_t key = CounterKey({42, 1});
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double u = CounterUniform(key, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  // Standard error of the mean is 1/sqrt(12 n) ~ 6.5e-4: 5 sigma.
  EXPECT_NEAR(sum / n, 0.5, 3.3e-3);
}

TEST(CounterRng, BelowCoversEveryValueEvenly) {
  const uint64_t key = CounterKey({5, 1, 9});
  std::vector<int> counts(7, 0);
  const int n = 70000;
  for (int i = 0; i < n; ++i) {
    const uint64_t v = CounterBelow(key, i, 7);
    ASSERT_LT(v, 7u);
    ++counts[v];
  }
  // Each count is ~Binomial(70000, 1/7): mean 10000, sd ~93; 5 sigma.
  for (int count : counts) EXPECT_NEAR(count, 10000, 470);
  EXPECT_EQ(CounterBelow(key, 3, 1), 0u);
}

TEST(CounterRng, NormalHasZeroMeanAndUnitVariance) {
  const uint64_t key = CounterKey({3, 3});
  double sum = 0, sum_sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double z = CounterNormal(key, i);
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    sum_sq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.012);        // sd of mean 2.2e-3
  EXPECT_NEAR(sum_sq / n, 1.0, 0.016);     // sd of variance ~3.2e-3
}

TEST(CounterRng, DropThresholdKeepsOneMinusPOfTheDraws) {
  EXPECT_EQ(DropThreshold(0.0), 0u);
  EXPECT_EQ(DropThreshold(0.5), 1ULL << 63);
  const uint64_t key = CounterKey({1, 2});
  const uint64_t threshold = DropThreshold(0.25);
  int kept = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) kept += CounterDraw(key, i) >= threshold;
  EXPECT_NEAR(kept, 75000, 700);  // sd ~137
}

}  // namespace
}  // namespace mtb
