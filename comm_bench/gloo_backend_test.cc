// comm_bench over the real collective layer: N ranks as threads, each with
// its own Communicator over Gloo on 127.0.0.1 (//common/collective:test_util).
#include "comm_bench/gloo_backend.h"

#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "comm_bench/harness.h"
#include "common/collective/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb::comm_bench {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

SweepOptions SmallSweep() {
  SweepOptions options;
  options.ops = CollectiveNames();
  options.min_bytes = 1024;
  options.max_bytes = 64 << 10;
  options.step_factor = 8;
  options.iters = 2;
  options.warmup_iters = 1;
  options.all_to_allv.skew = {Skew::Kind::kZipf, 1.0};
  return options;
}

// Rank 0's result of the sweep over `world_size` Gloo ranks.
CommBenchResult SweepOverGloo(int world_size, const SweepOptions& options) {
  absl::Mutex mutex;
  CommBenchResult rank_zero;
  absl::Status launched = collective::RunRanksAsThreads(
      world_size, [&](collective::Communicator& communicator) {
        std::unique_ptr<Backend> backend = NewGlooBackend(communicator);
        absl::StatusOr<CommBenchResult> result = RunSweep(*backend, options, nullptr);
        ASSERT_TRUE(result.ok()) << result.status();
        if (communicator.rank() == 0) {
          absl::MutexLock lock(&mutex);
          rank_zero = *std::move(result);
        }
      });
  EXPECT_TRUE(launched.ok()) << launched;
  return rank_zero;
}

class GlooEveryOp : public ::testing::TestWithParam<int> {};

TEST_P(GlooEveryOp, CheckReportsZeroWrongForEveryOpTypeAndReduction) {
  const int world_size = GetParam();
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (RedOp redop : {RedOp::kSum, RedOp::kMax}) {
      SweepOptions options = SmallSweep();
      options.dtype = dtype;
      options.redop = redop;
      options.root = world_size - 1;
      const CommBenchResult result = SweepOverGloo(world_size, options);
      EXPECT_EQ(result.verdict(), "pass")
          << DTypeName(dtype) << " " << RedOpName(redop);
      EXPECT_EQ(result.rows_size(), 3 * (4 * 2 + 2));
      for (const CommBenchRow& row : result.rows()) {
        EXPECT_EQ(row.wrong(), 0) << row.op() << " " << row.placement() << " "
                                  << row.bytes() << " " << row.dtype();
        EXPECT_EQ(row.emulated(), dtype == DType::kBFloat16);
        EXPECT_FALSE(row.algorithm().empty()) << row.op();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TwoAndThreeRanks, GlooEveryOp, ::testing::Values(2, 3));

TEST(GlooBackend, OutOfPlaceAllReduceSaysItCopiesFirst) {
  SweepOptions options = SmallSweep();
  options.ops = {"all_reduce", "broadcast"};
  const CommBenchResult result = SweepOverGloo(2, options);
  for (const CommBenchRow& row : result.rows()) {
    if (row.placement() == "out_of_place") {
      EXPECT_THAT(row.algorithm(), StartsWith("copy+gloo_")) << row.op();
    } else {
      EXPECT_THAT(row.algorithm(), StartsWith("gloo_")) << row.op();
    }
  }
}

TEST(GlooBackend, ACorruptedResultIsWrongAndFailsTheRun) {
  SweepOptions options = SmallSweep();
  options.ops = {"reduce_scatter"};
  options.corrupt_op = "reduce_scatter";
  options.corrupt_rank = 2;
  const CommBenchResult result = SweepOverGloo(3, options);
  EXPECT_EQ(VerdictExitCode(result), 1);
  EXPECT_THAT(result.verdict(), HasSubstr("reduce_scatter: 6 wrong elements in 6 rows"));
}

TEST(GlooBackend, AllToAllvWithEmptyBlocksAndAnIdleRank) {
  SweepOptions options = SmallSweep();
  options.ops = {"all_to_allv"};
  // Rank 2 sends nothing; rank 0 receives only from rank 1; rank 0 sends
  // nothing to itself.
  options.all_to_allv.matrix_bytes = SplitMatrix{{0, 400, 8}, {4, 4, 4}, {0, 0, 0}};
  const CommBenchResult result = SweepOverGloo(3, options);
  EXPECT_EQ(result.verdict(), "pass");
  ASSERT_EQ(result.rows_size(), 1);
  EXPECT_EQ(result.rows(0).bottleneck_rank(), 0);
  EXPECT_EQ(result.rows(0).bytes(), 408);
}

}  // namespace
}  // namespace mtb::comm_bench
