// Pipeline x data parallelism with real processes: pp = 2 stages of dp = 2
// replicas each, the stage's gradient reduced over its dp group by zero1 and
// by zero2 (the strategies run over the stage's own parameters, as over a
// whole model), equal one rank over five clipped steps within the tiers of
// CompareWithReference (trainer/tests/ddp_process_check.cc); and a pp=2 x dp=2
// checkpoint, saved as the logical global tensors every strategy saves,
// resumed at pp=1 on one rank (zero1's) and at pp=4 (zero2's), each
// continuing within the same bound as the uninterrupted one-rank run; --metrics_jsonl writes rank 0's
// line per step. The negative of the stage
// reduction (a sum for an average fails) is pipeline_training_test's
// (threads); here: --strategy=fsdp is refused before ranks start.
// Two shards: the zero1 and zero2 runs (each with its resumes) apart.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/tests/ddp_process_check.h"
#include "trainer/train_result.pb.h"

namespace mtb {
namespace {

// One pipeline's flags: its per-pipeline batch (the global batch over `dp`),
// clipped from step 1 on (the norms are ~1-2), as pp_process_test.
std::vector<std::string> Flags(int stages, int dp, int micro_batches,
                               const std::string& schedule) {
  std::vector<std::string> flags = TinyDdpFlags();
  flags.push_back(absl::StrCat("--batch_size=", kTinyGlobalBatch / dp));
  flags.push_back("--max_grad_norm=0.5");
  if (stages > 1) {
    flags.push_back(absl::StrCat("--pp=", stages));
    flags.push_back(absl::StrCat("--pp_schedule=", schedule));
    flags.push_back(absl::StrCat("--pp_microbatches=", micro_batches));
  }
  return flags;
}

const TrainerLaunch& Reference() {
  static const TrainerLaunch* reference =
      new TrainerLaunch(RunTrainer("one_rank", 1, Flags(1, 1, 1, "")));
  return *reference;
}

// `resumed`'s steps (the last ones of the run) and final parameters against
// the one-rank run's, in CompareWithReference's tiers.
DdpComparison CompareResumed(const TrainerLaunch& resumed, int first_step) {
  const TrainerLaunch& one = Reference();
  DdpComparison comparison;
  const int steps = one.result.runs(0).steps_size();
  EXPECT_EQ(resumed.result.runs(0).steps_size(), steps - first_step + 1);
  for (const StepRecord& step : resumed.result.runs(0).steps()) {
    const StepRecord& expected = one.result.runs(0).steps(step.step() - 1);
    if (!(std::abs(step.loss() - expected.loss()) <=
          kDdpLossRtol * std::abs(expected.loss()))) {
      comparison.failures.push_back(
          {DdpCheck::kLoss, absl::StrCat("step ", step.step(), ": loss ",
                                         step.loss(), " vs one rank's ",
                                         expected.loss())});
    }
    if (!(std::abs(step.grad_norm() - expected.grad_norm()) <=
          1e-5 * expected.grad_norm())) {
      comparison.failures.push_back(
          {DdpCheck::kGradNorm,
           absl::StrCat("step ", step.step(), ": norm ", step.grad_norm(),
                        " vs one rank's ", expected.grad_norm())});
    }
  }
  for (size_t rank = 1; rank < resumed.rank_parameters.size(); ++rank) {
    if (!at::equal(resumed.rank_parameters[rank], resumed.rank_parameters[0])) {
      comparison.failures.push_back(
          {DdpCheck::kRanksEqual,
           absl::StrCat("rank ", rank, "'s parameters differ from rank 0's")});
    }
  }
  CompareParameters(resumed.rank_parameters[0], one.rank_parameters[0],
                    one.manifest, "resumed vs one rank", &comparison);
  return comparison;
}

// pp=2 x dp=2 under `strategy`, five steps, saving after step 3; equal one
// rank; then the step-3 checkpoint resumed at pp=`resume_stages` (on as
// many ranks: dp=1), continuing within the bound.
void ExpectPipelinesOfReplicasEqualOneRank(const std::string& strategy,
                                           const std::string& schedule,
                                           int resume_stages) {
  SCOPED_TRACE(strategy);
  const TrainerLaunch& one = Reference();
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string dir = LaunchDirectory(strategy + "_checkpoints");
  std::vector<std::string> flags = Flags(2, 2, 2, schedule);
  flags.push_back("--strategy=" + strategy);
  flags.push_back("--checkpoint_dir=" + dir);
  flags.push_back("--save_every=3");
  const std::string metrics = dir + "_metrics.jsonl";
  flags.push_back("--metrics_jsonl=" + metrics);
  const TrainerLaunch pipelined =
      RunTrainer(absl::StrCat("pp2_dp2_", strategy), 4, flags);
  ASSERT_EQ(pipelined.exit_code, 0) << pipelined.output;
  EXPECT_EQ(pipelined.result.model().tokens_per_step(),
            one.result.model().tokens_per_step());
  ASSERT_EQ(pipelined.result.checkpoint().saves_size(), 2);
  // --metrics_jsonl: rank 0's line per step.
  absl::StatusOr<std::string> lines = ReadFileToString(metrics);
  ASSERT_TRUE(lines.ok()) << lines.status();
  EXPECT_EQ(std::count(lines->begin(), lines->end(), '\n'), 5) << *lines;
  const DdpComparison comparison = CompareWithReference(pipelined, one);
  EXPECT_TRUE(comparison.ok()) << comparison.Describe();
  std::cout << "pp=2 x dp=2 " << strategy << " vs 1 rank:\n"
            << comparison.Describe() << "\n";

  const std::string step3 = dir + "/step_00000003";
  {
    const int stages = resume_stages;
    SCOPED_TRACE(absl::StrCat("resumed at pp=", stages));
    std::vector<std::string> resume = Flags(stages, 1, stages, "1f1b");
    resume.push_back("--checkpoint_dir=" + dir);
    resume.push_back("--resume=" + step3);
    resume.push_back("--save_every=0");
    const TrainerLaunch resumed = RunTrainer(
        absl::StrCat(strategy, "_resumed_pp", stages), stages, resume);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    const DdpComparison continued = CompareResumed(resumed, 4);
    EXPECT_TRUE(continued.ok()) << continued.Describe();
    std::cout << strategy << " checkpoint resumed at pp=" << stages
              << " vs 1 rank:\n" << continued.Describe() << "\n";
  }
}

// Three launches a shard: the pp=1 resume with one strategy's checkpoint,
// the pp=4 resume with the other's.
TEST(PipelineTimesData, Zero1EqualsOneRankAndItsCheckpointResumesAtPp1OnOneRank) {
  ExpectPipelinesOfReplicasEqualOneRank("zero1", "gpipe", 1);
}

TEST(PipelineTimesData, Zero2EqualsOneRankAndItsCheckpointResumesAtPp4) {
  ExpectPipelinesOfReplicasEqualOneRank("zero2", "1f1b", 4);
}

TEST(PipelineTimesData, FsdpIsRefusedInOneLineBeforeAnyRankStarts) {
  std::vector<std::string> flags = Flags(2, 2, 2, "1f1b");
  flags.push_back("--strategy=fsdp");
  ExpectRefusedBeforeRanks("fsdp", 4, flags,
                           "--strategy=fsdp is not supported with --pp=2: ");
}

}  // namespace
}  // namespace mtb
