#include "common/faults/fault_spec.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

TEST(FaultSpec, EveryKindParsesAndPrintsCanonically) {
  absl::StatusOr<std::vector<Fault>> faults = ParseFaults(
      "kill:rank=1,step=3,phase=backward; nan:rank=0,step=2;hang:step=4,rank=1;"
      "slow:rank=1,ms=50,every=2;exit:rank=0,step=5,code=7;corrupt:rank=1,step=4",
      TrainerFaultGrammar());
  ASSERT_TRUE(faults.ok()) << faults.status();
  ASSERT_EQ(faults->size(), 6u);
  EXPECT_EQ(FaultToString((*faults)[0]), "kill:rank=1,step=3,phase=backward");
  EXPECT_EQ(FaultToString((*faults)[1]), "nan:rank=0,step=2");
  EXPECT_EQ(FaultToString((*faults)[2]), "hang:rank=1,step=4");
  EXPECT_EQ(FaultToString((*faults)[3]), "slow:rank=1,ms=50,every=2");
  EXPECT_EQ(FaultToString((*faults)[4]), "exit:rank=0,step=5,code=7");
  EXPECT_EQ(FaultToString((*faults)[5]), "corrupt:rank=1,step=4");
  EXPECT_TRUE(ParseFaults("", TrainerFaultGrammar())->empty());
}

TEST(FaultSpec, EachMalformedFormNamesTheBadPart) {
  const FaultGrammar grammar = TrainerFaultGrammar();
  for (const auto& [spec, message] : std::vector<std::pair<std::string, std::string>>{
           {"explode:rank=1", "--fault=explode:rank=1: 'explode' is not a fault kind (corrupt, exit, hang, kill, nan, slow)"},
           {"kill", "--fault=kill: 'kill' needs rank, step, phase"},
           {"kill:rank=1,stp=3,phase=data", "--fault=kill:rank=1,stp=3,phase=data: 'stp' is not a key of kill (rank, step, phase)"},
           {"kill:rank=1,step=3", "--fault=kill:rank=1,step=3: 'kill:rank=1,step=3' lacks phase (kill needs rank, step, phase)"},
           {"kill:rank=1,step=3,phase=lunch", "--fault=kill:rank=1,step=3,phase=lunch: 'lunch' is not a phase (data, forward, backward, optimizer, checkpoint_write, checkpoint_before_ready, checkpoint_before_latest)"},
           {"nan:rank=x,step=2", "--fault=nan:rank=x,step=2: 'rank=x' needs a whole number"},
           {"nan:rank=0,step=0", "--fault=nan:rank=0,step=0: 'step=0' must be >= 1 (steps count from 1)"},
           {"nan:rank=0,rank=1,step=2", "--fault=nan:rank=0,rank=1,step=2: 'rank' is given twice"},
           {"slow:rank=0", "--fault=slow:rank=0: 'slow:rank=0' lacks ms (slow needs rank, ms)"},
           {"exit:rank=0,step=1,code=300", "--fault=exit:rank=0,step=1,code=300: 'code=300' must be in [1, 255]"},
           {"nan:rank0", "--fault=nan:rank0: 'rank0' is not key=value"},
           {"corrupt:rank=1,step=2,phase=data", "--fault=corrupt:rank=1,step=2,phase=data: 'phase' is not a key of corrupt (rank, step)"},
       }) {
    const absl::StatusOr<std::vector<Fault>> parsed = ParseFaults(spec, grammar);
    ASSERT_FALSE(parsed.ok()) << spec;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(), message);
  }
}

TEST(FaultSpec, ASpecOfSeparatorsOnlyNamesNoFaultAndIsRefused) {
  for (const std::string spec : {";", " ; ;", ";;"}) {
    const absl::StatusOr<std::vector<Fault>> parsed = ParseFaults(spec, TrainerFaultGrammar());
    ASSERT_FALSE(parsed.ok()) << spec;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(parsed.status().message(),
              absl::StrCat("--fault=", spec,
                           ": names no fault (KIND:key=value,... separated by ';'; leave "
                           "the flag out for none)"));
  }
  // The flag left empty (or blank) is no faults; a trailing ';' is harmless.
  EXPECT_TRUE(ParseFaults(" ", TrainerFaultGrammar())->empty());
  EXPECT_EQ(ParseFaults("nan:rank=0,step=1;", TrainerFaultGrammar())->size(), 1u);
}

TEST(FaultSpec, ASlowFaultThatWouldOutlastTheTimeoutOrNeverFiresIsRefused) {
  const absl::Duration first = absl::Seconds(20), steady = absl::Seconds(3);
  auto check = [&](const std::string& spec, int64_t steps) {
    return ValidateSlowFaults(*ParseFaults(spec, TrainerFaultGrammar()), steps, first, steady);
  };
  EXPECT_TRUE(check("slow:rank=1,ms=2999", 5).ok());
  EXPECT_EQ(check("slow:rank=1,ms=3000", 5).message(),
            "--fault=slow:rank=1,ms=3000: the delay 3s is not shorter than "
            "--collective_timeout=3s: the other ranks would time out waiting for rank 1 (a "
            "slow rank is not a hung one: hang: tests a timeout)");
  // Only on the first step: the first step's timeout bounds it.
  EXPECT_TRUE(check("slow:rank=0,ms=10000", 1).ok());
  EXPECT_EQ(check("slow:rank=0,ms=20000", 1).message(),
            "--fault=slow:rank=0,ms=20000: the delay 20s is not shorter than "
            "--first_step_timeout=20s: the other ranks would time out waiting for rank 0 (a "
            "slow rank is not a hung one: hang: tests a timeout)");
  // every=K fires on steps K, 2K, ...: none of 3 steps with K = 4.
  EXPECT_TRUE(check("slow:rank=1,ms=5,every=3", 3).ok());
  EXPECT_EQ(check("slow:rank=1,ms=5,every=4", 3).message(),
            "--fault=slow:rank=1,ms=5,every=4: every=4 fires on no step of --steps=3: it "
            "would do nothing");
  // Other kinds are not this rule's.
  EXPECT_TRUE(check("hang:rank=1,step=2", 3).ok());
}

TEST(FaultSpec, RanksAndStepsOutOfRangeAreRefused) {
  const std::vector<Fault> faults =
      *ParseFaults("kill:rank=2,step=3,phase=data", TrainerFaultGrammar());
  EXPECT_TRUE(ValidateFaults(faults, 3, 10).ok());
  EXPECT_EQ(ValidateFaults(faults, 2, 10).message(),
            "--fault=kill:rank=2,step=3,phase=data: rank 2 is not a rank of the world size 2");
  EXPECT_EQ(ValidateFaults(faults, 3, 2).message(),
            "--fault=kill:rank=2,step=3,phase=data: step 3 is after the last step 2");
}

TEST(FaultSpec, ABenchmarkGrammarTakesItsOpsAsPhasesAndRefusesNan) {
  const FaultGrammar grammar = SweepFaultGrammar(
      "comm_bench", {"all_reduce", "all_gather"}, "sweep point");
  absl::StatusOr<std::vector<Fault>> faults = ParseFaults(
      "kill:rank=1,step=2,phase=all_gather;hang:rank=0,step=1;slow:rank=1,ms=5;"
      "exit:rank=0,step=3,code=4",
      grammar);
  ASSERT_TRUE(faults.ok()) << faults.status();
  EXPECT_EQ(faults->size(), 4u);
  EXPECT_EQ(ParseFaults("nan:rank=0,step=1", grammar).status().message(),
            "--fault=nan:rank=0,step=1: 'nan' is not a fault comm_bench injects "
            "(kill, hang, slow, exit): it has no loss to make NaN");
  EXPECT_EQ(ParseFaults("corrupt:rank=0,step=1", grammar).status().message(),
            "--fault=corrupt:rank=0,step=1: 'corrupt' is not a fault comm_bench injects "
            "(kill, hang, slow, exit): it saves no checkpoint to corrupt");
  EXPECT_EQ(ParseFaults("kill:rank=0,step=1,phase=forward", grammar).status().message(),
            "--fault=kill:rank=0,step=1,phase=forward: 'forward' is not a phase "
            "(all_reduce, all_gather)");
}

TEST(FaultSpec, APlannedRunRefusesStepsPastItsEndAndPhasesAStepDoesNotRun) {
  const FaultGrammar grammar = SweepFaultGrammar(
      "comm_bench", {"all_reduce", "all_gather"}, "sweep point");
  FaultBounds bounds;
  bounds.world_size = 2;
  bounds.steps = 5;
  bounds.phase_of_step = {"all_reduce", "all_reduce", "all_reduce", "all_gather",
                          "all_gather"};
  bounds.step_name = "sweep point";
  auto validate = [&](const char* spec) {
    absl::StatusOr<std::vector<Fault>> faults = ParseFaults(spec, grammar);
    EXPECT_TRUE(faults.ok()) << faults.status();
    return ValidateFaults(*faults, bounds);
  };
  EXPECT_TRUE(validate("kill:rank=1,step=4,phase=all_gather;hang:rank=0,step=5").ok());
  EXPECT_EQ(validate("kill:rank=1,step=2,phase=all_gather").message(),
            "--fault=kill:rank=1,step=2,phase=all_gather: sweep point 2 runs "
            "all_reduce, not all_gather (1-3 all_reduce, 4-5 all_gather)");
  EXPECT_EQ(validate("exit:rank=0,step=6,code=3").message(),
            "--fault=exit:rank=0,step=6,code=3: sweep point 6 is after the last "
            "sweep point 5 (1-3 all_reduce, 4-5 all_gather)");
  EXPECT_EQ(validate("hang:rank=2,step=1").message(),
            "--fault=hang:rank=2,step=1: rank 2 is not a rank of the world size 2");
}

TEST(FaultSpec, AFaultFiresOnlyOnItsRankStepAndPhase) {
  const std::vector<Fault> faults =
      *ParseFaults("kill:rank=1,step=3,phase=backward;hang:rank=0,step=2;slow:rank=1,ms=5,every=2",
                   TrainerFaultGrammar());
  EXPECT_NE(FindFault(faults, FaultKind::kKill, 1, 3, "backward"), nullptr);
  EXPECT_EQ(FindFault(faults, FaultKind::kKill, 1, 3, "forward"), nullptr);
  EXPECT_EQ(FindFault(faults, FaultKind::kKill, 0, 3, "backward"), nullptr);
  EXPECT_EQ(FindFault(faults, FaultKind::kKill, 1, 4, "backward"), nullptr);
  EXPECT_NE(FindFault(faults, FaultKind::kHang, 0, 2, "optimizer"), nullptr);  // any phase
  EXPECT_NE(FindFault(faults, FaultKind::kSlow, 1, 4, ""), nullptr);
  EXPECT_EQ(FindFault(faults, FaultKind::kSlow, 1, 5, ""), nullptr);
}

}  // namespace
}  // namespace mtb
