// The ceiling benchmark and how comm_bench matches rows to it.
#include "comm_bench/ceiling.h"

#include <string>

#include "comm_bench/report_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb::comm_bench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

CommBenchCeiling Figures() {
  CommBenchCeiling ceiling;
  ceiling.set_tcp_one_way_gbps(4);
  ceiling.set_tcp_both_ways_gbps(2);
  ceiling.set_tcp_peers_gbps(1);
  ceiling.set_peers_world_size(3);
  return ceiling;
}

CommBenchRow Row(const std::string& op, double busbw) {
  CommBenchRow row;
  row.set_op(op);
  row.set_busbw_gbps(busbw);
  row.set_bottleneck_rank(-1);  // not all_to_allv
  return row;
}

TEST(MatchingCeiling, TwoRanksBroadcastIsOneWayAndTheRestBothWays) {
  CommBenchRow broadcast = Row("broadcast", 1);
  SetMatchingCeiling(Figures(), 2, &broadcast);
  EXPECT_EQ(broadcast.ceiling_shape(), "tcp_one_way");
  EXPECT_EQ(broadcast.ceiling_gbps(), 4);
  EXPECT_EQ(broadcast.busbw_fraction_of_ceiling(), 0.25);
  for (const char* op : {"all_reduce", "all_gather", "reduce_scatter",
                         "all_to_all", "all_to_allv"}) {
    CommBenchRow row = Row(op, 1);
    SetMatchingCeiling(Figures(), 2, &row);
    EXPECT_EQ(row.ceiling_shape(), "tcp_both_ways") << op;
    EXPECT_EQ(row.busbw_fraction_of_ceiling(), 0.5) << op;
  }
}

TEST(MatchingCeiling, ThreeRanksArePeersAndOtherSizesSaySoAndOneRankHasNone) {
  CommBenchRow three = Row("broadcast", 0.5);
  SetMatchingCeiling(Figures(), 3, &three);
  EXPECT_EQ(three.ceiling_shape(), "tcp_2_peers");
  EXPECT_EQ(three.busbw_fraction_of_ceiling(), 0.5);
  CommBenchRow four = Row("all_reduce", 0.5);
  SetMatchingCeiling(Figures(), 4, &four);
  EXPECT_EQ(four.ceiling_shape(), "tcp_2_peers (measured at 3 processes)");
  CommBenchRow one = Row("all_reduce", 0.5);
  SetMatchingCeiling(Figures(), 1, &one);
  EXPECT_EQ(one.ceiling_gbps(), 0);
  EXPECT_EQ(one.ceiling_shape(), "");
}

TEST(MatchingCeiling, MarkdownHasTheFractionColumnOnlyWithACeiling) {
  CommBenchResult result;
  CommBenchRow row = Row("all_gather", 1);
  SetMatchingCeiling(Figures(), 2, &row);
  *result.add_rows() = row;
  result.add_summaries()->set_op("all_gather");
  EXPECT_THAT(RenderMarkdown(result), Not(HasSubstr("busbw / ceiling")));
  *result.mutable_ceiling() = Figures();
  const std::string markdown = RenderMarkdown(result);
  EXPECT_THAT(markdown, HasSubstr("busbw / ceiling"));
  EXPECT_THAT(markdown, HasSubstr("50% of tcp_both_ways 2.00 GB/s"));
}

TEST(Ceiling, MeasuresEveryShapeBetweenRealProcesses) {
  CeilingOptions options;
  options.bytes = 1 << 20;
  options.rounds = 2;
  absl::StatusOr<Ceiling> ceiling = MeasureCeiling(options);
  ASSERT_TRUE(ceiling.ok()) << ceiling.status();
  EXPECT_GT(ceiling->memcpy_bytes_per_second, 0);
  EXPECT_GT(ceiling->tcp_one_way, 0);
  EXPECT_GT(ceiling->tcp_both_ways, 0);
  EXPECT_GT(ceiling->tcp_peers, 0);
  EXPECT_LE(ceiling->tcp_peers_min, ceiling->tcp_peers);
  EXPECT_LE(ceiling->tcp_peers, ceiling->tcp_peers_max);
  EXPECT_EQ(ceiling->peers_world_size, 3);
  const CommBenchCeiling proto = CeilingProto(*ceiling, options);
  EXPECT_EQ(proto.bytes(), 1 << 20);
  EXPECT_DOUBLE_EQ(proto.tcp_both_ways_gbps(), ceiling->tcp_both_ways / 1e9);
}

TEST(Ceiling, BadOptionsAreInvalidArgument) {
  CeilingOptions options;
  options.peers_world_size = 2;
  EXPECT_EQ(MeasureCeiling(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mtb::comm_bench
