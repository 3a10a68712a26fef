#include "planner/calibrate.h"

#include <string>

#include "common/results/json_io.h"
#include "gtest/gtest.h"
#include "planner/cluster.h"
#include "planner/predict.h"

namespace mtb::planner {
namespace {

// A sweep whose times follow t = 6 x 20 us + wire / 2 GB/s exactly (4 ranks:
// a ring all-reduce has 6 steps and sends 1.5 S).
comm_bench::CommBenchResult ExactSweep() {
  comm_bench::CommBenchResult result;
  result.mutable_options()->set_world_size(4);
  result.mutable_options()->set_backend("gloo");
  result.mutable_context()->set_git_commit("abc123");
  for (int64_t bytes : {int64_t{1} << 20, int64_t{4} << 20, int64_t{16} << 20}) {
    comm_bench::CommBenchRow* row = result.add_rows();
    row->set_op("all_reduce");
    row->set_bytes(bytes);
    row->set_placement("out_of_place");
    row->set_time_us(6 * 20.0 + 1.5 * bytes / 2e9 * 1e6);
  }
  return result;
}

TEST(Calibrate, FitRecoversLatencyAndBandwidthOfAnExactSweep) {
  const std::vector<CollectiveFit> fits = FitCommBench(ExactSweep(), "s.json", "intra");
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_EQ(fits[0].collective(), "all_reduce");
  EXPECT_EQ(fits[0].transport(), "tcp");
  EXPECT_EQ(fits[0].world_size(), 4);
  EXPECT_EQ(fits[0].min_bytes(), 1 << 20);
  EXPECT_EQ(fits[0].max_bytes(), 0);
  EXPECT_NEAR(fits[0].latency_us().value(), 20, 1e-6);
  EXPECT_NEAR(fits[0].bandwidth_gbps().value(), 2, 1e-9);
  EXPECT_NE(fits[0].bandwidth_gbps().source().find("measured: s.json @ abc123"), std::string::npos);
}

TEST(Calibrate, SizesSplitIntoRangesAndOneSizeIsNoFit) {
  comm_bench::CommBenchResult result = ExactSweep();
  comm_bench::CommBenchRow* small = result.add_rows();
  small->set_op("all_reduce");
  small->set_bytes(1024);
  small->set_placement("out_of_place");
  small->set_time_us(300);
  // One size below 64 KiB: no fit there; the large range is unchanged.
  const std::vector<CollectiveFit> fits = FitCommBench(result, "s.json", "intra");
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_NEAR(fits[0].bandwidth_gbps().value(), 2, 1e-9);
}

TrainResult OneRankRun(int world_size) {
  TrainResult result;
  result.mutable_run_context()->set_world_size(world_size);
  result.mutable_run_context()->set_cpu_cores(2);
  result.mutable_config()->set_precision(TrainConfig::fp32);
  result.mutable_config()->set_d_model(128);
  result.mutable_model()->set_flops_per_token(3e6);
  result.mutable_model()->set_tokens_per_step(512);
  result.mutable_model()->set_parameter_count(1000000);
  TrainRun* run = result.add_runs();
  for (int i = 0; i < 3; ++i) {
    StepRecord* step = run->add_steps();
    step->set_timed(i > 0);  // the first is warm-up
    step->set_step_ms(i > 0 ? 100 : 999);
    step->set_optimizer_ms(20);
  }
  return result;
}

TEST(Calibrate, ComputeRateIsModelFlopsOverTheNonOptimizerTime) {
  const absl::StatusOr<ComputeRate> rate = RateFromTrainResult(OneRankRun(1), "t.json");
  ASSERT_TRUE(rate.ok()) << rate.status();
  EXPECT_EQ(rate->d_model(), 128);
  EXPECT_NEAR(rate->flops_per_second().value(), 3e6 * 512 / 0.080, 1e-3);
  const absl::StatusOr<Sourced> bandwidth =
      OptimizerBandwidthFromTrainResult(OneRankRun(1), "t.json");
  ASSERT_TRUE(bandwidth.ok());
  EXPECT_NEAR(bandwidth->value(), kOptimizerBytesPerParameter * 1e6 / 0.020 / 1e9, 1e-9);
}

TEST(Calibrate, TwoRankDdpRunGivesThePerRankRateAtTwoRanksPerNode) {
  TrainResult result = OneRankRun(2);
  result.mutable_config()->set_strategy(TrainConfig::ddp);
  const absl::StatusOr<ComputeRate> rate = RateFromTrainResult(result, "t.json");
  ASSERT_TRUE(rate.ok()) << rate.status();
  EXPECT_EQ(rate->ranks_per_node(), 2);
  // tokens_per_step counts both ranks: each computed half.
  EXPECT_NEAR(rate->flops_per_second().value(), 3e6 * 256 / 0.080, 1e-3);
  EXPECT_EQ(OptimizerBandwidthFromTrainResult(result, "t.json").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Calibrate, MultiRankRunOfAnotherStrategyIsInvalidArgument) {
  TrainResult result = OneRankRun(2);
  result.mutable_config()->set_strategy(TrainConfig::zero2);
  const absl::Status status = RateFromTrainResult(result, "t.json").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--trainer=t.json ran zero2 on 2 ranks"), std::string::npos)
      << status;
}

TEST(Calibrate, RealSweepsAndRunsMakeAValidCluster) {
  CalibrateOptions options;
  options.name = "fixture";
  options.comm_bench_files = {"planner/testdata/comm_bench_2ranks.json",
                              "planner/testdata/comm_bench_4ranks.json"};
  options.trainer_files = {"planner/testdata/trainer_tiny_fp32.json"};
  options.host_memory_bytes = int64_t{8} << 30;
  options.host_memory_source = "test";
  const absl::StatusOr<Cluster> cluster = Calibrate(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_TRUE(ValidateCluster(*cluster, "calibrated").ok());
  EXPECT_GE(cluster->collectives_size(), 3);
  EXPECT_EQ(cluster->compute_size(), 1);
  for (const CollectiveFit& fit : cluster->collectives()) {
    EXPECT_GT(fit.bandwidth_gbps().value(), 0);
    EXPECT_NE(fit.bandwidth_gbps().source().find("comm_bench_"), std::string::npos);
  }
  options.trainer_files = {};
  EXPECT_EQ(Calibrate(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace mtb::planner
