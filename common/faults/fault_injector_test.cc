#include "common/faults/fault_injector.h"

#include <signal.h>

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace mtb {
namespace {

std::vector<Fault> Parse(const char* spec) {
  absl::StatusOr<std::vector<Fault>> faults = ParseFaults(spec, TrainerFaultGrammar());
  EXPECT_TRUE(faults.ok()) << faults.status();
  return *faults;
}

TEST(FaultInjector, NanFiresOnlyOnItsRankStepAndPhase) {
  FaultInjector rank1(Parse("nan:rank=1,step=2"), /*rank=*/1);
  EXPECT_FALSE(rank1.At(1, "forward"));
  EXPECT_TRUE(rank1.At(2, "forward"));
  FaultInjector rank0(Parse("nan:rank=1,step=2"), /*rank=*/0);
  EXPECT_FALSE(rank0.At(2, "forward"));
}

TEST(FaultInjector, SlowSleepsOnceAtTheFirstPhaseOfEachStepItAppliesTo) {
  FaultInjector injector(Parse("slow:rank=0,ms=50,every=2"), /*rank=*/0);
  std::vector<std::pair<int64_t, int64_t>> sleeps;  // (step, ms)
  int64_t step = 0;
  injector.set_sleep_for_testing([&](int64_t ms) { sleeps.push_back({step, ms}); });
  for (step = 1; step <= 4; ++step) {
    // Two micro-batches' phases: the sleep comes once, at the first.
    for (const char* phase : {"data", "forward", "backward", "data", "forward",
                              "backward", "optimizer"}) {
      injector.At(step, phase);
    }
  }
  EXPECT_EQ(sleeps, (std::vector<std::pair<int64_t, int64_t>>{{2, 50}, {4, 50}}));
  FaultInjector other(Parse("slow:rank=0,ms=50"), /*rank=*/1);
  other.set_sleep_for_testing([&](int64_t ms) { sleeps.push_back({-1, ms}); });
  other.At(1, "data");
  EXPECT_EQ(sleeps.size(), 2u);
}

TEST(FaultInjector, CorruptionIsAskedForByStepAndNeverFiresAtAPhase) {
  FaultInjector rank1(Parse("corrupt:rank=1,step=4"), /*rank=*/1);
  EXPECT_EQ(rank1.Corruption(2), nullptr);
  ASSERT_NE(rank1.Corruption(4), nullptr);
  EXPECT_EQ(FaultToString(*rank1.Corruption(4)), "corrupt:rank=1,step=4");
  EXPECT_FALSE(rank1.At(4, "data"));  // nothing at any phase
  FaultInjector rank0(Parse("corrupt:rank=1,step=4"), /*rank=*/0);
  EXPECT_EQ(rank0.Corruption(4), nullptr);
  FaultInjector restarted(Parse("corrupt:rank=1,step=4"), /*rank=*/1, /*attempt=*/1);
  EXPECT_EQ(restarted.Corruption(4), nullptr);
}

TEST(FaultInjector, RestartedAttemptsInjectNothing) {
  FaultInjector injector(Parse("nan:rank=0,step=1;exit:rank=0,step=2,code=9"),
                         /*rank=*/0, /*attempt=*/1);
  EXPECT_TRUE(injector.empty());
  EXPECT_FALSE(injector.At(1, "forward"));
  EXPECT_FALSE(injector.At(2, "forward"));  // would exit on attempt 0
}

TEST(FaultInjectorDeathTest, ExitAndKillEndTheProcessAsSpecified) {
  EXPECT_EXIT(
      {
        FaultInjector injector(Parse("exit:rank=0,step=2,code=7"), 0);
        injector.At(1, "data");
        injector.At(2, "data");
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(7), "exiting with code 7");
  EXPECT_EXIT(
      {
        FaultInjector injector(Parse("kill:rank=0,step=1,phase=backward"), 0);
        injector.At(1, "forward");
        injector.At(1, "backward");
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGKILL), "killing this rank");
}

}  // namespace
}  // namespace mtb
