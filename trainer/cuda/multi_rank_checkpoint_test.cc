// trainer_cuda's checkpoints on several ranks, on a CPU: 2 rank threads over
// common/collective with the stand-in device model (ranks_test_util.h), ddp
// and zero1. A run saved after step 3 and resumed from `latest` equals the
// continuous run bit for bit (losses, norms, every rank's parameters); the
// checkpoint verifies, records the strategy and world size, places every
// element of every logical tensor once where the CPU trainer's strategy
// places it (ddp: rank r writes its even slice of the flat buffer; zero1:
// its shards, the plan's update ranges), and holds the run's parameters
// after step 3. The negative case: a device model that drops the loaded
// state differs after the resume.
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/plan.h"
#include "trainer/cuda/checkpoint_state.h"
#include "trainer/cuda/layout.h"
#include "trainer/cuda/ranks_test_util.h"
#include "trainer/model/model_shape.h"
#include "trainer/strategy/sync_plan.h"

namespace mtb {
namespace cuda {
namespace {

constexpr int kWorld = 2;

// A fixed schedule (decay over 6 steps), so a 3-step run trains the 6-step
// run's first 3 steps.
TrainConfig Steps(TrainConfig::Strategy strategy, int64_t steps) {
  TrainConfig config = RanksConfig(strategy, /*batch_size=*/2);
  config.set_lr_decay_steps(6);
  config.set_steps(steps);
  return config;
}

template <typename T>
std::vector<T> Tail(const std::vector<T>& all) {
  return std::vector<T>(all.begin() + 3, all.end());
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class MultiRankCheckpoint : public ::testing::TestWithParam<TrainConfig::Strategy> {
 protected:
  void SetUp() override {
    // A directory per test (each saves its own step 3).
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name) c = c == '/' ? '_' : c;
    dir_ = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
    ASSERT_TRUE(CreateDirectories(dir_).ok());
    continuous_ = RunRanks(Steps(GetParam(), 6), kWorld);
    TrainConfig first = Steps(GetParam(), 3);
    saved_ = RunRanks(first, kWorld, CheckpointPlanFor(dir_, 3, "", kWorld, &first));
    for (int r = 0; r < kWorld; ++r) {
      ASSERT_TRUE(continuous_[r].result.ok()) << continuous_[r].result.status();
      ASSERT_TRUE(saved_[r].result.ok()) << saved_[r].result.status();
      ASSERT_EQ(saved_[r].result->checkpoint().saves_size(), 1);
    }
  }
  std::vector<RankOutcome> Resume(bool drop_loaded_state) {
    TrainConfig rest = Steps(GetParam(), 6);
    const checkpoint::CheckpointPlan plan = CheckpointPlanFor(dir_, 0, "latest", kWorld, &rest);
    EXPECT_EQ(plan.start_step, 3);
    return RunRanks(rest, kWorld, plan, drop_loaded_state);
  }
  std::string dir_;
  std::vector<RankOutcome> continuous_, saved_;
};

TEST_P(MultiRankCheckpoint, SaveThenResumeEqualsTheContinuousRunBitForBit) {
  const std::vector<RankOutcome> resumed = Resume(/*drop_loaded_state=*/false);
  for (int r = 0; r < kWorld; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    ASSERT_TRUE(resumed[r].result.ok()) << resumed[r].result.status();
    EXPECT_EQ(resumed[r].result->checkpoint().resumed_step(), 3);
    ASSERT_EQ(resumed[r].result->runs(0).steps_size(), 3);
    EXPECT_EQ(Losses(*resumed[r].result), Tail(Losses(*continuous_[r].result)));
    EXPECT_EQ(Norms(*resumed[r].result), Tail(Norms(*continuous_[r].result)));
    EXPECT_TRUE(SameBits(resumed[r].seen.parameters, continuous_[r].seen.parameters));
  }
}

TEST_P(MultiRankCheckpoint, ADeviceModelThatDropsTheLoadedStateDiffers) {
  const std::vector<RankOutcome> resumed = Resume(/*drop_loaded_state=*/true);
  // (The stand-in's losses and norms depend on the tokens and the
  // parameters' signs only; its parameters carry the state.)
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_TRUE(resumed[r].result.ok()) << resumed[r].result.status();
    EXPECT_FALSE(SameBits(resumed[r].seen.parameters, continuous_[r].seen.parameters));
  }
}

TEST_P(MultiRankCheckpoint, TheCheckpointHoldsTheCpuTrainersPlacementsAndTheRunsTensors) {
  const std::string step3 = dir_ + "/" + checkpoint::StepDirName(3);
  ASSERT_TRUE(checkpoint::Verify(step3).ok()) << checkpoint::Verify(step3);
  absl::StatusOr<checkpoint::CheckpointManifest> manifest = checkpoint::ReadManifest(step3);
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  const TrainConfig config = Steps(GetParam(), 3);
  EXPECT_EQ(manifest->strategy(), GetParam() == TrainConfig::zero1 ? "zero1" : "ddp");
  EXPECT_EQ(manifest->world_size(), kWorld);
  const ParameterLayout layout = ParameterLayout::ForGpt(ModelShapeOf(config));
  ASSERT_EQ(manifest->tensors_size(), 3 * static_cast<int>(layout.tensors().size()) + 1);

  // Who the CPU trainer's strategy has write each flat element.
  const SyncPlan plan = PlanFor(config, kWorld);
  const std::vector<int64_t> slices = ShardCounts(layout.total(), kWorld);
  auto cpu_owner = [&](int64_t element) {
    if (GetParam() == TrainConfig::zero1) return plan.OwnerOf(element);
    return element < slices[0] ? 0 : 1;
  };
  std::map<std::string, const TensorSlot*> slots;
  for (const TensorSlot& slot : layout.tensors()) slots[slot.name] = &slot;
  int64_t checked = 0;
  for (const checkpoint::TensorEntry& tensor : manifest->tensors()) {
    if (tensor.name() == "optimizer/step") {
      ASSERT_EQ(tensor.shards_size(), 1);
      EXPECT_EQ(tensor.shards(0).rank(), 0);
      continue;
    }
    const std::string name = tensor.name().substr(tensor.name().rfind('/') + 1);
    ASSERT_TRUE(slots.count(name)) << tensor.name();
    const TensorSlot& slot = *slots[name];
    std::vector<int> writer(slot.numel, -1);
    for (const checkpoint::ShardPlacement& placement : tensor.shards()) {
      for (int64_t e = placement.offset(); e < placement.offset() + placement.length(); ++e) {
        ASSERT_EQ(writer[e], -1) << tensor.name() << " element " << e << " written twice";
        writer[e] = placement.rank();
      }
    }
    for (int64_t e = 0; e < slot.numel; ++e) {
      ASSERT_EQ(writer[e], cpu_owner(slot.offset + e)) << tensor.name() << " element " << e;
    }
    checked += slot.numel;
  }
  EXPECT_EQ(checked, 3 * layout.total());

  // The logical tensors are the run's after step 3.
  HostState state(layout.total());
  ASSERT_TRUE(checkpoint::ReadTensorRanges(step3, *manifest, RequestsInto(layout, &state)).ok());
  EXPECT_EQ(state.step, 3);

  EXPECT_TRUE(SameBits(state.parameters, saved_[0].seen.parameters));
  EXPECT_TRUE(SameBits(state.parameters, saved_[1].seen.parameters));
}

INSTANTIATE_TEST_SUITE_P(DdpAndZero1, MultiRankCheckpoint,
                         ::testing::Values(TrainConfig::ddp, TrainConfig::zero1));

}  // namespace
}  // namespace cuda
}  // namespace mtb
