#include "common/collective/traffic.h"

#include "gtest/gtest.h"

namespace mtb::collective {
namespace {

void ExpectTraffic(Traffic actual, int64_t sent, int64_t received) {
  EXPECT_EQ(actual.sent, sent);
  EXPECT_EQ(actual.received, received);
}

TEST(Traffic, AllReduceOfTwelveFloatsOnThreeRanksIs64BytesEachWay) {
  // S = 12 * 4 = 48; 2 * (3-1)/3 * 48 = 64.
  ExpectTraffic(AllReduceTraffic(48, 3), 64, 64);
}

TEST(Traffic, AllReduceRoundsDownWhenWorldSizeDoesNotDivide) {
  // 2 * 2/3 * 40 = 53.33.
  ExpectTraffic(AllReduceTraffic(40, 3), 53, 53);
}

TEST(Traffic, SingleRankMovesNothing) {
  ExpectTraffic(AllReduceTraffic(48, 1), 0, 0);
  ExpectTraffic(AllGatherTraffic(48, 1), 0, 0);
  ExpectTraffic(ReduceScatterTraffic(48, 1), 0, 0);
  ExpectTraffic(AllToAllTraffic(48, 1), 0, 0);
  ExpectTraffic(BroadcastTraffic(48, 1, 0, 0), 0, 0);
  ExpectTraffic(AllGatherVTraffic({5}, 8, 0), 0, 0);
  ExpectTraffic(ReduceScatterVTraffic({5}, 8, 0), 0, 0);
  ExpectTraffic(AllToAllVTraffic({5}, {5}, 8, 0), 0, 0);
}

TEST(Traffic, GatherScatterAndAllToAllMoveAllButOwnShare) {
  // S = 48 bytes on 4 ranks: 3/4 * 48 = 36.
  ExpectTraffic(AllGatherTraffic(48, 4), 36, 36);
  ExpectTraffic(ReduceScatterTraffic(48, 4), 36, 36);
  ExpectTraffic(AllToAllTraffic(48, 4), 36, 36);
}

TEST(Traffic, BroadcastRootSendsAndOthersReceive) {
  ExpectTraffic(BroadcastTraffic(48, 3, 1, 1), 48, 0);
  ExpectTraffic(BroadcastTraffic(48, 3, 0, 1), 0, 48);
}

TEST(Traffic, UnevenVariantsCountExactRowsToAndFromOthers) {
  // counts {1, 0, 4} rows of 8 bytes on 3 ranks.
  ExpectTraffic(AllGatherVTraffic({1, 0, 4}, 8, 0), 16, 32);
  ExpectTraffic(AllGatherVTraffic({1, 0, 4}, 8, 1), 0, 40);
  ExpectTraffic(AllGatherVTraffic({1, 0, 4}, 8, 2), 64, 8);
  // counts {2, 0, 3}.
  ExpectTraffic(ReduceScatterVTraffic({2, 0, 3}, 8, 0), 24, 32);
  ExpectTraffic(ReduceScatterVTraffic({2, 0, 3}, 8, 1), 40, 0);
  ExpectTraffic(ReduceScatterVTraffic({2, 0, 3}, 8, 2), 16, 48);
  // Rank 1 sends {1, 3, 0} and receives {0, 3, 2}: its own 3 rows stay.
  ExpectTraffic(AllToAllVTraffic({1, 3, 0}, {0, 3, 2}, 8, 1), 8, 16);
}

TEST(Traffic, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kBroadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CollectiveOp::kBarrier, 4), 0.0);
}

TEST(Traffic, OpNamesAreStable) {
  EXPECT_EQ(CollectiveOpName(CollectiveOp::kAllReduce), "all_reduce");
  EXPECT_EQ(CollectiveOpName(CollectiveOp::kAllToAllV), "all_to_allv");
  EXPECT_EQ(CollectiveOpName(CollectiveOp::kReduceScatterV),
            "reduce_scatter_v");
}

}  // namespace
}  // namespace mtb::collective
