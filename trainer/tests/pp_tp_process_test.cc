// Pipeline x tensor parallelism with real processes (docs/pipeline.md,
// "With tensor parallelism"): the trainer binary launches pp=2 x tp=2 ranks
// of itself under 1F1B with sequence parallelism, compared with one rank on
// the same global batch over four clipped steps by the DDP process tests'
// comparison (trainer/tests/ddp_process_check.h: every step's loss and norm,
// every rank's dumped parameters, the logical global tensors, equal bit for
// bit, rank 0's against one rank's per tensor); its step-2 checkpoint,
// saved as the logical tensors, resumed at pp=1 x tp=1 on one rank,
// continues within the same bound. A world that holds no whole pp x tp
// mesh is refused in one line before any rank starts. The equivalence under
// both schedules, with dp, and the planted faults are
// //trainer/pipeline:pp_tp_training_test's (rank threads).
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/tests/ddp_process_check.h"
#include "trainer/train_result.pb.h"

namespace mtb {
namespace {

constexpr int kGlobalBatch = 4;

std::vector<std::string> Flags() {
  std::vector<std::string> flags = TinyTpFlags();
  flags.push_back(absl::StrCat("--batch_size=", kGlobalBatch));
  flags.push_back("--max_grad_norm=0.5");  // clipped from step 1 on
  return flags;
}

std::vector<std::string> PipelinedFlags() {
  std::vector<std::string> flags = Flags();
  for (const char* flag : {"--pp=2", "--tp=2", "--sequence_parallel",
                           "--pp_schedule=1f1b", "--pp_microbatches=2"}) {
    flags.push_back(flag);
  }
  return flags;
}

TEST(PipelineTimesTensorParallel, EqualsOneRankAndItsCheckpointResumesOnOneRank) {
  const TrainerLaunch one = RunTrainer("one_rank", 1, Flags());
  ASSERT_EQ(one.exit_code, 0) << one.output;
  bool clipped = false;
  for (const StepRecord& step : one.result.runs(0).steps()) {
    clipped = clipped || step.clipped();
  }
  ASSERT_TRUE(clipped) << "no step was clipped";

  const std::string dir = LaunchDirectory("pp2_tp2_checkpoints");
  std::vector<std::string> flags = PipelinedFlags();
  flags.push_back("--checkpoint_dir=" + dir);
  flags.push_back("--save_every=2");
  const TrainerLaunch pipelined = RunTrainer("pp2_tp2_sp", 4, flags);
  ASSERT_EQ(pipelined.exit_code, 0) << pipelined.output;
  EXPECT_EQ(pipelined.result.model().tokens_per_step(),
            one.result.model().tokens_per_step());
  const DdpComparison comparison = CompareWithReference(pipelined, one);
  EXPECT_TRUE(comparison.ok()) << comparison.Describe();
  std::cout << "pp=2 x tp=2 (SP, 1f1b) vs 1 rank:\n"
            << comparison.Describe() << "\n";

  // The step-2 checkpoint on one rank: steps 3 and 4 and the final model
  // against the uninterrupted one-rank run.
  std::vector<std::string> resume = Flags();
  resume.push_back("--checkpoint_dir=" + dir);
  resume.push_back("--resume=" + dir + "/step_00000002");
  resume.push_back("--save_every=0");
  const TrainerLaunch resumed = RunTrainer("resumed_pp1_tp1", 1, resume);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  ASSERT_EQ(resumed.result.runs(0).steps_size(), 2);
  DdpComparison continued;
  for (const StepRecord& step : resumed.result.runs(0).steps()) {
    const StepRecord& expected = one.result.runs(0).steps(step.step() - 1);
    if (!(std::abs(step.loss() - expected.loss()) <=
          kDdpLossRtol * std::abs(expected.loss()))) {
      continued.failures.push_back(
          {DdpCheck::kLoss, absl::StrCat("step ", step.step(), ": loss ",
                                         step.loss(), " vs ", expected.loss())});
    }
    if (!(std::abs(step.grad_norm() - expected.grad_norm()) <=
          1e-5 * expected.grad_norm())) {
      continued.failures.push_back(
          {DdpCheck::kGradNorm,
           absl::StrCat("step ", step.step(), ": norm ", step.grad_norm(),
                        " vs ", expected.grad_norm())});
    }
  }
  CompareParameters(resumed.rank_parameters[0], one.rank_parameters[0],
                    one.manifest, "resumed vs one rank", &continued);
  EXPECT_TRUE(continued.ok()) << continued.Describe();
  std::cout << "pp=2 x tp=2 checkpoint resumed at pp=1 x tp=1 vs 1 rank:\n"
            << continued.Describe() << "\n";
}

TEST(PipelineTimesTensorParallel, AWorldWithoutWholeMeshesIsRefused) {
  const TrainerLaunch launch =
      RunTrainer("pp2_tp2_on_6", 6, PipelinedFlags(), /*dump_parameters=*/false);
  EXPECT_EQ(launch.exit_code, 2) << launch.output;
  EXPECT_NE(launch.output.find("trainer: --pp=2 x --tp=2 must divide the "
                               "world size 6 (world = pp x dp x tp)"),
            std::string::npos)
      << launch.output;
  EXPECT_EQ(launch.output.find("joined a group"), std::string::npos)
      << launch.output;
}

}  // namespace
}  // namespace mtb
