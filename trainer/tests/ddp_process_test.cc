// DDP with real processes: the trainer binary launches 2, 3 and 4 ranks of
// itself (common/launch) that train over Gloo on 127.0.0.1, and each result
// is compared with one rank on the same global batch (CompareWithReference:
// losses, gradient norms, ranks equal, parameters per tensor; tolerances in
// trainer/tests/ddp_process_check.cc). Also: gradient accumulation with
// --grad_sync=last vs every, and a NaN injected on one rank. That the
// comparison fails when the synchronisation is broken is
// //trainer:sync_fault_process_test.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/tests/ddp_process_check.h"
#include "trainer/train_result.pb.h"

namespace mtb {
namespace {

TEST(Ddp, NRanksMatchOneRankOnGlobalBatch) {
  std::vector<std::string> one_flags = TinyDdpFlags();
  one_flags.push_back(absl::StrCat("--batch_size=", kTinyGlobalBatch));
  const TrainerLaunch one = RunTrainer("one_rank", 1, one_flags);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_EQ(one.result.run_context().world_size(), 1);
  ASSERT_GE(one.result.strategy().buckets_size(), 3);

  for (int n : {2, 3, 4}) {
    SCOPED_TRACE(absl::StrCat(n, " ranks"));
    std::vector<std::string> flags = TinyDdpFlags();
    flags.push_back(absl::StrCat("--batch_size=", kTinyGlobalBatch / n));
    const TrainerLaunch many = RunTrainer(absl::StrCat("ranks_", n), n, flags);
    ASSERT_EQ(many.exit_code, 0) << many.output;
    EXPECT_EQ(many.result.run_context().world_size(), n);
    EXPECT_EQ(many.result.run_context().backend(), "gloo");
    EXPECT_EQ(many.result.model().tokens_per_step(),
              one.result.model().tokens_per_step());
    // Per-rank peak memory, counted in each rank's own process.
    ASSERT_EQ(many.result.memory_size(), n);
    for (const RankMemory& memory : many.result.memory()) {
      EXPECT_TRUE(memory.counted());
      EXPECT_GT(memory.peak_bytes(), 0);
    }

    const DdpComparison comparison = CompareWithReference(many, one);
    EXPECT_TRUE(comparison.ok()) << comparison.Describe();
    std::cout << n << " ranks vs 1:\n" << comparison.Describe() << "\n";

    // Bytes each step: every bucket's all-reduce, counted by the collective
    // layer (floor per bucket) vs the closed form over the whole gradient.
    const int64_t buckets = many.result.strategy().buckets_size();
    for (const StepRecord& step : many.result.runs(0).steps()) {
      EXPECT_EQ(step.grad_syncs(), 1);
      EXPECT_GT(step.grad_bytes_sent(), 0);
      EXPECT_LE(step.grad_bytes_sent(), step.expected_grad_bytes());
      EXPECT_GE(step.grad_bytes_sent(), step.expected_grad_bytes() - buckets);
    }
  }
}

TEST(Ddp, GradSyncLastAndEveryGiveCloseParametersAndExpectedBytes) {
  std::vector<std::string> flags = TinyDdpFlags();
  flags.push_back("--batch_size=2");
  flags.push_back("--grad_accum=3");
  std::vector<std::string> last_flags = flags, every_flags = flags;
  last_flags.push_back("--grad_sync=last");
  every_flags.push_back("--grad_sync=every");
  const TrainerLaunch last = RunTrainer("sync_last", 2, last_flags);
  const TrainerLaunch every = RunTrainer("sync_every", 2, every_flags);
  ASSERT_EQ(last.exit_code, 0) << last.output;
  ASSERT_EQ(every.exit_code, 0) << every.output;
  const int64_t gradient_bytes = last.result.strategy().gradient_bytes();
  for (int s = 0; s < 5; ++s) {
    const StepRecord& a = last.result.runs(0).steps(s);
    const StepRecord& b = every.result.runs(0).steps(s);
    // Two ranks: 2(n-1)/n = 1, so exactly the gradient bytes per sync.
    EXPECT_EQ(a.grad_syncs(), 1);
    EXPECT_EQ(a.grad_bytes_sent(), gradient_bytes);
    EXPECT_EQ(a.expected_grad_bytes(), gradient_bytes);
    EXPECT_EQ(b.grad_syncs(), 3);
    EXPECT_EQ(b.grad_bytes_sent(), 3 * gradient_bytes);
    EXPECT_EQ(b.expected_grad_bytes(), 3 * gradient_bytes);
    EXPECT_NEAR(a.loss(), b.loss(), kDdpLossRtol * a.loss());
  }
  DdpComparison comparison;
  CompareParameters(every.rank_parameters[0], last.rank_parameters[0],
                    last.manifest, "grad_sync every vs last", &comparison);
  EXPECT_TRUE(comparison.ok()) << comparison.Describe();
  std::cout << comparison.Describe() << "\n";
}

TEST(Ddp, NanOnOneRankStopsEveryRankAtThatStepAndIsNotRestarted) {
  std::vector<std::string> flags = TinyDdpFlags();
  flags.push_back("--batch_size=4");
  flags.push_back("--fault=nan:rank=1,step=3");
  // A non-finite loss would only happen again: every rank exits 3
  // (kExitDeterministicFailure) and the launcher does not restart it.
  flags.push_back("--max_restarts=1");
  const TrainerLaunch launch = RunTrainer("nan", 3, flags);
  // The ranks agree on 3: the launcher passes it on.
  EXPECT_EQ(launch.exit_code, 3) << launch.output;
  EXPECT_NE(launch.output.find(") exited with code 3"), std::string::npos)
      << launch.output;
  EXPECT_NE(launch.output.find("launch: not restarting: exit code 3 is a "
                               "deterministic failure"),
            std::string::npos)
      << launch.output;
  EXPECT_EQ(launch.output.find("launch: restarting"), std::string::npos)
      << launch.output;
  const std::string error =
      "trainer: step 3 of 5: the loss is not finite on rank 1 (nan) and the "
      "gradient norm (nan) is not finite (injected by --fault=nan:rank=1,step=3); "
      "every rank stopped before the optimizer update";
  // One verdict for the job: rank 0 says it, the others (which decided the
  // same, collectively) stay quiet.
  EXPECT_NE(launch.output.find(absl::StrCat("[rank 0] ", error)), std::string::npos)
      << launch.output;
  for (int rank = 1; rank < 3; ++rank) {
    EXPECT_EQ(launch.output.find(absl::StrCat("[rank ", rank, "] ", error)), std::string::npos)
        << "rank " << rank << " repeated the verdict:\n"
        << launch.output;
  }
  EXPECT_NE(launch.output.find("step 2/5 | loss"), std::string::npos);
  EXPECT_EQ(launch.output.find("step 3/5 | loss"), std::string::npos)
      << "step 3 completed";
  EXPECT_FALSE(ReadFileToString(LaunchDirectory("nan") + "/result.json").ok())
      << "a failed run wrote a result";
}

}  // namespace
}  // namespace mtb
