#include "trainer/model/lr_schedule.h"

#include <cmath>

#include "gtest/gtest.h"

namespace mtb {
namespace {

TEST(LrSchedule, WarmsUpLinearlyToThePeak) {
  LrSchedule s{LrScheduleKind::kCosine, 1.0, 0.1, 4, 10};
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1), 0.25);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 2), 0.5);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 4), 1.0);
}

TEST(LrSchedule, CosineDecaysToTheFloorAndStaysThere) {
  LrSchedule s{LrScheduleKind::kCosine, 1.0, 0.1, 4, 10};
  // Halfway through the decay (step 7 of 4..10) the rate is the midpoint.
  EXPECT_NEAR(LearningRateAt(s, 7), 0.55, 1e-12);
  EXPECT_NEAR(LearningRateAt(s, 5), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI / 6)),
              1e-12);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 10), 0.1);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1000), 0.1);
  for (int step = 5; step < 10; ++step) {
    EXPECT_LT(LearningRateAt(s, step + 1), LearningRateAt(s, step));
  }
}

TEST(LrSchedule, CosineEndingWithinWarmUpDropsToTheFloorAfterIt) {
  // A short run with the default warm-up: --steps=3 -> decay_steps 3.
  LrSchedule s{LrScheduleKind::kCosine, 1.0, 0.1, 10, 3};
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 3), 0.3);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 11), 0.1);
}

TEST(LrSchedule, ConstantHoldsThePeakAfterWarmUp) {
  LrSchedule s{LrScheduleKind::kConstant, 0.3, 0.0, 2, 0};
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 1), 0.15);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 2), 0.3);
  EXPECT_DOUBLE_EQ(LearningRateAt(s, 500), 0.3);
  LrSchedule no_warmup{LrScheduleKind::kConstant, 0.3, 0.0, 0, 0};
  EXPECT_DOUBLE_EQ(LearningRateAt(no_warmup, 1), 0.3);
}

}  // namespace
}  // namespace mtb
