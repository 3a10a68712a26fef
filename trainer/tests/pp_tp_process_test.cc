// Pipeline x tensor parallelism with real processes (docs/pipeline.md,
// "With tensor parallelism"), the refusal: a world that holds no whole
// pp x tp mesh is refused in one line before any rank starts (a launcher
// invocation that starts no rank).
//
// Where the rest of pp x tp is proven, to keep rank launches few (each costs
// about as much as the training it runs): pp=2 x tp=2 (SP, 1F1B, dropout)
// equal to one rank with real processes is pp_process_test's (it shares
// that test's one-rank reference); both schedules, pp x dp x tp under zero1
// and zero2 and the planted faults are
// //trainer/pipeline:pp_tp_training_test's, and a pp=2 x tp=2 checkpoint
// resumed at pp=1 x tp=1 on one rank
// //trainer/pipeline:pipeline_training_test's (rank threads).
#include <string>
#include <vector>

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
