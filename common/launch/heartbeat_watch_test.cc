#include "common/launch/heartbeat_watch.h"

#include <string>

#include "common/collective/heartbeat.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

using collective::RankProgress;

const absl::Time kStart = absl::FromUnixSeconds(1000);
constexpr absl::Duration kTimeout = absl::Seconds(3);

RankProgress At(int64_t step, const std::string& phase, int64_t counter) {
  RankProgress p;
  p.step = step;
  p.phase = phase;
  p.counter = counter;
  p.steady = true;
  p.last_completed = 40;
  p.issued = 41;
  return p;
}

RankProgress Waiting(int64_t step, const std::string& phase, int64_t counter,
                     int64_t sequence, const std::string& op = "all_reduce") {
  RankProgress p = At(step, phase, counter);
  p.collective = sequence;
  p.collective_op = op;
  p.waiting = true;
  p.issued = sequence + 1;
  return p;
}

void Send(HeartbeatWatch& watch, int rank, const RankProgress& p, absl::Time now) {
  EXPECT_TRUE(watch.Received(rank, collective::FormatHeartbeat(p), now));
}

TEST(HeartbeatWatch, NamesTheRankThatIsInNoCollectiveWhileTheOthersWait) {
  HeartbeatWatch watch({0, 1, 2}, kTimeout);
  // Every heartbeat repeats the same counter: nobody moves.
  for (absl::Duration t = absl::ZeroDuration(); t <= absl::Seconds(4);
       t += absl::Seconds(1)) {
    Send(watch, 0, Waiting(3, "backward", 100, 41), kStart + t);
    Send(watch, 1, At(3, "forward", 90), kStart + t);
    Send(watch, 2, Waiting(3, "backward", 100, 41), kStart + t);
    if (t < kTimeout) {
      EXPECT_FALSE(watch.Check(kStart + t).has_value()) << t;
    }
  }
  const std::optional<Stall> stall = watch.Check(kStart + absl::Seconds(4));
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->rank, 1);
  EXPECT_EQ(stall->description,
            "no progress for 4s: rank 1 is in no collective (step 3, forward); "
            "last completed #40 while ranks 0, 2 wait in all_reduce #41 (step 3, "
            "backward): the group waits for rank 1");
}

// A waiting rank that fails on its own (its collective timeout) moves its
// counter and says it is done: the stall is no longer seen, but what was
// remembered of it still names the rank the group waited for, until that
// rank moves.
TEST(HeartbeatWatch, RemembersTheRankWaitedForUntilItMoves) {
  HeartbeatWatch watch({0, 1}, kTimeout);
  for (int second = 0; second <= 2; ++second) {
    const absl::Time now = kStart + absl::Seconds(second);
    Send(watch, 0, Waiting(3, "backward", 100, 41), now);
    Send(watch, 1, At(3, "forward", 90), now);
    watch.Remember(now, absl::Seconds(1));
  }
  ASSERT_TRUE(watch.remembered().has_value());
  EXPECT_EQ(watch.remembered()->rank, 1);
  // Rank 0's collective fails: its counter moves, then it is done.
  RankProgress failed = At(3, "backward", 101);
  const absl::Time later = kStart + absl::Seconds(3);
  Send(watch, 0, failed, later);
  failed.done = true;
  Send(watch, 0, failed, later);
  watch.Remember(later, absl::Seconds(1));
  EXPECT_FALSE(watch.Diagnose(later, absl::Seconds(1)).has_value());
  ASSERT_TRUE(watch.remembered().has_value());
  EXPECT_EQ(watch.remembered()->rank, 1);

  // Negative: the rank waited for moves on (it was slow, not hung): the
  // stall is over and forgotten.
  HeartbeatWatch slow({0, 1}, kTimeout);
  for (int second = 0; second <= 2; ++second) {
    const absl::Time now = kStart + absl::Seconds(second);
    Send(slow, 0, Waiting(3, "backward", 100, 41), now);
    Send(slow, 1, At(3, "forward", 90), now);
    slow.Remember(now, absl::Seconds(1));
  }
  ASSERT_TRUE(slow.remembered().has_value());
  Send(slow, 1, At(3, "backward", 91), kStart + absl::Seconds(3));
  EXPECT_FALSE(slow.remembered().has_value());
}

TEST(HeartbeatWatch, ASlowRankIsNotAStall) {
  HeartbeatWatch watch({0, 1}, kTimeout);
  // Rank 0 waits for a long time, but rank 1's counter moves: it computes.
  for (int second = 0; second <= 10; ++second) {
    const absl::Time now = kStart + absl::Seconds(second);
    Send(watch, 0, Waiting(3, "backward", 100, 41), now);
    Send(watch, 1, At(3, "forward", 90 + second), now);
    EXPECT_FALSE(watch.Check(now).has_value()) << second;
  }
}

TEST(HeartbeatWatch, NobodyWaitingIsNotAStallAndStartUpIsNotWatched) {
  HeartbeatWatch computing({0, 1}, kTimeout);
  Send(computing, 0, At(3, "forward", 5), kStart);
  Send(computing, 1, At(3, "forward", 5), kStart);
  EXPECT_FALSE(computing.Check(kStart + absl::Minutes(10)).has_value());

  HeartbeatWatch starting({0, 1}, kTimeout);
  RankProgress first_step = Waiting(1, "backward", 7, 3);
  first_step.steady = false;
  Send(starting, 0, first_step, kStart);
  Send(starting, 1, At(1, "forward", 4), kStart);
  EXPECT_FALSE(starting.Check(kStart + absl::Minutes(10)).has_value());
  // A rank never heard from is start-up too.
  HeartbeatWatch silent({0, 1}, kTimeout);
  Send(silent, 0, Waiting(3, "backward", 7, 3), kStart);
  EXPECT_FALSE(silent.Check(kStart + absl::Minutes(10)).has_value());
}

TEST(HeartbeatWatch, EndedAndDoneRanksAreNotWatched) {
  HeartbeatWatch watch({0, 1, 2}, kTimeout);
  Send(watch, 0, Waiting(3, "backward", 100, 41), kStart);
  Send(watch, 1, At(3, "forward", 90), kStart);
  RankProgress done = At(5, "optimizer", 300);
  done.done = true;
  Send(watch, 2, done, kStart);
  watch.Ended(1);
  const std::optional<Stall> stall = watch.Check(kStart + absl::Seconds(5));
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->rank, -1);
  EXPECT_EQ(stall->description,
            "no progress for 5s: every rank waits in all_reduce #41 (step 3, "
            "backward): none is missing from it, so the transport itself is stuck");
}

TEST(HeartbeatWatch, OnOneOfSeveralNodesEveryLocalRankWaitingPointsElsewhere) {
  HeartbeatWatch watch({2, 3}, kTimeout, /*whole_group=*/false);
  Send(watch, 2, Waiting(3, "backward", 100, 41), kStart);
  Send(watch, 3, Waiting(3, "backward", 100, 41), kStart);
  const std::optional<Stall> stall = watch.Check(kStart + kTimeout);
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->description,
            "no progress for 3s: every rank of this node waits in all_reduce #41 "
            "(step 3, backward): the rank they wait for is on another node, or "
            "the transport is stuck (see the other nodes' launchers)");
}

TEST(HeartbeatWatch, RanksInDifferentCollectivesNameTheOddOneOut) {
  HeartbeatWatch watch({0, 1, 2}, kTimeout);
  Send(watch, 0, Waiting(3, "backward", 100, 41), kStart);
  Send(watch, 1, Waiting(3, "backward", 100, 41, "broadcast"), kStart);
  Send(watch, 2, Waiting(3, "backward", 100, 41), kStart);
  std::optional<Stall> stall = watch.Check(kStart + kTimeout);
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->rank, 1);
  EXPECT_EQ(stall->description,
            "no progress for 3s: ranks 0, 2 wait in all_reduce #41 (step 3, "
            "backward); rank 1 waits in broadcast #41 (step 3, backward): the "
            "ranks are in different collectives at the same sequence number "
            "(they issued different calls); the odd one out is rank 1");
  HeartbeatWatch behind({0, 1}, kTimeout);
  Send(behind, 0, Waiting(3, "backward", 100, 42), kStart);
  Send(behind, 1, Waiting(3, "optimizer", 100, 41, "barrier"), kStart);
  stall = behind.Check(kStart + kTimeout);
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->rank, 1);  // equal groups: the lower sequence number
}

HeartbeatPolicy Automatic() {
  HeartbeatPolicy policy;
  policy.floor = absl::Seconds(2);
  policy.cap = absl::Seconds(24);
  policy.first_step = absl::Seconds(4);
  return policy;
}

TEST(HeartbeatPolicy, AutomaticIsTheFloorOrTenSlowestStepsBelowTheCap) {
  const HeartbeatPolicy policy = Automatic();
  EXPECT_EQ(policy.Timeout(absl::ZeroDuration()), absl::Seconds(2));
  EXPECT_EQ(policy.Timeout(absl::Milliseconds(500)), absl::Seconds(5));
  EXPECT_EQ(policy.Timeout(absl::Seconds(10)), absl::Seconds(24));
  EXPECT_EQ(policy.Describe(), "2s (or 10x the slowest step, at most 24s)");
  EXPECT_EQ(HeartbeatPolicy::Fixed(absl::Seconds(7)).Timeout(absl::Minutes(5)), absl::Seconds(7));
}

TEST(HeartbeatWatch, TheAutomaticTimeoutGrowsWithTheSlowestStepAnyRankReported) {
  HeartbeatWatch watch({0, 1}, Automatic());
  RankProgress slow = At(3, "forward", 90);
  slow.slowest_step_ms = 400;  // 10x: 4 s
  Send(watch, 0, Waiting(3, "backward", 100, 41), kStart);
  Send(watch, 1, slow, kStart);
  EXPECT_EQ(watch.CurrentTimeout(), absl::Seconds(4));
  EXPECT_FALSE(watch.Check(kStart + absl::Seconds(3)).has_value());
  const std::optional<Stall> stall = watch.Check(kStart + absl::Seconds(4));
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->rank, 1);
}

TEST(HeartbeatWatch, TheFirstStepHasItsOwnAllowanceUnderTheAutomaticPolicy) {
  HeartbeatWatch watch({0, 1}, Automatic());
  RankProgress waiting = Waiting(1, "backward", 7, 3);
  waiting.steady = false;
  RankProgress hung = At(1, "forward", 4);
  hung.steady = false;
  Send(watch, 0, waiting, kStart);
  Send(watch, 1, hung, kStart);
  EXPECT_EQ(watch.CurrentTimeout(), absl::Seconds(4));
  // Past the steady floor (2 s) but inside the first step's 4 s: start-up.
  EXPECT_FALSE(watch.Check(kStart + absl::Seconds(3)).has_value());
  const std::optional<Stall> stall = watch.Check(kStart + absl::Seconds(4));
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->rank, 1);
  EXPECT_EQ(stall->description,
            "no progress for 4s: rank 1 is in no collective (step 1, forward); last "
            "completed #40 while rank 0 waits in all_reduce #3 (step 1, backward): the "
            "group waits for rank 1");
}

TEST(HeartbeatWatch, DiagnoseDescribesAShorterWaitAndStepAndSaveSumsTheLongest) {
  HeartbeatWatch watch({0, 1}, HeartbeatPolicy::Fixed(absl::Minutes(1)));
  RankProgress timed = At(3, "forward", 90);
  timed.last_step_ms = 1500;
  timed.last_save_ms = 300;
  RankProgress waiting = Waiting(3, "backward", 100, 41);
  waiting.last_step_ms = 1200;
  waiting.last_save_ms = 700;
  Send(watch, 0, waiting, kStart);
  Send(watch, 1, timed, kStart);
  EXPECT_FALSE(watch.Diagnose(kStart + absl::Seconds(1), absl::Seconds(2)).has_value());
  const std::optional<Stall> report = watch.Diagnose(kStart + absl::Seconds(2), absl::Seconds(2));
  ASSERT_TRUE(report.has_value());
  EXPECT_EQ(report->rank, 1);
  EXPECT_FALSE(watch.Check(kStart + absl::Seconds(2)).has_value());
  EXPECT_EQ(watch.StepAndSave(), absl::Milliseconds(2200));
}

TEST(HeartbeatWatch, NotAHeartbeatOrAnUnknownRankIsIgnored) {
  HeartbeatWatch watch({0}, kTimeout);
  EXPECT_FALSE(watch.Received(0, "hello", kStart));
  EXPECT_FALSE(watch.Received(7, collective::FormatHeartbeat(At(1, "x", 1)), kStart));
}

}  // namespace
}  // namespace mtb
