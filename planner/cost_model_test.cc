#include "planner/cost_model.h"

#include <vector>

#include "gtest/gtest.h"

namespace mtb::planner {
namespace {

TEST(CostModel, RingAllReduceIsTwoNMinusOneLatenciesPlusItsBusBytes) {
  // 4 ranks, 1 MB, 10 us per step, 10 GB/s: 6 steps and 2 * 3/4 MB.
  const LinkCost link{10e-6, 10e9};
  const double expected = 10e-6 * 6 + (2.0 * 3 / 4 * 1e6) / 10e9;
  EXPECT_DOUBLE_EQ(CollectiveSeconds(Collective::kAllReduce, 1000000, 4, link), expected);
  EXPECT_EQ(AlgorithmSteps(Collective::kAllReduce, 4), 6);
  EXPECT_EQ(WireBytes(Collective::kAllReduce, 1000000, 4), 1500000);
}

TEST(CostModel, GatherAndScatterMoveHalfAnAllReduce) {
  const LinkCost link{5e-6, 1e9};
  // 3 ranks, 3000 bytes: 2 steps, 2000 bytes each.
  EXPECT_DOUBLE_EQ(CollectiveSeconds(Collective::kAllGather, 3000, 3, link), 2 * 5e-6 + 2000 / 1e9);
  EXPECT_DOUBLE_EQ(CollectiveSeconds(Collective::kReduceScatter, 3000, 3, link),
                   2 * 5e-6 + 2000 / 1e9);
  EXPECT_DOUBLE_EQ(CollectiveSeconds(Collective::kSendRecv, 3000, 2, link), 5e-6 + 3000 / 1e9);
}

TEST(CostModel, OneRankMovesNothing) {
  EXPECT_EQ(CollectiveSeconds(Collective::kAllReduce, 1 << 20, 1, {1e-3, 1e9}), 0);
}

TEST(CostModel, OneFOneBBubbleIsPMinusOneOverMPlusPMinusOne) {
  // 4 stages, 8 micro-batches: 3 / 11.
  EXPECT_DOUBLE_EQ(PipelineBubbleFraction(4, 8, 1), 3.0 / 11);
  // Interleaved with 2 chunks halves the idle slots: 1.5 / 9.5.
  EXPECT_DOUBLE_EQ(PipelineBubbleFraction(4, 8, 2), 1.5 / 9.5);
  EXPECT_EQ(PipelineBubbleFraction(1, 8, 1), 0);
}

TEST(CostModel, TensorParallelRecomputationAddsTwoAllReducesPerBlock) {
  EXPECT_EQ(TensorParallelCollectivesPerBlock(false), 4);
  EXPECT_EQ(TensorParallelCollectivesPerBlock(true), 6);
  EXPECT_EQ(ActivationBytes(2, 1024, 768, 2), int64_t{2} * 1024 * 768 * 2);
}

TEST(CostModel, DdpBucketsBehindBackwardExposeOnlyWhatOutlastsIt) {
  // Backward 10 s; buckets ready at 2, 6, 10 s, each 1 s: the last ends at
  // 11 s, 1 s after the backward.
  EXPECT_DOUBLE_EQ(ExposedAfterQueue({{2, 1}, {6, 1}, {10, 1}}, 10), 1);
  // Each 5 s: they queue (2-7, 7-12, 12-17): 7 s exposed.
  EXPECT_DOUBLE_EQ(ExposedAfterQueue({{2, 5}, {6, 5}, {10, 5}}, 10), 7);
  // All launched after the backward (ready at its end): all exposed.
  EXPECT_DOUBLE_EQ(ExposedAfterQueue({{10, 1}, {10, 1}, {10, 1}}, 10), 3);
}

TEST(CostModel, Zero2ReduceScatterPerBucketHidesBehindTheRestOfBackward) {
  // ZeRO-2 runs the same queue with reduce-scatters: half the bytes of an
  // all-reduce, so a schedule that exposes 2 s of all-reduce exposes less.
  const LinkCost link{0, 1e9};
  const int64_t bucket = 4000000000;  // 4 GB per bucket, 2 ranks
  const double all_reduce = CollectiveSeconds(Collective::kAllReduce, bucket, 2, link);
  const double scatter = CollectiveSeconds(Collective::kReduceScatter, bucket, 2, link);
  EXPECT_DOUBLE_EQ(all_reduce, 4);
  EXPECT_DOUBLE_EQ(scatter, 2);
  EXPECT_DOUBLE_EQ(ExposedAfterQueue({{5, all_reduce}, {10, all_reduce}}, 10), 4);
  EXPECT_DOUBLE_EQ(ExposedAfterQueue({{5, scatter}, {10, scatter}}, 10), 2);
}

TEST(CostModel, FsdpPrefetchHidesEachGatherBehindThePreviousUnit) {
  const std::vector<double> gathers = {1, 1, 1};
  const std::vector<double> compute = {3, 0.5, 3};
  EXPECT_DOUBLE_EQ(ExposedGathers(gathers, compute, /*prefetch=*/false), 3);
  // Unit 0's gather is exposed; unit 1's hides behind 3 s; unit 2's has only
  // 0.5 s: 0.5 s exposed.
  EXPECT_DOUBLE_EQ(ExposedGathers(gathers, compute, /*prefetch=*/true), 1.5);
}

}  // namespace
}  // namespace mtb::planner
