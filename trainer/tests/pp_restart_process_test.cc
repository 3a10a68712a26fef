// Faults and restarts under pipeline parallelism with real processes
// (docs/pipeline.md "Faults and restarts"): pp=2 under 1F1B at one
// micro-batch, where a pipelined run is one rank's bit for bit
// (trainer/pipeline/pipeline_training.h says why), clipped from step 1 on.
//  - Rank 1 (the last stage) SIGKILLed by --fault=kill in the backward of
//    step 4 of 4, saving every second step, with --max_restarts=1: the
//    launcher restarts both ranks with --resume=latest, the restart resumes
//    from step 2, and the job's steps 3 and 4 (loss bits, norms, rates) and
//    both ranks' final parameters equal one rank's uninterrupted run bit for
//    bit: the same schedule and layout resume exactly, and a pipelined run is
//    one rank here, so this is also the pp=2 process run equal to one rank.
//    The restart history names the kill, the resume point and the step lost.
//    The negative (a resume that leaves the last stage's AdamW step count
//    unloaded differs from step 4 on) is
//    //trainer/pipeline:pipeline_training_test's, on rank threads through
//    the same Checkpointer.
//  - A hang (rank 1 in the backward of step 2) is named by rank 0's
//    collective timeout, as in the normal loop (trainer_hang_test).
// One test per shard (two shards run none): a launch costs more than the
// training it runs, so each case is one launch (the restart's reference,
// one rank, is a second). A NaN on stage 0, which has no loss of its own,
// stopping every rank as a deterministic failure (exit 3) is
// //trainer/pipeline:pipeline_training_test's (rank threads, the same
// fault hooks).
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
constexpr int kSteps = 4;

// One rank (`stages` 1) or the pipeline, `steps` steps.
std::vector<std::string> Flags(int stages, int steps) {
  std::vector<std::string> flags = TinyDdpFlags();
  flags.push_back(absl::StrCat("--batch_size=", kTinyGlobalBatch));
  flags.push_back(absl::StrCat("--steps=", steps));
  flags.push_back("--max_grad_norm=0.5");  // clipped from step 1 on
  if (stages > 1) {
    flags.push_back(absl::StrCat("--pp=", stages));
    flags.push_back("--pp_schedule=1f1b");
    flags.push_back("--pp_microbatches=1");
  }
  return flags;
}

TEST(PipelineRestart, AKilledStageRestartsFromTheLatestCheckpointBitForBit) {
  const TrainerLaunch one = RunTrainer("one_rank", 1, Flags(1, kSteps));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const std::string dir = LaunchDirectory("restarted_ckpt");
  std::vector<std::string> flags = Flags(kStages, kSteps);
  flags.push_back("--checkpoint_dir=" + dir);
  flags.push_back("--save_every=2");
  flags.push_back("--max_restarts=1");
  flags.push_back("--fault=kill:rank=1,step=4,phase=backward");
  const TrainerLaunch restarted = RunTrainer("restarted", kStages, flags);
  ASSERT_EQ(restarted.exit_code, 0) << restarted.output;
  for (const std::string& said :
       {std::string("--fault=kill:rank=1,step=4,phase=backward: killing this "
                    "rank"),
        std::string("launch: restarting all 2 ranks (restart 1 of 1) with "
                    "--resume=latest"),
        absl::StrCat("resumed from ", dir, "/step_00000002")}) {
    EXPECT_NE(restarted.output.find(said), std::string::npos)
        << said << "\n" << restarted.output;
  }
  // The final attempt trained steps 3 and 4.
  const TrainRun& ref = one.result.runs(0);
  const TrainRun& got = restarted.result.runs(0);
  ASSERT_EQ(ref.steps_size(), kSteps);
  ASSERT_EQ(got.steps_size(), 2);
  int clipped = 0;
  for (int i = 0; i < 2; ++i) {
    const StepRecord& expected = ref.steps(2 + i);
    const StepRecord& actual = got.steps(i);
    EXPECT_EQ(actual.step(), expected.step());
    EXPECT_EQ(actual.loss_bits(), expected.loss_bits()) << "step " << actual.step();
    EXPECT_EQ(actual.grad_norm(), expected.grad_norm()) << "step " << actual.step();
    EXPECT_EQ(actual.lr(), expected.lr()) << "step " << actual.step();
    clipped += expected.clipped();
  }
  EXPECT_EQ(clipped, 2) << "both resumed steps should clip";
  ASSERT_EQ(restarted.rank_parameters.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_TRUE(at::equal(restarted.rank_parameters[rank], one.rank_parameters[0]))
        << "rank " << rank << "'s gathered model vs one rank's";
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

TEST(PipelineRestart, AHungStageIsNamedByTheCollectiveTimeout) {
  std::vector<std::string> flags = Flags(kStages, 2);
  flags.push_back("--fault=hang:rank=1,step=2,phase=backward");
  // The steady-state timeout, from step 2 on (step 1 keeps the start-up
  // one); a step here takes ~20 ms.
  flags.push_back("--collective_timeout=2s");
  flags.push_back("--heartbeat_timeout=0");
  const TrainerLaunch hung =
      RunTrainer("hang", kStages, flags, /*dump_parameters=*/false);
  EXPECT_EQ(hung.exit_code, 1) << hung.output;
  for (const std::string& said :
       {std::string("--fault=hang:rank=1,step=2,phase=backward: this rank "
                    "stops making progress"),
        // Stage 0 waits for the gradient of its one micro-batch
        // (12 x 16 x 96).
        std::string("[rank 0] trainer: recv #"),
        std::string("(float32, 18432 elements, from rank 1) on rank 0 of 2 "
                    "failed after timeout 2s")}) {
    EXPECT_NE(hung.output.find(said), std::string::npos)
        << said << "\n" << hung.output;
  }
}

}  // namespace
}  // namespace mtb
