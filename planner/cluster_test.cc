#include "planner/cluster.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace mtb::planner {
namespace {

const char kHandCluster[] = "planner/testdata/hand_cluster.json";

TEST(Cluster, HandClusterFileReadsAndLooksUpRatesAndLinks) {
  absl::StatusOr<Cluster> cluster = ReadClusterFile(kHandCluster);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_EQ(TotalDevices(*cluster), 8);
  EXPECT_EQ(*FlopsRate(*cluster, "bf16", 768), 2e10);
  EXPECT_EQ(*PeakFlopsRate(*cluster, "fp32"), 2e10);
  absl::StatusOr<LinkCost> inter = LinkFor(*cluster, Collective::kAllReduce, "inter", 1 << 20);
  ASSERT_TRUE(inter.ok());
  EXPECT_DOUBLE_EQ(inter->latency_s, 50e-6);
  EXPECT_DOUBLE_EQ(inter->bandwidth_bytes_per_s, 0.5e9);
  // No send_recv fit inside a node: the scope's other fits stand in.
  absl::StatusOr<LinkCost> intra_send = LinkFor(*cluster, Collective::kSendRecv, "intra", 1 << 20);
  ASSERT_TRUE(intra_send.ok());
  EXPECT_DOUBLE_EQ(intra_send->bandwidth_bytes_per_s, 1e9);
}

TEST(Cluster, NearestWidthAndSizeRangeWin) {
  Cluster cluster = *ReadClusterFile(kHandCluster);
  ComputeRate* narrow = cluster.add_compute();
  narrow->set_precision("fp32");
  narrow->set_d_model(128);
  narrow->mutable_flops_per_second()->set_value(3e9);
  narrow->mutable_flops_per_second()->set_source("stated: test");
  ComputeRate* wide = cluster.add_compute();
  *wide = *narrow;
  wide->set_d_model(1024);
  wide->mutable_flops_per_second()->set_value(9e9);
  EXPECT_EQ(*FlopsRate(cluster, "fp32", 160), 3e9);
  EXPECT_EQ(*FlopsRate(cluster, "fp32", 900), 9e9);
  CollectiveFit* large = cluster.add_collectives();
  *large = cluster.collectives(0);
  large->set_min_bytes(1 << 20);
  cluster.mutable_collectives(0)->set_max_bytes((1 << 20) - 1);
  large->mutable_bandwidth_gbps()->set_value(4);
  EXPECT_EQ(LinkFor(cluster, Collective::kAllReduce, "intra", 4 << 20)->bandwidth_bytes_per_s, 4e9);
  EXPECT_EQ(LinkFor(cluster, Collective::kAllReduce, "intra", 1024)->bandwidth_bytes_per_s, 1e9);
  // A fit measured at the group's size wins over one at another size.
  large->set_world_size(2);
  CollectiveFit* at_four = cluster.add_collectives();
  *at_four = *large;
  at_four->set_world_size(4);
  at_four->mutable_bandwidth_gbps()->set_value(0.25);
  EXPECT_EQ(LinkFor(cluster, Collective::kAllReduce, "intra", 4 << 20, 4)->bandwidth_bytes_per_s,
            0.25e9);
  EXPECT_EQ(LinkFor(cluster, Collective::kAllReduce, "intra", 4 << 20, 2)->bandwidth_bytes_per_s,
            4e9);
}

TEST(Cluster, MissingFieldIsInvalidArgumentNamingIt) {
  Cluster cluster = *ReadClusterFile(kHandCluster);
  cluster.clear_devices_per_node();
  const absl::Status status = ValidateCluster(cluster, "c.json");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("c.json: devices_per_node is missing"), std::string::npos)
      << status;
}

TEST(Cluster, NumberWithoutSourceIsInvalidArgument) {
  Cluster cluster = *ReadClusterFile(kHandCluster);
  cluster.mutable_collectives(2)->mutable_bandwidth_gbps()->clear_source();
  const absl::Status status = ValidateCluster(cluster, "c.json");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("collectives[2].bandwidth_gbps.source is empty"),
            std::string::npos)
      << status;
}

TEST(Cluster, NoFitForAScopeIsInvalidArgument) {
  Cluster cluster = *ReadClusterFile(kHandCluster);
  cluster.clear_collectives();
  const absl::StatusOr<LinkCost> link = LinkFor(cluster, Collective::kAllReduce, "inter", 1);
  EXPECT_EQ(link.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(link.status().message().find("no collective fit with scope inter"), std::string::npos);
}

TEST(Cluster, FileWithAnUnknownFieldIsInvalidArgumentNamingThePath) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/bad_cluster.json";
  std::ofstream(path) << "{\"schema_version\": 1, \"gpus\": 8}";
  const absl::StatusOr<Cluster> cluster = ReadClusterFile(path);
  EXPECT_EQ(cluster.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cluster.status().message().find("--cluster=" + path), std::string::npos)
      << cluster.status();
}

}  // namespace
}  // namespace mtb::planner
