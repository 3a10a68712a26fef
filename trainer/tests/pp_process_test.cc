// Pipeline parallelism with real processes: the trainer launches --pp ranks
// of itself that pass activations and gradients over Gloo, and each result is
// compared with one rank on the same global batch by CompareWithReference
// (trainer/tests/ddp_process_check.cc: losses, norms, every rank's gathered model
// equal, parameters per tensor within its derived tiers). One micro-batch is
// one rank bit for bit (trainer/pipeline/pipeline_training.h says why);
// several change the fp32 summation order only. The negative: an unsummed
// tied embedding fails the same comparison. Bad input is refused before any
// rank starts. pp x dp (with its strategies and checkpoints) is
// pp_dp_process_test's, to keep this test's launches few. One process, one
// one-rank reference, seven launches: the launches (not the training) are
// the cost, so the test is not sharded.
#include <algorithm>
#include <cstring>
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

std::vector<std::string> PipelineFlags(int stages, const std::string& schedule,
                                       int micro_batches) {
  std::vector<std::string> flags = TinyDdpFlags();
  flags.push_back(absl::StrCat("--batch_size=", kTinyGlobalBatch));
  // Clipped from step 1 on (the norms are ~1-2): the clipping coefficient,
  // computed from the pipelined norm, is part of what is compared.
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
      new TrainerLaunch(RunTrainer("one_rank", 1, PipelineFlags(1, "", 1)));
  return *reference;
}

void ExpectEqualsOneRank(int stages, const std::string& schedule,
                         int micro_batches,
                         const std::vector<std::string>& extra_flags = {}) {
  SCOPED_TRACE(absl::StrCat("pp=", stages, " ", schedule, " m=", micro_batches));
  const TrainerLaunch& one = Reference();
  ASSERT_EQ(one.exit_code, 0) << one.output;
  int clipped = 0;
  for (const StepRecord& step : one.result.runs(0).steps()) clipped += step.clipped();
  ASSERT_GE(clipped, 3) << "the reference should clip most steps";
  std::vector<std::string> flags = PipelineFlags(stages, schedule, micro_batches);
  flags.insert(flags.end(), extra_flags.begin(), extra_flags.end());
  const TrainerLaunch pipelined =
      RunTrainer(absl::StrCat("pp", stages, "_", schedule, "_m", micro_batches),
                 stages, flags);
  ASSERT_EQ(pipelined.exit_code, 0) << pipelined.output;
  EXPECT_EQ(pipelined.result.run_context().world_size(), stages);
  EXPECT_EQ(pipelined.result.model().tokens_per_step(),
            one.result.model().tokens_per_step());
  const DdpComparison comparison = CompareWithReference(pipelined, one);
  EXPECT_TRUE(comparison.ok()) << comparison.Describe();
  std::cout << "pp=" << stages << " " << schedule << " m=" << micro_batches
            << " vs 1 rank:\n" << comparison.Describe() << "\n";
  // Activations per stage (docs/pipeline.md "Memory"): the micro-batches in
  // flight are the schedule's bound (GPipe m, 1F1B min(p - s, m)), and with
  // one rank per process the bytes held at the peak are that many
  // micro-batches' (half a micro-batch either way for allocations of other
  // threads), which tells 1F1B's p on stage 0 from GPipe's m.
  ASSERT_EQ(pipelined.result.pipeline_stages_size(), stages);
  for (const PipelineStageMemory& stage : pipelined.result.pipeline_stages()) {
    SCOPED_TRACE(absl::StrCat("stage ", stage.stage()));
    EXPECT_EQ(stage.peak_in_flight(), schedule == "gpipe"
                                          ? stage.gpipe_bound()
                                          : stage.one_f_one_b_bound());
    EXPECT_EQ(stage.gpipe_bound(), micro_batches);
    EXPECT_EQ(stage.one_f_one_b_bound(),
              std::min(stages - stage.stage(), micro_batches));
    const double one = static_cast<double>(stage.micro_batch_activation_bytes());
    EXPECT_GT(one, 0) << "one rank per process: the allocator counts";
    EXPECT_NEAR(static_cast<double>(stage.peak_activation_bytes()),
                stage.peak_in_flight() * one, one / 2)
        << "one micro-batch holds " << one << " bytes";
    EXPECT_GT(stage.owned_parameters(), 0);
  }
  if (micro_batches == 1) {
    for (int s = 0; s < one.result.runs(0).steps_size(); ++s) {
      EXPECT_EQ(pipelined.result.runs(0).steps(s).loss_bits(),
                one.result.runs(0).steps(s).loss_bits())
          << "step " << s + 1;
    }
    EXPECT_TRUE(at::equal(pipelined.rank_parameters[0], one.rank_parameters[0]))
        << "one micro-batch is one rank bit for bit";
  }
}

TEST(Pipeline, TwoStagesEqualOneRankUnderBothSchedules) {
  ExpectEqualsOneRank(2, "gpipe", 1);
  ExpectEqualsOneRank(2, "1f1b", 3);
}

TEST(Pipeline, FourStagesEqualOneRankUnderBothSchedules) {
  // Traced too: every stage's trace has its forward and backward spans per
  // micro-batch, named by stage and micro-batch.
  const std::string traces = LaunchDirectory("pp4_traces");
  ExpectEqualsOneRank(4, "gpipe", 4, {"--trace_dir=" + traces});
  for (int stage = 0; stage < 4; ++stage) {
    absl::StatusOr<std::string> trace =
        ReadFileToString(absl::StrCat(traces, "/rank_", stage, ".trace.json"));
    ASSERT_TRUE(trace.ok()) << trace.status();
    for (const std::string& expected :
         {std::string("ProfilerStep#5"), std::string("\"forward\""),
          std::string("\"backward\""), std::string("\"micro_batch\"")}) {
      EXPECT_NE(trace->find(expected), std::string::npos)
          << "stage " << stage << ": " << expected;
    }
    // Pretty-printed or compact JSON.
    EXPECT_TRUE(
        trace->find(absl::StrCat("\"stage\": \"", stage, "\"")) !=
            std::string::npos ||
        trace->find(absl::StrCat("\"stage\":\"", stage, "\"")) !=
            std::string::npos)
        << "stage " << stage;
  }
  ExpectEqualsOneRank(4, "1f1b", 6);
}

TEST(Pipeline, UnsummedTiedEmbeddingFailsTheComparison) {
  const TrainerLaunch& one = Reference();
  ASSERT_EQ(one.exit_code, 0) << one.output;
  std::vector<std::string> flags = PipelineFlags(2, "1f1b", 2);
  flags.push_back("--testonly_pp_skip_tied_embedding_sum");
  const TrainerLaunch broken = RunTrainer("pp_untied", 2, flags);
  ASSERT_EQ(broken.exit_code, 0) << broken.output;
  const DdpComparison comparison = CompareWithReference(broken, one);
  EXPECT_TRUE(comparison.Failed(DdpCheck::kGradNorm)) << comparison.Describe();
  EXPECT_TRUE(comparison.FailedParameter("wte")) << comparison.Describe();
}

// Every refusal's wording is pipeline_config_test's; here one launch shows
// the launcher refuses in one line, exit 2, before any rank starts.
TEST(Pipeline, BadInputIsRefusedInOneLineBeforeAnyRankStarts) {
  std::vector<std::string> flags = TinyDdpFlags();
  flags.push_back(absl::StrCat("--batch_size=", kTinyGlobalBatch));
  flags.push_back("--pp=2");
  flags.push_back("--pp_microbatches=5");
  ExpectRefusedBeforeRanks("bad", 2, flags,
                           "--pp_microbatches=5 must divide --batch_size=12");
}

}  // namespace
}  // namespace mtb
