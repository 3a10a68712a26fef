#include "common/trace/intervals.h"

#include "gtest/gtest.h"

namespace mtb::trace {
namespace {

TEST(Intervals, UnionMergesOverlapsAndTouchingAndDropsEmpties) {
  const std::vector<Interval> merged =
      Union({{5, 7}, {0, 2}, {1, 3}, {3, 4}, {9, 9}, {6, 8}});
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].begin, 0);
  EXPECT_EQ(merged[0].end, 4);
  EXPECT_EQ(merged[1].begin, 5);
  EXPECT_EQ(merged[1].end, 8);
  EXPECT_EQ(Length(merged), 7);
}

TEST(Intervals, IntersectionOfTwoUnions) {
  const std::vector<Interval> a = Union({{0, 10}, {20, 30}});
  const std::vector<Interval> b = Union({{5, 25}, {28, 40}});
  const std::vector<Interval> both = Intersect(a, b);
  ASSERT_EQ(both.size(), 3u);
  EXPECT_EQ(Length(both), 5 + 5 + 2);
  EXPECT_TRUE(Intersect(a, {}).empty());
}

}  // namespace
}  // namespace mtb::trace
