// The fault matrix's rows and its reading of a job's output.
#include "trainer/bench/fault_matrix.h"

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

TEST(FaultMatrix, CasesCoverEveryPhaseAndKindOnEveryStrategy) {
  const std::vector<FaultCase> cases =
      FaultMatrixCases({"ddp", "fsdp"}, {"kill", "nan", "corrupt", "hang"}, /*all_phases=*/true);
  ASSERT_EQ(cases.size(), 2u * (7 + 3));
  EXPECT_EQ(cases[0].fault, "kill:rank=1,step=4,phase=data");
  EXPECT_EQ(cases[6].fault, "kill:rank=0,step=4,phase=checkpoint_before_latest");
  EXPECT_EQ(cases[7].fault, "nan:rank=1,step=3");
  EXPECT_EQ(cases[8].fault, "corrupt:rank=1,step=4;kill:rank=0,step=5,phase=forward");
  EXPECT_EQ(cases[9].fault, "hang:rank=1,step=4,phase=backward");
  EXPECT_EQ(cases[10].strategy, "fsdp");
  EXPECT_EQ(FaultMatrixCases({"ddp"}, {"kill"}, /*all_phases=*/false).size(), 2u);
}

std::vector<StampedLine> Lines(const std::vector<std::pair<double, std::string>>& lines) {
  std::vector<StampedLine> stamped;
  for (const auto& [seconds, text] : lines) {
    stamped.push_back({absl::UnixEpoch() + absl::Seconds(seconds), text});
  }
  return stamped;
}

TEST(FaultMatrix, DetectionIsTheFirstLineAfterTheFaultThatShowsIt) {
  FaultMatrixRow kill;
  kill.set_kind("kill");
  ClassifyDetection(
      Lines({{1, "launch: rank 0 (pid 3) exited with code 1"},  // before the fault
             {2, "[rank 1] E... --fault=kill:rank=1,step=4,phase=data: killing this rank"},
             {2.25, "launch: rank 1 (pid 9) was killed by SIGKILL (signal 9) ...: stopping rank 0"},
             {3, "launch: restarting all 2 ranks"}}),
      &kill);
  EXPECT_EQ(kill.detected_by(), "launcher: rank SIGKILLed");
  EXPECT_DOUBLE_EQ(kill.detect_seconds(), 0.25);

  FaultMatrixRow nan;
  nan.set_kind("nan");
  ClassifyDetection(Lines({{5, "--fault=nan:rank=1,step=3: this rank's loss becomes NaN"},
                           {5.5, "trainer: step 3 of 6: the loss is not finite on rank 1"}}),
                    &nan);
  EXPECT_EQ(nan.detected_by(), "loss check on every rank (same step, before the update)");
  EXPECT_DOUBLE_EQ(nan.detect_seconds(), 0.5);

  // corrupt: the flip is the fault; the kill that follows is not what
  // detects it, the restart's verification is.
  FaultMatrixRow corrupt;
  corrupt.set_kind("corrupt");
  ClassifyDetection(
      Lines(
          {{1, "--fault=corrupt:rank=1,step=4: flipped a byte of /c/step_00000004/rank_00001.bin"},
           {1.5, "launch: rank 0 (pid 3) was killed by SIGKILL"},
           {3, "--resume=latest: `latest` names step_00000004, which fails verification"}}),
      &corrupt);
  EXPECT_EQ(corrupt.detected_by(), "checkpoint verification at resume (falls back)");
  EXPECT_DOUBLE_EQ(corrupt.detect_seconds(), 2);

  FaultMatrixRow hang;
  hang.set_kind("hang");
  ClassifyDetection(
      Lines({{1, "--fault=hang:rank=1,step=4,phase=backward: this rank stops making progress"},
             {3.5, "launch: heartbeat: no progress for 2s: rank 1 is in no collective"}}),
      &hang);
  EXPECT_EQ(hang.detected_by(), "launcher heartbeat (names the hung rank)");
  EXPECT_DOUBLE_EQ(hang.detect_seconds(), 2.5);

  FaultMatrixRow silent;
  silent.set_kind("kill");
  ClassifyDetection(Lines({{1, "launch: rank 1 (pid 9) was killed by SIGKILL"}}), &silent);
  EXPECT_TRUE(silent.detected_by().empty());  // no fault line: nothing claimed
}

TEST(FaultMatrix, MarkdownShowsEveryRowAndFlagsTheUnexpected) {
  FaultMatrixResult result;
  FaultMatrixRow* ok = result.add_rows();
  ok->set_strategy("ddp");
  ok->set_fault("kill:rank=1,step=4,phase=data");
  ok->set_kind("kill");
  ok->set_detected_by("launcher: rank SIGKILLed");
  ok->set_detect_seconds(0.0123);
  ok->set_tree_unchanged(true);
  ok->set_restarted(true);
  ok->set_exact(true);
  ok->set_as_expected(true);
  FaultMatrixRow* bad = result.add_rows();
  bad->set_strategy("fsdp");
  bad->set_fault("nan:rank=1,step=3");
  bad->set_kind("nan");
  bad->set_exit_code(1);
  bad->set_problem("restarted");
  const std::string md = RenderFaultMatrixMarkdown(result);
  EXPECT_NE(md.find("| ddp | `kill:rank=1,step=4,phase=data` | launcher: rank SIGKILLed | 0.01 "
                    "| yes | yes | yes | 0 | yes |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| fsdp | `nan:rank=1,step=3` | - | - | no | no | n/a (not restarted) | 1 "
                    "| **no**: restarted |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("1 of 2 rows as expected."), std::string::npos) << md;
}

}  // namespace
}  // namespace mtb
