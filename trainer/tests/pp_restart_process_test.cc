// Faults under pipeline parallelism with real processes (docs/pipeline.md
// "Faults and restarts"): a hang (rank 1, the last stage, in the backward of
// step 2 of pp=2) is named by rank 0's collective timeout, as in the normal
// loop (trainer_hang_test). One launch; the other shards run none.
//
// Where the rest is proven, to keep rank launches few (each costs about as
// much as the training it runs): a stage SIGKILLed and restarted by
// --max_restarts, equal to one rank bit for bit, is pp_process_test's (it
// shares that test's one-rank reference); a resume that leaves the last
// stage's AdamW step count unloaded (the negative) and a NaN on stage 0
// stopping every rank as a deterministic failure (exit 3) are
// //trainer/pipeline:pipeline_training_test's (rank threads, the same
// Checkpointer and fault hooks).
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/tests/ddp_process_check.h"

namespace mtb {
namespace {

constexpr int kStages = 2;

// pp=2 under 1F1B at one micro-batch, `steps` steps.
std::vector<std::string> Flags(int steps) {
  std::vector<std::string> flags = TinyDdpFlags();
  flags.push_back(absl::StrCat("--batch_size=", kTinyGlobalBatch));
  flags.push_back(absl::StrCat("--steps=", steps));
  flags.push_back(absl::StrCat("--pp=", kStages));
  flags.push_back("--pp_schedule=1f1b");
  flags.push_back("--pp_microbatches=1");
  return flags;
}

TEST(PipelineRestart, AHungStageIsNamedByTheCollectiveTimeout) {
  std::vector<std::string> flags = Flags(2);
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
