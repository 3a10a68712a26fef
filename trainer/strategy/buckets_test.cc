#include "trainer/strategy/buckets.h"

#include <vector>

#include "gtest/gtest.h"

namespace mtb {
namespace {

using Buckets = std::vector<std::vector<int>>;

TEST(AssignBuckets, ClosesABucketOnceItReachesItsLimitThenUsesTheNextLimit) {
  // Limits 10 then 25: [4, 4, 4] reaches 12 >= 10; then 9 + 9 + 9 = 27 >= 25;
  // the rest stays open.
  EXPECT_EQ(AssignBuckets({4, 4, 4, 9, 9, 9, 1, 2}, {10, 25}),
            (Buckets{{0, 1, 2}, {3, 4, 5}, {6, 7}}));
}

TEST(AssignBuckets, AGradientLargerThanTheLimitIsABucketOfItsOwn) {
  EXPECT_EQ(AssignBuckets({100, 1, 100}, {10}), (Buckets{{0}, {1, 2}}));
  EXPECT_EQ(AssignBuckets({100}, {10, 20}), (Buckets{{0}}));
}

TEST(AssignBuckets, EverythingFitsInOneBucketUnderAHugeLimit) {
  EXPECT_EQ(AssignBuckets({1, 2, 3}, {1000}), (Buckets{{0, 1, 2}}));
  EXPECT_EQ(AssignBuckets({}, {1000}), Buckets{});
}

TEST(AssignBuckets, ExactlyTheLimitCloses) {
  EXPECT_EQ(AssignBuckets({5, 5, 5, 5}, {10}), (Buckets{{0, 1}, {2, 3}}));
}

}  // namespace
}  // namespace mtb
