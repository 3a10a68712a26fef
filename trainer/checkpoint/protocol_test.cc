// The checkpointer's device-free half (protocol.h) on two rank threads over
// an in-memory exchange: a save publishes a checkpoint that verifies and
// reads back into each rank's destinations; one rank's failed write ends the
// save with the same error on both ranks and publishes nothing (the negative
// case); retention prunes; a recorded state that is not where the run is is
// refused naming the field; the progress state.
#include "trainer/checkpoint/protocol.h"

#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/model/lr_schedule.h"

namespace mtb::checkpoint {
namespace {

// An all-gather of bytes between rank threads: the k-th call of every rank
// meets the k-th call of the others.
class ThreadExchange {
 public:
  explicit ThreadExchange(int world_size) : world_size_(world_size), calls_(world_size) {}
  Exchange For(int rank) {
    return [this, rank](const std::string& name, const std::string& bytes)
               -> absl::StatusOr<std::vector<std::string>> {
      std::unique_lock<std::mutex> lock(mutex_);
      const std::string key = name + "#" + std::to_string(calls_[rank]++);
      std::vector<std::string>& slot = slots_[key];
      slot.resize(world_size_);
      slot[rank] = bytes;
      if (++arrived_[key] == world_size_) changed_.notify_all();
      changed_.wait(lock, [&] { return arrived_[key] == world_size_; });
      return slot;
    };
  }

 private:
  const int world_size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int> calls_;
  std::map<std::string, std::vector<std::string>> slots_;
  std::map<std::string, int> arrived_;
};

std::string Bytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4);
}

TrainConfig Config() {
  TrainConfig config;
  config.set_seed(5);
  config.set_batch_size(2);
  config.set_grad_accum(3);
  config.set_seq_len(4);
  config.set_lr(1e-3);
  config.set_steps(10);
  return config;
}

class ProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::string(std::getenv("TEST_TMPDIR")) + "/" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_TRUE(CreateDirectories(root_).ok());
  }

  // Rank r holds elements [3r, 3r + 3) of "model/w" (6 floats, {2, 3});
  // rank 1's shard claims 4 elements for 3 floats' bytes when `break_rank_1`.
  std::vector<absl::StatusOr<CheckpointSave>> SaveOnTwoRanks(int64_t step, bool break_rank_1,
                                                             int64_t keep_last = 0) {
    ThreadExchange exchange(2);
    std::vector<absl::StatusOr<CheckpointSave>> results(2, absl::UnknownError("not run"));
    std::vector<std::thread> ranks;
    for (int rank = 0; rank < 2; ++rank) {
      ranks.emplace_back([&, rank] {
        const float s = static_cast<float>(step);
        const std::string bytes = Bytes({s + 3 * rank, s + 3 * rank + 1, s + 3 * rank + 2});
        const int64_t length = break_rank_1 && rank == 1 ? 4 : 3;
        SaveTarget target;
        target.root = root_;
        target.keep_last = keep_last;
        target.run_id = "run-p";
        target.strategy = "ddp";
        target.rank = rank;
        target.world_size = 2;
        target.config = Config();
        results[rank] = WriteAndPublish(
            target, step, {{"model/w", "float32", {2, 3}, 3 * rank, length, bytes}},
            ProgressStateOf(Config(), rank, 2, step), exchange.For(rank), nullptr,
            [](const char*) {});
      });
    }
    for (std::thread& rank : ranks) rank.join();
    return results;
  }

  std::string root_;
};

TEST_F(ProtocolTest, TwoRanksPublishACheckpointThatVerifiesAndReadsBack) {
  const auto results = SaveOnTwoRanks(4, /*break_rank_1=*/false);
  for (const auto& result : results) {
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->name(), StepDirName(4));
    EXPECT_GT(result->bytes(), 0);
  }
  const std::string dir = root_ + "/" + StepDirName(4);
  ASSERT_TRUE(Verify(dir).ok()) << Verify(dir);
  const CheckpointManifest manifest = *ReadManifest(dir);
  EXPECT_EQ(manifest.run_id(), "run-p");
  EXPECT_EQ(manifest.world_size(), 2);
  EXPECT_EQ(manifest.strategy(), "ddp");
  EXPECT_EQ(*ReadFileToString(root_ + "/latest"), StepDirName(4) + "\n");

  // Rank 1 of a plan resuming there reads the whole tensor across both
  // ranks' files; its state is where the run is at step 4.
  CheckpointPlan plan;
  plan.resume_dir = dir;
  plan.resume_manifest = manifest;
  plan.start_step = 4;
  std::vector<float> w(6);
  const std::vector<RangeRequest> requests = {
      {"model/w", "float32", {2, 3}, 0, 6, reinterpret_cast<char*>(w.data())}};
  int64_t hashed = -1;
  ASSERT_TRUE(ReadRankState(plan, 1, requests, ProgressStateOf(Config(), 1, 2, 4), &hashed).ok());
  EXPECT_EQ(w, (std::vector<float>{4, 5, 6, 7, 8, 9}));
  // Negative: another seed is not where this run is.
  TrainConfig other = Config();
  other.set_seed(6);
  const absl::Status moved = ReadRankState(plan, 1, requests, ProgressStateOf(other, 1, 2, 4), &hashed);
  EXPECT_EQ(moved.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(moved.message().find("seed 5 (this run: 6)"), std::string::npos) << moved;
}

TEST_F(ProtocolTest, OneRanksFailedWriteFailsBothRanksAndPublishesNothing) {
  ASSERT_TRUE(SaveOnTwoRanks(2, false)[0].ok());
  const auto results = SaveOnTwoRanks(4, /*break_rank_1=*/true);
  for (const auto& result : results) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.status().message(), results[0].status().message());
    EXPECT_NE(result.status().message().find(
                  "checkpoint of step 4: rank 1: model/w: 12 bytes for 4 elements"),
              std::string::npos)
        << result.status();
  }
  EXPECT_NE(access((root_ + "/" + StepDirName(4)).c_str(), F_OK), 0);
  EXPECT_NE(access((root_ + "/" + StagingDirName(4)).c_str(), F_OK), 0) << "staging left";
  EXPECT_EQ(*ReadFileToString(root_ + "/latest"), StepDirName(2) + "\n");
}

TEST_F(ProtocolTest, RetentionPrunesTheRunsOlderCheckpoints) {
  ASSERT_TRUE(SaveOnTwoRanks(2, false, /*keep_last=*/1)[0].ok());
  const auto results = SaveOnTwoRanks(4, false, /*keep_last=*/1);
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  ASSERT_EQ(results[1]->pruned_size(), 1);  // every rank hears what rank 0 pruned
  EXPECT_EQ(results[1]->pruned(0), StepDirName(2));
  EXPECT_NE(access((root_ + "/" + StepDirName(2)).c_str(), F_OK), 0);
}

TEST(ProgressStateOf, CountsGlobalSamplesTokensAndTheLastRate) {
  const TrainConfig config = Config();
  const RankState state = ProgressStateOf(config, 1, 2, 4);
  EXPECT_EQ(state.rank(), 1);
  EXPECT_EQ(state.step(), 4);
  EXPECT_EQ(state.micro_step(), 12);
  EXPECT_EQ(state.data_position(), 4 * 2 * 3 * 2);  // steps x ranks x accum x batch
  EXPECT_EQ(state.tokens_seen(), 48 * 4);
  EXPECT_EQ(state.seed(), 5u);
  EXPECT_EQ(state.rng_step(), 5);
  EXPECT_EQ(state.last_lr(), LearningRateAt(LrScheduleOf(config), 4));
  EXPECT_EQ(ProgressStateOf(config, 0, 1, 0).last_lr(), 0.0);
}

}  // namespace
}  // namespace mtb::checkpoint
