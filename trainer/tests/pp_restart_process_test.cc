// Faults and restarts under pipeline parallelism with real processes
// (docs/pipeline.md "Faults and restarts"): pp=2 (1F1B, two micro-batches)
// saving every second step of five.
//  - Rank 1 (the last stage) SIGKILLed by --fault=kill in the backward of
//    step 4 with --max_restarts=1: the launcher restarts both ranks with
//    --resume=latest, the restart resumes from step 2 and the job's steps
//    3..5 (losses, norms) and final parameters equal the uninterrupted run's
//    bit for bit (the same schedule and layout resume exactly); the restart
//    history names the kill, the resume point and the step lost.
//  - The negative: the same restart with --testonly_pp_resume_without_step
//    (the last stage does not load AdamW's step count, which the checkpoint
//    holds once, from stage 0) equals the uninterrupted run at step 3 (its
//    loss precedes the first update after the resume) and differs from
//    step 4 on and in the parameters.
//  - A hang (rank 1 in the backward of step 3) is named by rank 0's
//    collective timeout, as in the normal loop (trainer_hang_test).
//  - A NaN on stage 0, which has no loss of its own: every rank stops at
//    that step, exit 3, rank 0's verdict names the injected fault.
// One test per shard; the first two share a (per-shard) reference launch.
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/tests/ddp_process_check.h"
#include "trainer/train_result.pb.h"

namespace mtb {
namespace {

constexpr int kStages = 2;

std::vector<std::string> Flags(const std::string& checkpoint_dir) {
  std::vector<std::string> flags = TinyDdpFlags();
  flags.push_back(absl::StrCat("--batch_size=", kTinyGlobalBatch));
  flags.push_back(absl::StrCat("--pp=", kStages));
  flags.push_back("--pp_schedule=1f1b");
  flags.push_back("--pp_microbatches=2");
  if (!checkpoint_dir.empty()) {
    flags.push_back("--checkpoint_dir=" + checkpoint_dir);
    flags.push_back("--save_every=2");
  }
  return flags;
}

// The uninterrupted run: saves after steps 2, 4 and 5.
const TrainerLaunch& Uninterrupted() {
  static const TrainerLaunch* reference = new TrainerLaunch(RunTrainer(
      "uninterrupted", kStages, Flags(LaunchDirectory("uninterrupted_ckpt"))));
  return *reference;
}

// Rank 1 killed in the backward of step 4 and restarted once; `extra`
// appended.
TrainerLaunch KilledAndRestarted(const std::string& name,
                                 const std::vector<std::string>& extra = {}) {
  const std::string dir = LaunchDirectory(name + "_ckpt");
  std::vector<std::string> flags = Flags(dir);
  flags.push_back("--max_restarts=1");
  flags.push_back("--fault=kill:rank=1,step=4,phase=backward");
  flags.insert(flags.end(), extra.begin(), extra.end());
  TrainerLaunch launch = RunTrainer(name, kStages, flags);
  EXPECT_EQ(launch.exit_code, 0) << launch.output;
  for (const std::string& said :
       {std::string("--fault=kill:rank=1,step=4,phase=backward: killing this "
                    "rank"),
        std::string("launch: restarting all 2 ranks (restart 1 of 1) with "
                    "--resume=latest"),
        absl::StrCat("resumed from ", dir, "/step_00000002")}) {
    EXPECT_NE(launch.output.find(said), std::string::npos)
        << said << "\n" << launch.output;
  }
  return launch;
}

TEST(PipelineRestart, AKilledStageRestartsFromTheLatestCheckpointBitForBit) {
  const TrainerLaunch& reference = Uninterrupted();
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const TrainerLaunch restarted = KilledAndRestarted("restarted");
  ASSERT_EQ(restarted.exit_code, 0);
  // The final attempt trained steps 3..5.
  const TrainRun& ref = reference.result.runs(0);
  const TrainRun& got = restarted.result.runs(0);
  ASSERT_EQ(ref.steps_size(), 5);
  ASSERT_EQ(got.steps_size(), 3);
  for (int i = 0; i < 3; ++i) {
    const StepRecord& expected = ref.steps(2 + i);
    const StepRecord& actual = got.steps(i);
    EXPECT_EQ(actual.step(), expected.step());
    EXPECT_EQ(actual.loss_bits(), expected.loss_bits()) << "step " << actual.step();
    EXPECT_EQ(actual.grad_norm(), expected.grad_norm()) << "step " << actual.step();
    EXPECT_EQ(actual.lr(), expected.lr()) << "step " << actual.step();
  }
  ASSERT_EQ(restarted.rank_parameters.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(at::equal(restarted.rank_parameters[rank],
                          reference.rank_parameters[rank]))
        << "rank " << rank << "'s gathered model";
  }
  const RestartHistory& history = restarted.result.restarts();
  EXPECT_EQ(history.restarts(), 1);
  EXPECT_EQ(history.max_restarts(), 1);
  ASSERT_EQ(history.attempts_size(), 2);
  EXPECT_NE(history.attempts(0).ended().find("was killed by SIGKILL"),
            std::string::npos)
      << history.attempts(0).ended();
  EXPECT_EQ(history.attempts(0).last_completed_step(), 3);
  EXPECT_EQ(history.attempts(1).resumed_step(), 2);
  EXPECT_EQ(history.steps_lost(), 1);
}

TEST(PipelineRestart, AResumeWithoutTheStageStepCountDiffers) {
  const TrainerLaunch& reference = Uninterrupted();
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const TrainerLaunch broken = KilledAndRestarted(
      "without_step", {"--testonly_pp_resume_without_step"});
  ASSERT_EQ(broken.exit_code, 0);
  const TrainRun& ref = reference.result.runs(0);
  const TrainRun& got = broken.result.runs(0);
  ASSERT_EQ(got.steps_size(), 3);
  EXPECT_EQ(got.steps(0).loss_bits(), ref.steps(2).loss_bits())
      << "step 3's loss precedes the first update after the resume";
  EXPECT_NE(got.steps(1).loss_bits(), ref.steps(3).loss_bits()) << "step 4";
  EXPECT_NE(got.steps(2).loss_bits(), ref.steps(4).loss_bits()) << "step 5";
  ASSERT_EQ(broken.rank_parameters.size(), 2u);
  EXPECT_FALSE(at::equal(broken.rank_parameters[0], reference.rank_parameters[0]));
}

TEST(PipelineRestart, AHungStageIsNamedByTheCollectiveTimeout) {
  std::vector<std::string> flags = Flags("");
  flags.push_back("--steps=3");
  flags.push_back("--fault=hang:rank=1,step=3,phase=backward");
  flags.push_back("--collective_timeout=3s");
  flags.push_back("--heartbeat_timeout=0");
  const TrainerLaunch hung =
      RunTrainer("hang", kStages, flags, /*dump_parameters=*/false);
  EXPECT_EQ(hung.exit_code, 1) << hung.output;
  for (const std::string& said :
       {std::string("--fault=hang:rank=1,step=3,phase=backward: this rank "
                    "stops making progress"),
        // Stage 0 waits for the gradient of micro-batch 0 (6 x 16 x 96).
        std::string("[rank 0] trainer: recv #"),
        std::string("(float32, 9216 elements, from rank 1) on rank 0 of 2 "
                    "failed after timeout 3s")}) {
    EXPECT_NE(hung.output.find(said), std::string::npos)
        << said << "\n" << hung.output;
  }
}

TEST(PipelineRestart, ANanOnAStageWithoutALossStopsEveryRank) {
  std::vector<std::string> flags = Flags("");
  flags.push_back("--steps=3");
  flags.push_back("--fault=nan:rank=0,step=2");
  const TrainerLaunch stopped =
      RunTrainer("nan", kStages, flags, /*dump_parameters=*/false);
  EXPECT_EQ(stopped.exit_code, 3) << stopped.output;
  EXPECT_NE(stopped.output.find("[rank 0] trainer: step 2: the loss (nan)"),
            std::string::npos)
      << stopped.output;
  EXPECT_NE(stopped.output.find("(injected by --fault=nan:rank=0,step=2)"),
            std::string::npos)
      << stopped.output;
}

}  // namespace
}  // namespace mtb
