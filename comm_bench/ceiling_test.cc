// The ceiling benchmark and how comm_bench matches rows to it.
#include "comm_bench/ceiling.h"

#include <string>

#include "comm_bench/report_files.h"
#include "comm_bench/shm_ceiling.h"
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

TEST(MatchingCeiling, ShmRowsMatchTheirShapeAndSizeAndBeatingBy10PercentIsInvalid) {
  CommBenchCeiling ceiling = Figures();
  ceiling.set_shm_processes(2);
  CommBenchShmCeilingPoint* point = ceiling.add_shm();
  point->set_op("all_to_all");
  point->set_bytes(1 << 20);
  point->set_gbps(10);
  point->set_shape("copy in (n-1)S/n, copy out (n-1)S/n");
  CommBenchRow within = Row("all_to_allv", 10.9);
  within.set_bytes(1 << 20);
  SetMatchingCeiling(ceiling, 2, &within, "shm");
  EXPECT_EQ(within.ceiling_gbps(), 10);
  EXPECT_THAT(within.ceiling_shape(), HasSubstr("shm all_to_all: copy in"));
  EXPECT_FALSE(within.ceiling_invalid());
  CommBenchRow beyond = Row("all_to_all", 11.1);
  beyond.set_bytes(1 << 20);
  SetMatchingCeiling(ceiling, 2, &beyond, "shm");
  EXPECT_TRUE(beyond.ceiling_invalid());
  // A TCP row beating the TCP ceiling is invalid too; another size or world
  // size has no shm point.
  CommBenchRow tcp = Row("all_gather", 2.3);
  SetMatchingCeiling(ceiling, 2, &tcp, "tcp");
  EXPECT_TRUE(tcp.ceiling_invalid());
  CommBenchRow other_size = Row("all_to_all", 1);
  other_size.set_bytes(4 << 20);
  SetMatchingCeiling(ceiling, 2, &other_size, "shm");
  EXPECT_EQ(other_size.ceiling_gbps(), 0);
  CommBenchRow three_ranks = Row("all_to_all", 1);
  three_ranks.set_bytes(1 << 20);
  SetMatchingCeiling(ceiling, 3, &three_ranks, "shm");
  EXPECT_EQ(three_ranks.ceiling_gbps(), 0);
}

TEST(ShmCeiling, MeasuresEveryShapeBetweenRealProcesses) {
  ShmCeilingOptions options;
  options.processes = 2;
  options.sizes = {1 << 20};
  options.ops = {"all_reduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all"};
  options.rounds = 2;
  absl::StatusOr<std::vector<CommBenchShmCeilingPoint>> points = MeasureShmCeiling(options);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 5u);
  for (const CommBenchShmCeilingPoint& point : *points) {
    EXPECT_GT(point.gbps(), 0) << point.op();
    EXPECT_LE(point.min_gbps(), point.gbps());
    EXPECT_FALSE(point.shape().empty());
  }
}

TEST(Ceiling, BadOptionsAreInvalidArgument) {
  CeilingOptions options;
  options.peers_world_size = 2;
  EXPECT_EQ(MeasureCeiling(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mtb::comm_bench
