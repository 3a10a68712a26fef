// Pipeline x tensor parallelism with real processes (docs/pipeline.md,
// "With tensor parallelism"): the trainer binary launches pp=2 x tp=2 ranks
// of itself under 1F1B with sequence parallelism, compared with one rank on
// the same global batch over four clipped steps by the DDP process tests'
// comparison (trainer/tests/ddp_process_check.h: every step's loss and norm,
// every rank's dumped parameters, the logical global tensors, equal bit for
// bit, rank 0's against one rank's per tensor). A world that holds no whole
// pp x tp mesh is refused in one line before any rank starts. One launch
// besides the reference (a launch costs more than the training): the
// equivalence under both schedules, with dp, the planted faults
// (//trainer/pipeline:pp_tp_training_test) and a pp=2 x tp=2 checkpoint
// resumed at pp=1 x tp=1 on one rank
// (//trainer/pipeline:pipeline_training_test) run on rank threads.
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

TEST(PipelineTimesTensorParallel, EqualsOneRank) {
  const TrainerLaunch one = RunTrainer("one_rank", 1, Flags());
  ASSERT_EQ(one.exit_code, 0) << one.output;
  bool clipped = false;
  for (const StepRecord& step : one.result.runs(0).steps()) {
    clipped = clipped || step.clipped();
  }
  ASSERT_TRUE(clipped) << "no step was clipped";

  const TrainerLaunch pipelined = RunTrainer("pp2_tp2_sp", 4, PipelinedFlags());
  ASSERT_EQ(pipelined.exit_code, 0) << pipelined.output;
  EXPECT_EQ(pipelined.result.model().tokens_per_step(),
            one.result.model().tokens_per_step());
  const DdpComparison comparison = CompareWithReference(pipelined, one);
  EXPECT_TRUE(comparison.ok()) << comparison.Describe();
  std::cout << "pp=2 x tp=2 (SP, 1f1b) vs 1 rank:\n"
            << comparison.Describe() << "\n";
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
