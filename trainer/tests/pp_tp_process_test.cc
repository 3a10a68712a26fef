// Pipeline x tensor parallelism with real processes (docs/pipeline.md,
// "With tensor parallelism"), the refusal: a world that holds no whole
// pp x tp mesh is refused in one line before any rank starts (a launcher
// invocation that starts no rank).
//
// The rest of pp x tp runs on rank threads, to keep rank launches few (a
// 4-rank launch costs more than the training it runs, and no process-global
// figure is checked): both schedules with and without sequence
// parallelism, pp x dp x tp under zero1 and zero2 and the planted faults
// (//trainer/pipeline:pp_tp_training_test); pp=2 x tp=2 with dropout equal
// to one rank and its checkpoint resumed at pp=1 x tp=1 on one rank
// (//trainer/pipeline:pipeline_training_test).
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
