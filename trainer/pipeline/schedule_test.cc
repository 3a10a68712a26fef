#include "trainer/pipeline/schedule.h"

#include "gtest/gtest.h"

namespace mtb::pipeline {
namespace {

constexpr Phase F = Phase::kForward;
constexpr Phase B = Phase::kBackward;

TEST(Schedule, GpipeRunsEveryForwardThenEveryBackward) {
  const Schedule schedule = MakeSchedule(ScheduleKind::kGpipe, 2, 3);
  const std::vector<Action> expected = {{F, 0}, {F, 1}, {F, 2},
                                        {B, 0}, {B, 1}, {B, 2}};
  EXPECT_EQ(schedule.actions[0], expected);
  EXPECT_EQ(schedule.actions[1], expected);
}

TEST(Schedule, OneForwardOneBackwardWarmsUpByStagesAhead) {
  const Schedule schedule =
      MakeSchedule(ScheduleKind::kOneForwardOneBackward, 4, 5);
  // Stage 0: 3 warm-up forwards; the last stage none.
  EXPECT_EQ(schedule.actions[0],
            (std::vector<Action>{{F, 0}, {F, 1}, {F, 2}, {F, 3}, {B, 0},
                                 {F, 4}, {B, 1}, {B, 2}, {B, 3}, {B, 4}}));
  EXPECT_EQ(schedule.actions[3],
            (std::vector<Action>{{F, 0}, {B, 0}, {F, 1}, {B, 1}, {F, 2},
                                 {B, 2}, {F, 3}, {B, 3}, {F, 4}, {B, 4}}));
  // Fewer micro-batches than warm-up slots: all forwards, then backwards.
  const Schedule short_one =
      MakeSchedule(ScheduleKind::kOneForwardOneBackward, 4, 2);
  EXPECT_EQ(short_one.actions[0],
            (std::vector<Action>{{F, 0}, {F, 1}, {B, 0}, {B, 1}}));
}

// The idle slots of every stage, exactly: (p-1)(f+b) of a makespan of
// (m+p-1)(f+b), so idle / makespan == (p-1)/(m+p-1), compared as
// integers (cross-multiplied).
TEST(Schedule, IdleSlotsEqualTheBubbleClosedFormAtTwoAndFourStages) {
  for (ScheduleKind kind :
       {ScheduleKind::kGpipe, ScheduleKind::kOneForwardOneBackward}) {
    for (int p : {2, 4}) {
      for (int m : {1, 2, 3, 4, 8}) {
        for (int64_t backward_slots : {1, 2}) {
          SCOPED_TRACE(testing::Message()
                       << ScheduleKindName(kind) << " p=" << p << " m=" << m
                       << " backward_slots=" << backward_slots);
          const int64_t f = 1;
          const int64_t b = backward_slots;
          const SlotTimeline timeline =
              RunSlotTimeline(MakeSchedule(kind, p, m), f, b);
          EXPECT_EQ(timeline.makespan, (m + p - 1) * (f + b));
          for (int s = 0; s < p; ++s) {
            EXPECT_EQ(timeline.busy[s], m * (f + b)) << "stage " << s;
            EXPECT_EQ(timeline.idle[s], (p - 1) * (f + b)) << "stage " << s;
            EXPECT_EQ(timeline.idle[s] * (m + p - 1),
                      (p - 1) * timeline.makespan)
                << "stage " << s;
          }
        }
      }
    }
  }
}

// The negative: the closed form is a property of the schedules' order, not
// of any order. A first stage that runs its backwards last-first (legal:
// no deadlock) waits for micro-batch 2's gradient, which the last stage
// sends last: p = 2, m = 3, f = 1, b = 2 take 16 slots, not
// (m + p - 1)(f + b) = 12, and each stage idles 7 of them, not 3 = 12 / 4.
TEST(Schedule, AnOrderOtherThanTheSchedulesIdlesMoreThanTheClosedForm) {
  const int p = 2;
  const int m = 3;
  Schedule schedule = MakeSchedule(ScheduleKind::kGpipe, p, m);
  schedule.actions[0] = {{F, 0}, {F, 1}, {F, 2}, {B, 2}, {B, 1}, {B, 0}};
  ASSERT_TRUE(CheckDeadlockFree(schedule, SendSemantics::kBuffered).ok());
  const SlotTimeline timeline = RunSlotTimeline(schedule, 1, 2);
  EXPECT_EQ(timeline.makespan, 16);
  for (int s = 0; s < p; ++s) {
    EXPECT_EQ(timeline.busy[s], m * 3) << "stage " << s;
    EXPECT_EQ(timeline.idle[s], 7) << "stage " << s;
    EXPECT_NE(timeline.idle[s] * (m + p - 1), (p - 1) * timeline.makespan)
        << "stage " << s;
  }
}

TEST(Schedule, ActivationsInFlightAreMForGpipeAndAtMostPMinusStageFor1f1b) {
  const int p = 4;
  const int m = 8;
  const SlotTimeline gpipe =
      RunSlotTimeline(MakeSchedule(ScheduleKind::kGpipe, p, m), 1, 2);
  const SlotTimeline one_f_one_b = RunSlotTimeline(
      MakeSchedule(ScheduleKind::kOneForwardOneBackward, p, m), 1, 2);
  for (int s = 0; s < p; ++s) {
    EXPECT_EQ(gpipe.peak_in_flight[s], m);
    EXPECT_EQ(one_f_one_b.peak_in_flight[s], p - s);
  }
}

TEST(Schedule, BothSchedulesAreDeadlockFreeWithBufferedSends) {
  for (ScheduleKind kind :
       {ScheduleKind::kGpipe, ScheduleKind::kOneForwardOneBackward}) {
    for (int p : {1, 2, 4}) {
      for (int m : {1, 3, 8}) {
        EXPECT_TRUE(
            CheckDeadlockFree(MakeSchedule(kind, p, m), SendSemantics::kBuffered)
                .ok())
            << ScheduleKindName(kind) << " p=" << p << " m=" << m;
      }
    }
  }
}

// 1F1B's steady state has neighbours sending to each other at once (stage s
// its activation, s+1 its gradient): with synchronous sends it deadlocks,
// which is why the step posts its sends asynchronously. GPipe does not.
TEST(Schedule, OneForwardOneBackwardDeadlocksWithRendezvousSendsAtFourStages) {
  const absl::Status status = CheckDeadlockFree(
      MakeSchedule(ScheduleKind::kOneForwardOneBackward, 4, 8),
      SendSemantics::kRendezvous);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(status.message().find("deadlocks with rendezvous sends"),
            std::string::npos)
      << status;
  EXPECT_NE(status.message().find("waits to send"), std::string::npos) << status;
  EXPECT_TRUE(CheckDeadlockFree(MakeSchedule(ScheduleKind::kGpipe, 4, 8),
                                SendSemantics::kRendezvous)
                  .ok());
}

// A stage that runs its backwards in the opposite order from its neighbour
// waits for a gradient that the neighbour will only send after one this
// stage has not yet asked for: refused even with buffered sends.
TEST(Schedule, CrossedMicroBatchOrderIsRefusedAsADeadlock) {
  Schedule schedule = MakeSchedule(ScheduleKind::kGpipe, 2, 2);
  schedule.actions[1] = {{F, 0}, {B, 0}, {F, 1}, {B, 1}};
  EXPECT_TRUE(CheckDeadlockFree(schedule, SendSemantics::kBuffered).ok());
  // Stage 1 now wants activation 1 before it sends gradient 0, and stage 0
  // wants gradient 0 before it sends activation 1.
  schedule.actions[0] = {{F, 0}, {B, 0}, {F, 1}, {B, 1}};
  schedule.actions[1] = {{F, 1}, {F, 0}, {B, 0}, {B, 1}};
  const absl::Status status =
      CheckDeadlockFree(schedule, SendSemantics::kBuffered);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("stage 0 waits to receive the gradient of "
                                  "micro-batch 0 from stage 1"),
            std::string::npos)
      << status;
}

TEST(Schedule, MissingOrRepeatedActionsAreInvalid) {
  Schedule schedule = MakeSchedule(ScheduleKind::kGpipe, 2, 2);
  schedule.actions[1].pop_back();
  EXPECT_EQ(CheckDeadlockFree(schedule, SendSemantics::kBuffered).code(),
            absl::StatusCode::kInvalidArgument);
  schedule = MakeSchedule(ScheduleKind::kGpipe, 2, 2);
  schedule.actions[0] = {{B, 0}, {F, 0}, {F, 1}, {B, 1}};
  const absl::Status status =
      CheckDeadlockFree(schedule, SendSemantics::kBuffered);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("B0 comes before F0"), std::string::npos)
      << status;
}

TEST(Schedule, ParsesTheFlagValues) {
  EXPECT_EQ(ParseScheduleKind("gpipe").value(), ScheduleKind::kGpipe);
  EXPECT_EQ(ParseScheduleKind("1f1b").value(),
            ScheduleKind::kOneForwardOneBackward);
  EXPECT_EQ(ParseScheduleKind("zb").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mtb::pipeline
