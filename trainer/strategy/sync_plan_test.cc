// The device-independent ddp / zero1 plan (sync_plan.h): its buckets are the
// CPU strategies' buckets, its shards cover every element once, and a
// strategy that does nothing but run the plan's collective sequences on raw
// float buffers (what the CUDA trainer does on device memory) trains
// bit for bit as the CPU trainer's DdpStrategy and ZeroStrategy (zero1) at
// 2, 3 and 4 rank threads over Gloo. Negative case: a plan that skips a
// bucket does not.
#include "trainer/strategy/sync_plan.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "trainer/model/model.h"
#include "trainer/model/optimizer.h"
#include "trainer/model/state_pieces.h"
#include "trainer/run/strategy.h"
#include "trainer/strategy/bucket_engine.h"
#include "trainer/strategy/ddp.h"
#include "trainer/strategy/rank_runs.h"
#include "trainer/strategy/scalars.h"
#include "trainer/strategy/zero.h"
#include "trainer/tests/test_config.h"

namespace mtb {
namespace {

constexpr int64_t kFirstCap = 8 << 10;
constexpr int64_t kCap = 16 << 10;

TEST(SyncPlan, BucketsAreTheCpuEnginesAndShardsCoverEveryElementOnce) {
  ModelShape shape;
  shape.vocab_size = 37;
  shape.d_model = 20;
  shape.n_layers = 3;
  shape.n_heads = 4;
  shape.seq_len = 8;
  const GptModel model(shape, /*seed=*/1);
  const ParameterStore& store = model.store();
  const std::vector<GradientBucket> engine = AssignGradientBuckets(store, kFirstCap, kCap);
  std::vector<int64_t> numels;
  for (int index : store.layout()) numels.push_back(store.parameters()[index].tensor.numel());
  for (int world : {1, 2, 3, 4}) {
    SCOPED_TRACE(absl::StrCat("world ", world));
    const SyncPlan plan = MakeSyncPlan(numels, world, kFirstCap, kCap);
    ASSERT_EQ(plan.buckets.size(), engine.size());
    ASSERT_GT(plan.buckets.size(), 2u);
    EXPECT_EQ(plan.numel, store.numel());
    for (size_t b = 0; b < engine.size(); ++b) {
      EXPECT_EQ(plan.buckets[b].offset, engine[b].offset);
      EXPECT_EQ(plan.buckets[b].numel, engine[b].numel);
      std::vector<int> parameters;
      for (int position : plan.buckets[b].tensors) {
        parameters.push_back(store.layout()[position]);
      }
      EXPECT_EQ(parameters, engine[b].parameters);
      EXPECT_EQ(plan.buckets[b].counts, EvenCounts(engine[b].numel, world));
    }
    // Every element is updated by exactly one rank, the one OwnerOf names.
    std::vector<int> owner(plan.numel, -1);
    int64_t shards = 0;
    for (int r = 0; r < world; ++r) {
      for (const PlanRange& range : plan.UpdateRanges(r)) {
        for (int64_t e = range.offset; e < range.offset + range.numel; ++e) {
          EXPECT_EQ(owner[e], -1) << "element " << e << " updated twice";
          owner[e] = r;
        }
      }
      shards += plan.ShardNumel(r);
    }
    EXPECT_EQ(shards, plan.numel);
    for (int64_t e = 0; e < plan.numel; e += 7) EXPECT_EQ(plan.OwnerOf(e), owner[e]) << e;
    EXPECT_EQ(plan.OwnerOf(plan.numel), -1);
  }
}

// The plan's collectives on host buffers, over common/collective.
class HostCollectives final : public SyncCollectives {
 public:
  explicit HostCollectives(collective::Communicator* communicator)
      : communicator_(communicator) {}
  int rank() const override { return communicator_->rank(); }
  absl::Status AllReduceAverage(float* data, int64_t numel) override {
    return communicator_->AllReduce(Floats(data, numel), collective::ReduceOp::kAvg);
  }
  absl::Status ReduceScatterAverage(const float* bucket, float* shard,
                                    const std::vector<int64_t>& counts) override {
    return communicator_->ReduceScatterV(Floats(const_cast<float*>(bucket), Sum(counts)),
                                         Floats(shard, counts[rank()]), counts,
                                         collective::ReduceOp::kAvg);
  }
  absl::Status AllGatherInPlace(float* bucket, const std::vector<int64_t>& counts) override {
    int64_t start = 0;
    for (int p = 0; p < rank(); ++p) start += counts[p];
    return communicator_->AllGatherV(Floats(bucket + start, counts[rank()]),
                                     Floats(bucket, Sum(counts)), counts);
  }

 private:
  static at::Tensor Floats(float* data, int64_t numel) {
    return at::from_blob(data, {numel}, at::TensorOptions().dtype(at::kFloat));
  }
  static int64_t Sum(const std::vector<int64_t>& counts) {
    int64_t sum = 0;
    for (int64_t c : counts) sum += c;
    return sum;
  }
  collective::Communicator* communicator_;
};

// A strategy that is nothing but the plan: gradients synchronised after
// backward by RunDdpSync (ddp) or reduce-scattered, updated on this rank's
// UpdateRanges and gathered (zero1), with the CPU trainer's own AdamW and
// norms. `skip_bucket` >= 0: that bucket is left out of the plan (the
// negative case).
class PlanStrategy final : public Strategy {
 public:
  PlanStrategy(collective::Communicator* communicator, bool zero1, int skip_bucket)
      : communicator_(communicator), collectives_(communicator), zero1_(zero1),
        skip_bucket_(skip_bucket) {}

  StrategySummary Summary() const override {
    StrategySummary summary{zero1_ ? "zero1" : "ddp", "the sync plan alone", {}};
    for (const PlanBucket& bucket : plan_.buckets) {
      BucketSummary s;
      s.parameters = static_cast<int>(bucket.tensors.size());
      s.bytes = bucket.numel * 4;
      s.first_parameter = store_->parameters()[store_->layout()[bucket.tensors.front()]].name;
      s.last_parameter = store_->parameters()[store_->layout()[bucket.tensors.back()]].name;
      summary.buckets.push_back(s);
    }
    return summary;
  }
  collective::Communicator* communicator() const override { return communicator_; }

  absl::Status Setup(ParameterStore& store, const AdamWOptions& options) override {
    store_ = &store;
    store.AttachGradients();
    std::vector<int64_t> numels;
    for (int index : store.layout()) numels.push_back(store.parameters()[index].tensor.numel());
    plan_ = MakeSyncPlan(numels, communicator_->world_size(), kFirstCap, kCap);
    if (skip_bucket_ >= 0) plan_.buckets.erase(plan_.buckets.begin() + skip_bucket_);
    std::vector<FlatAdamW::Range> ranges;
    if (zero1_) {
      for (const PlanRange& r : plan_.UpdateRanges(communicator_->rank())) {
        ranges.push_back({r.offset, r.numel});
      }
      shard_grads_ = at::zeros({plan_.ShardNumel(communicator_->rank())});
    } else {
      ranges.push_back({0, store.numel()});
    }
    optimizer_ = std::make_unique<FlatAdamW>(store, ranges, options, kOptimizerPieceElements);
    return absl::OkStatus();
  }
  void ZeroGradients() override { store_->ZeroGradients(); }
  absl::Status BeforeBackward(int, int, ReductionMode) override { return absl::OkStatus(); }
  absl::Status AfterBackward(ReductionMode) override {
    at::NoGradGuard no_grad;
    float* grads = store_->flat_gradients().data_ptr<float>();
    if (!zero1_) return RunDdpSync(plan_, collectives_, grads);
    return RunZero1ReduceScatter(plan_, collectives_, grads, shard_grads_.data_ptr<float>());
  }
  absl::StatusOr<double> GlobalGradNorm() override {
    if (!zero1_) return GradNorm(store_->parameters());
    double sum = 0;
    for (const auto& [range, grad] : Shards()) sum += store_->SquaredNormCounted(grad, range.offset);
    absl::StatusOr<double> total =
        ReduceScalarOverRanks(communicator_, sum, ScalarReduction::kSum, "zero1");
    if (!total.ok()) return total.status();
    return std::sqrt(*total);
  }
  absl::Status OptimizerStep(double lr, double gradient_scale) override {
    at::NoGradGuard no_grad;
    if (!zero1_) {
      if (gradient_scale != 1) store_->flat_gradients().mul_(gradient_scale);
      optimizer_->Step(lr, {store_->flat_gradients()});
      return absl::OkStatus();
    }
    std::vector<at::Tensor> grads;
    for (const auto& [range, grad] : Shards()) {
      if (gradient_scale != 1) grad.mul_(gradient_scale);
      grads.push_back(grad);
    }
    optimizer_->Step(lr, grads);
    return RunZero1Gather(plan_, collectives_, store_->flat_parameters().data_ptr<float>());
  }
  StepCommunication TakeStepCommunication() override { return {}; }
  HeldMemory Held() const override { return {}; }
  std::vector<StatePiece> CheckpointPieces(CheckpointUse) override { return {}; }
  absl::Status FinishCheckpointLoad() override { return absl::OkStatus(); }
  std::vector<ExactGroup> ExactGroups() override { return {}; }

 private:
  // zero1: this rank's (range, shard gradient view) per non-empty shard.
  std::vector<std::pair<PlanRange, at::Tensor>> Shards() const {
    std::vector<std::pair<PlanRange, at::Tensor>> shards;
    int64_t at = 0;
    for (const PlanRange& range : plan_.UpdateRanges(communicator_->rank())) {
      shards.push_back({range, shard_grads_.narrow(0, at, range.numel)});
      at += range.numel;
    }
    return shards;
  }

  collective::Communicator* communicator_;
  HostCollectives collectives_;
  bool zero1_;
  int skip_bucket_;
  ParameterStore* store_ = nullptr;
  SyncPlan plan_;
  std::unique_ptr<FlatAdamW> optimizer_;
  at::Tensor shard_grads_;
};

enum class Kind { kCpuDdp, kCpuZero1, kPlanDdp, kPlanZero1 };

std::vector<RankRun> Train(const TrainConfig& base, int world, Kind kind,
                           int skip_bucket = -1) {
  TrainConfig config = base;
  const bool zero1 = kind == Kind::kCpuZero1 || kind == Kind::kPlanZero1;
  config.set_strategy(zero1 ? TrainConfig::zero1 : TrainConfig::ddp);
  return TrainOnRankThreads(
      config, world, [&](collective::Communicator* c) -> std::unique_ptr<Strategy> {
        switch (kind) {
          case Kind::kCpuDdp: {
            DdpOptions options;
            options.first_bucket_cap_bytes = kFirstCap;
            options.bucket_cap_bytes = kCap;
            return std::make_unique<DdpStrategy>(c, options);
          }
          case Kind::kCpuZero1: {
            ZeroOptions options;
            options.stage = 1;
            options.first_bucket_cap_bytes = kFirstCap;
            options.bucket_cap_bytes = kCap;
            return std::make_unique<ZeroStrategy>(c, options);
          }
          default:
            return std::make_unique<PlanStrategy>(c, zero1, skip_bucket);
        }
      });
}

bool AllEqual(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!at::equal(a[i], b[i])) return false;
  }
  return true;
}

void ExpectSameRuns(const std::vector<RankRun>& plan, const std::vector<RankRun>& cpu) {
  ASSERT_EQ(plan.size(), cpu.size());
  for (size_t r = 0; r < plan.size(); ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    ASSERT_EQ(plan[r].steps.size(), cpu[r].steps.size());
    for (size_t s = 0; s < plan[r].steps.size(); ++s) {
      EXPECT_EQ(plan[r].steps[s].loss(), cpu[r].steps[s].loss()) << "step " << s;
      EXPECT_EQ(plan[r].steps[s].grad_norm(), cpu[r].steps[s].grad_norm()) << "step " << s;
      EXPECT_EQ(plan[r].steps[s].clipped(), cpu[r].steps[s].clipped()) << "step " << s;
    }
    ExpectAllEqual(plan[r].params, cpu[r].params, "plan vs cpu strategy");
    ASSERT_EQ(plan[r].buckets.size(), cpu[r].buckets.size());
    for (size_t b = 0; b < plan[r].buckets.size(); ++b) {
      EXPECT_EQ(plan[r].buckets[b].bytes, cpu[r].buckets[b].bytes) << b;
      EXPECT_EQ(plan[r].buckets[b].parameters, cpu[r].buckets[b].parameters) << b;
      EXPECT_EQ(plan[r].buckets[b].first_parameter, cpu[r].buckets[b].first_parameter) << b;
      EXPECT_EQ(plan[r].buckets[b].last_parameter, cpu[r].buckets[b].last_parameter) << b;
    }
  }
}

// Sizes 3 does not divide (uneven shards), clipping active.
TrainConfig Config() {
  TrainConfig config = UnevenConfig();
  config.set_steps(2);
  return config;
}

TEST(SyncPlan, DdpPlanEqualsTheCpuDdpStrategyBitForBit) {
  for (int world : {2, 3, 4}) {
    SCOPED_TRACE(absl::StrCat("world ", world));
    ExpectSameRuns(Train(Config(), world, Kind::kPlanDdp), Train(Config(), world, Kind::kCpuDdp));
  }
}

TEST(SyncPlan, Zero1PlanEqualsTheCpuZero1StrategyBitForBit) {
  for (int world : {2, 3, 4}) {
    SCOPED_TRACE(absl::StrCat("world ", world));
    ExpectSameRuns(Train(Config(), world, Kind::kPlanZero1),
                   Train(Config(), world, Kind::kCpuZero1));
  }
}

// The negative case: a plan that leaves one bucket out trains differently
// (that bucket's gradients stay local, or its shard is never updated
// everywhere), so the comparisons above can fail.
TEST(SyncPlan, APlanMissingABucketDiffers) {
  const std::vector<RankRun> cpu = Train(Config(), 2, Kind::kCpuDdp);
  const std::vector<RankRun> ddp = Train(Config(), 2, Kind::kPlanDdp, /*skip_bucket=*/1);
  EXPECT_FALSE(AllEqual(ddp[0].params, cpu[0].params));
  const std::vector<RankRun> zero_cpu = Train(Config(), 2, Kind::kCpuZero1);
  const std::vector<RankRun> zero = Train(Config(), 2, Kind::kPlanZero1, /*skip_bucket=*/0);
  EXPECT_FALSE(AllEqual(zero[1].params, zero_cpu[1].params));
}

}  // namespace
}  // namespace mtb
