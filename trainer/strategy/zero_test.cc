// zero1 and zero2 on rank threads over Gloo (no process-global figure is
// checked here; the real-process equivalence is
// //trainer:sharded_process_test): one rank equals single, uneven shards at 3
// ranks equal one rank, zero1 and zero2 share a reduction path (same bits),
// counted bytes equal the closed forms, zero2 frees full gradients, and bf16
// with activation checkpointing runs.
#include "trainer/strategy/zero.h"

#include <memory>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/strategy/rank_runs.h"
#include "trainer/tests/test_config.h"

namespace mtb {
namespace {

// `stage` 0: SingleStrategy (world size 1 only); 1 or 2: ZeroStrategy.
std::vector<RankRun> Train(TrainConfig config, int world_size, int stage,
                           int64_t bucket_cap_bytes = 16 << 10) {
  config.set_strategy(stage == 0   ? TrainConfig::single
                      : stage == 1 ? TrainConfig::zero1
                                   : TrainConfig::zero2);
  return TrainOnRankThreads(
      config, world_size,
      [&](collective::Communicator* communicator) -> std::unique_ptr<Strategy> {
        if (stage == 0) return std::make_unique<SingleStrategy>();
        ZeroOptions options;
        options.stage = stage;
        options.first_bucket_cap_bytes = 8 << 10;
        options.bucket_cap_bytes = bucket_cap_bytes;
        options.grad_sync = GradSyncFromName(config.grad_sync());
        return std::make_unique<ZeroStrategy>(communicator, options);
      },
      [](Strategy& strategy, RankRun& run) {
        if (auto* zero = dynamic_cast<ZeroStrategy*>(&strategy)) {
          run.shard_numel = zero->shard_numel();
        }
      });
}

TEST(Zero, OneRankEqualsSingleBitForBitWithoutClipping) {
  for (const char* grad_sync : {"last", "every"}) {
    TrainConfig config = UnevenConfig();
    config.set_grad_accum(2);
    config.set_grad_sync(grad_sync);
    // The norms differ in the last bits (fp64 over shards vs single's
    // per-tensor fp32 norms), so clipping would scale differently.
    config.set_max_grad_norm(0);
    const std::vector<RankRun> single = Train(config, 1, 0);
    for (int stage : {1, 2}) {
      SCOPED_TRACE(absl::StrCat("zero", stage, " grad_sync ", grad_sync));
      const std::vector<RankRun> zero = Train(config, 1, stage);
      for (int step = 0; step < config.steps(); ++step) {
        EXPECT_EQ(zero[0].steps[step].loss(), single[0].steps[step].loss());
        EXPECT_NEAR(zero[0].steps[step].grad_norm(),
                    single[0].steps[step].grad_norm(),
                    1e-6 * single[0].steps[step].grad_norm());
      }
      ExpectAllEqual(zero[0].params, single[0].params, "zero vs single");
    }
  }
}

TEST(Zero, ThreeRanksWithUnevenShardsMatchOneRankOnTheGlobalBatch) {
  TrainConfig config = UnevenConfig();
  config.set_grad_accum(2);
  TrainConfig whole = config;
  whole.set_batch_size(3 * config.batch_size());
  const std::vector<RankRun> one = Train(whole, 1, 0);
  for (const auto& [stage, grad_sync] :
       {std::pair<int, const char*>{1, "last"}, {2, "every"}}) {
    SCOPED_TRACE(absl::StrCat("zero", stage, " grad_sync ", grad_sync));
    config.set_grad_sync(grad_sync);
    const std::vector<RankRun> three = Train(config, 3, stage);
    bool uneven = false;
    for (const BucketSummary& bucket : three[0].buckets) {
      uneven |= (bucket.bytes / 4) % 3 != 0;
    }
    EXPECT_TRUE(uneven) << "every bucket divides by 3: the case is not tested";
    // Shards differ by at most one element per bucket and cover the model.
    EXPECT_EQ(three[0].shard_numel + three[1].shard_numel +
                  three[2].shard_numel,
              static_cast<int64_t>([&] {
                int64_t n = 0;
                for (const at::Tensor& p : one[0].params) n += p.numel();
                return n;
              }()));
    ExpectAllEqual(three[0].params, three[1].params, "rank 0 vs rank 1");
    ExpectAllEqual(three[0].params, three[2].params, "rank 0 vs rank 2");
    for (int step = 0; step < config.steps(); ++step) {
      EXPECT_TRUE(one[0].steps[step].clipped() || step > 0);
      EXPECT_NEAR(three[0].steps[step].loss(), one[0].steps[step].loss(),
                  1e-6 * one[0].steps[step].loss());
      EXPECT_NEAR(three[0].steps[step].grad_norm(),
                  one[0].steps[step].grad_norm(),
                  1e-5 * one[0].steps[step].grad_norm());
      // Uneven shards: the reduce-scatter sends every other rank's count,
      // the gather this rank's count to 2 peers; the layer counts the same.
      EXPECT_EQ(three[0].steps[step].grad_bytes_sent(),
                three[0].steps[step].expected_grad_bytes());
      EXPECT_EQ(three[0].steps[step].param_gather_bytes_sent(),
                three[0].steps[step].expected_param_gather_bytes());
      EXPECT_EQ(three[0].steps[step].expected_param_gather_bytes(),
                2 * three[0].shard_numel * 4);
    }
    // As the DDP thread test (ddp_test.cc): the same tolerance.
    ExpectAllClose(three[0].params, one[0].params, "parameters");
  }
}

TEST(Zero, Zero1AndZero2AreBitIdenticalAtTheSameGradSync) {
  for (const char* grad_sync : {"last", "every"}) {
    SCOPED_TRACE(grad_sync);
    TrainConfig config = UnevenConfig();
    config.set_grad_accum(2);
    config.set_grad_sync(grad_sync);
    const std::vector<RankRun> zero1 = Train(config, 2, 1);
    const std::vector<RankRun> zero2 = Train(config, 2, 2);
    for (int step = 0; step < config.steps(); ++step) {
      EXPECT_EQ(zero1[0].steps[step].loss(), zero2[0].steps[step].loss());
      EXPECT_EQ(zero1[0].steps[step].grad_norm(),
                zero2[0].steps[step].grad_norm());
    }
    ExpectAllEqual(zero1[0].params, zero2[0].params, "zero1 vs zero2");
    ExpectAllEqual(zero1[1].params, zero2[1].params, "zero1 vs zero2");
    // zero2 keeps only its shard: no full gradient survives the step.
    EXPECT_FALSE(zero2[0].any_gradient_defined);
    EXPECT_TRUE(zero1[0].any_gradient_defined);
  }
}

// Counted bytes equal the per-step closed forms, n = 2 dividing every
// bucket: reduce-scatter (n-1)/n * 4 * S * P with S syncs per step, gather
// (n-1)/n * 4 * P. This catches a missing or an extra collective, not a wrong
// formula: both sides use the same byte model.
TEST(Zero, CountedBytesPerStepEqualTheClosedForms) {
  TrainConfig config = TinyConfig();  // d_model 32: every size is even
  config.set_steps(2);
  int64_t parameters = 0;
  for (int k : {1, 2}) {
    for (const char* grad_sync : {"last", "every"}) {
      for (int stage : {1, 2}) {
        SCOPED_TRACE(absl::StrCat("zero", stage, " K ", k, " ", grad_sync));
        config.set_grad_accum(k);
        config.set_grad_sync(grad_sync);
        const std::vector<RankRun> two = Train(config, 2, stage);
        parameters = 0;
        for (const at::Tensor& p : two[0].params) parameters += p.numel();
        const int syncs = std::string(grad_sync) == "every" ? k : 1;
        for (const RankRun& run : two) {
          for (const StepRecord& step : run.steps) {
            EXPECT_EQ(step.grad_syncs(), syncs);
            EXPECT_EQ(step.grad_bytes_sent(), syncs * parameters * 4 / 2);
            EXPECT_EQ(step.expected_grad_bytes(), step.grad_bytes_sent());
            EXPECT_EQ(step.param_gather_bytes_sent(), parameters * 4 / 2);
            EXPECT_EQ(step.expected_param_gather_bytes(),
                      step.param_gather_bytes_sent());
          }
        }
      }
    }
  }
}

// bf16 autocast (fp32 master weights and state) and activation checkpointing
// under zero2: checkpointing changes nothing, bit for bit.
TEST(Zero, Bf16WithActivationCheckpointingChangesNothingUnderZero2) {
  TrainConfig config = UnevenConfig();
  config.set_precision(TrainConfig::bf16);
  config.set_grad_accum(2);
  config.set_grad_sync("every");
  const std::vector<RankRun> plain = Train(config, 2, 2);
  config.set_activation_checkpointing(true);
  const std::vector<RankRun> checkpointed = Train(config, 2, 2);
  for (int step = 0; step < config.steps(); ++step) {
    EXPECT_TRUE(std::isfinite(plain[0].steps[step].loss()));
    EXPECT_EQ(plain[0].steps[step].loss(), checkpointed[0].steps[step].loss());
  }
  ExpectAllEqual(plain[0].params, checkpointed[0].params, "checkpointing");
}

// The walked bytes at the end of a step (StepRecord.held_*): single holds
// 16P; zero1 4P of parameters and gradients and its state shard; zero2 only
// its gradient shard. Exact: these are the tensors' own sizes.
TEST(Zero, HeldBytesAreTheShardsEachStageKeeps) {
  TrainConfig config = TinyConfig();
  config.set_steps(1);
  config.set_grad_accum(2);
  config.set_grad_sync("every");
  const std::vector<RankRun> single = Train(config, 1, 0);
  int64_t p = 0;
  for (const at::Tensor& t : single[0].params) p += t.numel();
  const StepRecord& s = single[0].steps[0];
  EXPECT_EQ(s.held_parameter_bytes(), 4 * p);
  EXPECT_EQ(s.held_gradient_bytes(), 4 * p);
  EXPECT_EQ(s.held_optimizer_state_bytes(), 8 * p);
  for (int stage : {1, 2}) {
    SCOPED_TRACE(stage);
    const std::vector<RankRun> two = Train(config, 2, stage);
    for (const RankRun& run : two) {
      const StepRecord& step = run.steps[0];
      const int64_t shard = run.shard_numel;
      EXPECT_EQ(step.held_parameter_bytes(), 4 * p);
      // zero1 under every keeps its own shard buffer beside the full
      // gradient; zero2 only the shard.
      EXPECT_EQ(step.held_gradient_bytes(),
                stage == 1 ? 4 * p + 4 * shard : 4 * shard);
      EXPECT_EQ(step.held_optimizer_state_bytes(), 8 * shard);
      // The staging copies and reduce-scatter outputs are gone.
      EXPECT_EQ(step.held_collective_bytes(), 0);
    }
  }
}

TEST(Zero, Zero2WithGradSyncLastSaysItKeepsFullGradients) {
  ZeroOptions options;
  options.stage = 2;
  options.grad_sync = GradSync::kLast;
  EXPECT_NE(ZeroStrategy(nullptr, options)
                .Describe()
                .find("keeps full gradients across micro-batches"),
            std::string::npos);
  options.grad_sync = GradSync::kEvery;
  EXPECT_EQ(ZeroStrategy(nullptr, options)
                .Describe()
                .find("keeps full gradients"),
            std::string::npos);
}

}  // namespace
}  // namespace mtb
