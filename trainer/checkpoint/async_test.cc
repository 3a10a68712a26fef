// --async_checkpoint on 2 rank threads over Gloo (docs/checkpoint.md, "Async
// save"): the background writer of save S, held by a test hook until step
// S + 1 has finished its optimizer update on that rank, publishes after it,
// and its checkpoint still compares equal, bit for bit, to a synchronous
// save of step S: the snapshot is a copy and training went on meanwhile.
// A run saving every step in the background ends with the parameters of a
// run without checkpoints, having issued exactly its collectives on the
// training group (the background exchanges go through the store). SIGKILL during a background save
// is
// //trainer:trainer_checkpoint_test (real processes).
#include <atomic>
#include <string>
#include <vector>

#include "ATen/ATen.h"
#include "absl/time/clock.h"
#include "common/collective/communicator.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/compare.h"
#include "trainer/checkpoint/resume_test_util.h"

namespace mtb::checkpoint {
namespace {

CheckpointOptions Async(const std::string& dir, int save_every) {
  CheckpointOptions options = Saving(dir, save_every);
  options.async_save = true;
  return options;
}

TEST(AsyncSave, AHeldWriterPublishesAfterTheNextUpdateAndStillEqualsASynchronousSave) {
  const TrainConfig config = ResumeConfig("zero2", 4);
  const std::string sync_dir = TestDir("sync");
  const RunOutput sync = Train(config, 2, Saving(sync_dir, 2));
  ASSERT_TRUE(sync.status.ok()) << sync.status;

  // Per rank: the last step whose optimizer update finished.
  std::atomic<int64_t> updated[2] = {0, 0};
  std::atomic<int64_t> updated_at_publish{-1};
  TrainOptions train;
  train.after_step = [&](int64_t step, int rank) { updated[rank] = step; };
  train.setup = [&](Checkpointer& checkpointer, int rank) {
    Checkpointer::TestHooks hooks;
    hooks.hold_before_write = [&, rank](int64_t step) {
      if (step != 2) return;
      // Nothing of save 2 is written until step 3 has updated: whatever
      // the writer writes is the snapshot, not the live state.
      while (updated[rank] < 3) absl::SleepFor(absl::Milliseconds(1));
    };
    hooks.after_publish = [&](int64_t step) {
      if (step == 2) updated_at_publish = updated[0].load();
    };
    checkpointer.set_test_hooks(hooks);
  };
  const std::string async_dir = TestDir("async");
  const RunOutput async = Train(config, 2, Async(async_dir, 2), train);
  ASSERT_TRUE(async.status.ok()) << async.status;
  EXPECT_GE(updated_at_publish.load(), 3) << "save 2 was published before step 3 updated";
  ExpectEqualCheckpoints(sync_dir + "/step_00000002", async_dir + "/step_00000002");
  ExpectEqualCheckpoints(sync_dir + "/step_00000004", async_dir + "/step_00000004");

  const CheckpointInfo& info = async.result.checkpoint();
  EXPECT_TRUE(info.async_save());
  ASSERT_EQ(info.saves_size(), 2);
  for (const CheckpointSave& save : info.saves()) {
    EXPECT_TRUE(save.async()) << save.name();
    EXPECT_GT(save.background_ms(), 0) << save.name();
    EXPECT_GT(save.bytes(), 0) << save.name();
  }
  // The parameters are those of the synchronous run.
  ASSERT_EQ(async.params.size(), sync.params.size());
  for (size_t i = 0; i < sync.params.size(); ++i) {
    EXPECT_TRUE(at::equal(async.params[i], sync.params[i])) << "parameter " << i;
  }
}

// The collectives each rank issued on the training group over a run.
struct Issued {
  std::atomic<int64_t> count[2] = {-1, -1};
  TrainOptions Options() {
    TrainOptions train;
    train.after_run = [this](collective::Communicator* communicator, int rank) {
      count[rank] = communicator->log().NextSequence();
    };
    return train;
  }
};

TEST(AsyncSave, SavingEveryStepInTheBackgroundEndsWithTheParametersOfNoCheckpoints) {
  const TrainConfig config = ResumeConfig("ddp", 5);
  Issued plain_issued, async_issued, sync_issued;
  const RunOutput plain = Train(config, 2, Saving(TestDir("none"), 0), plain_issued.Options());
  ASSERT_TRUE(plain.status.ok()) << plain.status;
  const std::string dir = TestDir("async");
  CheckpointOptions options = Async(dir, 1);
  options.keep_last = 2;
  const RunOutput async = Train(config, 2, options, async_issued.Options());
  ASSERT_TRUE(async.status.ok()) << async.status;
  ASSERT_EQ(async.params.size(), plain.params.size());
  for (size_t i = 0; i < plain.params.size(); ++i) {
    EXPECT_TRUE(at::equal(async.params[i], plain.params[i])) << "parameter " << i;
  }
  ASSERT_EQ(async.result.checkpoint().saves_size(), 5);
  EXPECT_EQ(FileBytes(dir + "/latest"), "step_00000005\n");
  EXPECT_FALSE(PathExists(dir + "/step_00000003")) << "--keep_last=2 pruned it";
  EXPECT_TRUE(Verify(dir + "/step_00000005").ok());

  // The background saves issued no collective on the training group: each
  // rank issued exactly the collectives of training alone (the same
  // --checkpoint_dir start-up included). A synchronous save exchanges over
  // the group, and the count sees it: more than one collective per save.
  const RunOutput sync = Train(config, 2, Saving(TestDir("sync"), 1), sync_issued.Options());
  ASSERT_TRUE(sync.status.ok()) << sync.status;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_GT(plain_issued.count[rank], 0);
    EXPECT_EQ(async_issued.count[rank].load(), plain_issued.count[rank].load()) << "rank " << rank;
    EXPECT_GT(sync_issued.count[rank].load(), plain_issued.count[rank].load() + 5)
        << "rank " << rank;
  }
}

}  // namespace
}  // namespace mtb::checkpoint
