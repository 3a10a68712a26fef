#include "planner/predict.h"

#include <string>

#include "common/report/report.h"
#include "gtest/gtest.h"
#include "planner/cluster.h"
#include "planner/cost_model.h"
#include "planner/memory.h"
#include "planner/model.h"
#include "planner/search.h"
#include "trainer/memory/memory_estimate.h"

namespace mtb::planner {
namespace {

// The hand cluster: fp32 1e10 FLOP/s, memory 10 GB/s, intra-node
// collectives 10 us + 1 GB/s.
Cluster HandCluster() { return *ReadClusterFile("planner/testdata/hand_cluster.json"); }

// tiny: V 512, d 128, L 2, T 64: P = 512*128 + 64*128 + 2*128 + 2 (12*128^2
// + 13*128) = 470528; flops/token 6 (P - 64*128) + 12*2*64*128 = 2970624.
ModelSpec Tiny() { return *NamedModel("tiny"); }

Layout TinyLayout(const std::string& strategy, int dp) {
  Layout layout = DefaultLayout();
  layout.set_strategy(strategy);
  layout.set_dp(dp);
  layout.set_micro_batch(8);
  return layout;
}

TEST(Model, TinyHasTheStrategyMatrixParameterCountAndFlops) {
  EXPECT_EQ(Tiny().parameters(), 470528);
  EXPECT_DOUBLE_EQ(Tiny().flops_per_token(), 2970624);
  EXPECT_EQ(NamedModel("gpt2-124m")->parameters(), 124439808);
}

TEST(Predict, OneRankIsComputePlusTheOptimizerByHand) {
  const absl::StatusOr<Prediction> p = Predict(Tiny(), TinyLayout("ddp", 1), HandCluster());
  ASSERT_TRUE(p.ok()) << p.status();
  const double t_f = 2970624.0 / 3 * 8 * 64 / 1e10;
  const double optimizer = 32.0 * 470528 / 10e9;
  EXPECT_NEAR(p->step().step_s(), 3 * t_f + optimizer, 1e-12);
  EXPECT_EQ(p->step().exposed_comm_s(), 0);
  EXPECT_NEAR(p->tokens_per_second(), 8 * 64 / (3 * t_f + optimizer), 1e-6);
  // MFU against the 2e10 peak.
  EXPECT_NEAR(p->mfu(), 2970624.0 * p->tokens_per_second() / 2e10, 1e-12);
}

TEST(Predict, DdpLaunchedAfterBackwardExposesEveryBucketByHand) {
  Layout layout = TinyLayout("ddp", 2);
  layout.set_ddp_launch_after_backward(true);
  const absl::StatusOr<Prediction> p = Predict(Tiny(), layout, HandCluster());
  ASSERT_TRUE(p.ok()) << p.status();
  // 1882112 gradient bytes: buckets of 1 MB and 833536 bytes; a 2-rank ring
  // all-reduce sends S in 2 steps of 10 us at 1 GB/s.
  const double expected = (1048576 + 2 * 10e3) / 1e9 + (833536 + 2 * 10e3) / 1e9;
  EXPECT_NEAR(p->step().dp_exposed_s(), expected, 1e-12);
  EXPECT_NEAR(p->step().dp_comm_s(), expected, 1e-12);
}

TEST(Predict, DdpOverlapHidesAllButTheLastBucket) {
  // tiny with 8 blocks: P = 73984 + 8 * 198272 = 1660160, 6640640 gradient
  // bytes. The first bucket (1 MB) fills with blocks 7 and 6, ready a quarter
  // into the backward; the second (5592064 bytes) only at its end.
  const ModelSpec model = *ModelFromShape("tiny8", 512, 128, 8, 4, 64);
  const absl::StatusOr<Prediction> p = Predict(model, TinyLayout("ddp", 2), HandCluster());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_NEAR(p->step().dp_exposed_s(), (5592064 + 2 * 10e3) / 1e9, 1e-12);
  EXPECT_NEAR(p->step().dp_comm_s(), (6640640 + 4 * 10e3) / 1e9, 1e-12);
  // The tiny model's two blocks finish with the backward: nothing hides.
  const absl::StatusOr<Prediction> two = Predict(Tiny(), TinyLayout("ddp", 2), HandCluster());
  EXPECT_NEAR(two->step().dp_exposed_s(), two->step().dp_comm_s(), 1e-12);
}

TEST(Predict, PipelineBubbleIsOneFOneBFraction) {
  Layout layout = TinyLayout("ddp", 1);
  layout.set_pp(2);
  layout.set_micro_batches(4);
  const absl::StatusOr<Prediction> p = Predict(Tiny(), layout, HandCluster());
  ASSERT_TRUE(p.ok()) << p.status();
  const StepBreakdown& s = p->step();
  EXPECT_NEAR(s.bubble_s() / (s.forward_s() + s.backward_s() + s.bubble_s()),
              PipelineBubbleFraction(2, 4, 1), 1e-12);
  EXPECT_GT(s.pp_comm_s(), 0);
}

TEST(Predict, LayoutThatDoesNotDivideTheModelIsInvalidArgument) {
  Layout layout = TinyLayout("ddp", 1);
  layout.set_pp(3);
  absl::Status status = Predict(Tiny(), layout, HandCluster()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--n_layers=2 is not divisible by pp 3"), std::string::npos)
      << status;
  layout.set_pp(1);
  layout.set_tp(8);
  status = Predict(Tiny(), layout, HandCluster()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--n_heads=4 is not divisible by tp 8"), std::string::npos)
      << status;
  layout.set_tp(1);
  layout.set_dp(16);
  status = Predict(Tiny(), layout, HandCluster()).status();
  EXPECT_NE(status.message().find("16 ranks exceeds the cluster's 8 devices"), std::string::npos)
      << status;
}

TEST(Memory, PlannerAndEstimateMemoryAgreeForEveryStrategy) {
  for (const char* strategy : {"ddp", "zero1", "zero2", "fsdp"}) {
    const Layout layout = TinyLayout(strategy, 2);
    const MemoryPrediction planned = PredictMemory(Tiny(), layout, 1 << 30);
    TrainConfig config = TrainerConfigFor(Tiny(), layout);
    const MemoryEstimate estimate = EstimateRankMemoryFor(config, 2, *ParseStrategy(strategy));
    EXPECT_EQ(planned.total(), estimate.total()) << strategy;
    EXPECT_EQ(planned.activations(), estimate.activations()) << strategy;
    // What --estimate_memory prints for this strategy's row.
    config.set_grad_sync("auto");
    const std::string table = RenderMemoryEstimates(config, 2);
    const size_t row = table.find(std::string("| ") + strategy + " (");
    ASSERT_NE(row, std::string::npos) << table;
    const std::string line = table.substr(row, table.find('\n', row) - row);
    EXPECT_NE(line.find(FormatByteAmount(static_cast<double>(planned.total())) + " |"),
              std::string::npos)
        << strategy << ": " << line;
  }
}

TEST(Memory, ZeroThreeAtFourRanksByHand) {
  Layout layout = TinyLayout("fsdp", 4);
  const MemoryPrediction m = PredictMemory(Tiny(), layout, 1 << 30);
  // Shard 470528 / 4 = 117632; root unit 73984; block unit 198272.
  const int64_t shard = 117632, root = 73984, unit = 198272;
  EXPECT_EQ(m.parameters(), (shard + root + unit) * 4);
  EXPECT_EQ(m.gradients(), (shard + root + unit) * 4);
  EXPECT_EQ(m.optimizer_state(), 2 * shard * 4);
  EXPECT_EQ(m.collective_staging(), 2 * unit * 4);
  // Per block 16 B T d + 2 B h T^2 values, 2 blocks, + 2 B T d; logits 3 B T V.
  const int64_t block = 16 * 8 * 64 * 128 + 2 * 8 * 4 * 64 * 64;
  EXPECT_EQ(m.activations(), (2 * block + 2 * 8 * 64 * 128) * 4);
  EXPECT_EQ(m.logits(), 3 * 8 * 64 * 512 * 4);
  // And it shrinks as 16 P / N: 8 ranks hold less state than 4.
  layout.set_dp(8);
  EXPECT_LT(PredictMemory(Tiny(), layout, 1 << 30).optimizer_state(), m.optimizer_state());
}

TEST(Memory, TensorAndPipelineShareScaleTheState) {
  const ModelSpec model = *NamedModel("gpt2-350m");
  Layout layout = DefaultLayout();
  const MemoryPrediction whole = PredictMemory(model, layout, 0);
  layout.set_tp(2);
  layout.set_pp(2);
  layout.set_micro_batches(4);
  layout.set_sequence_parallel(true);
  const MemoryPrediction quarter = PredictMemory(model, layout, 0);
  // Root / 2 + (L / 2) blocks / 2 of P.
  const double share = static_cast<double>(RankParameters(model, layout)) / model.parameters();
  EXPECT_NEAR(static_cast<double>(quarter.optimizer_state()), whole.optimizer_state() * share, 1.0);
  // First stage: 2 micro-batches in flight of half the blocks, split by tp.
  EXPECT_NEAR(static_cast<double>(quarter.activations()), whole.activations() / 2.0 * 2 / 2, 1.0);
  EXPECT_FALSE(quarter.fits());
}

TEST(Search, ModelThatFitsNowhereIsInvalidArgument) {
  SearchOptions options;
  options.model = *NamedModel("gpt3-175b");
  options.global_batch = 8;
  const absl::Status status = Search(options, HandCluster()).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("fits no layout of 8 ranks"), std::string::npos) << status;
}

TEST(Search, RanksFittingLayoutsByTokensPerSecond) {
  SearchOptions options;
  options.model = Tiny();
  options.global_batch = 32;
  const absl::StatusOr<PlannerResult> result = Search(options, HandCluster());
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_GE(result->predictions_size(), 2);
  EXPECT_GE(result->predictions(0).tokens_per_second(), result->predictions(1).tokens_per_second());
  EXPECT_TRUE(result->predictions(0).memory().fits());
  EXPECT_GT(result->layouts_considered(), result->predictions_size());
}

}  // namespace
}  // namespace mtb::planner
