// A save that fails (an error returned, not a crash: a crash leaves staging
// for the next save of that step to clear, checkpoint_test) removes its
// staging directory, publishes nothing, and leaves the previous checkpoint
// named by `latest` and verifying. Two rank threads over Gloo, saving after
// steps 2 and 4; the save of step 4 is made to fail by a test hook that
// plants a directory where a file of that save must go (works as root too,
// where permissions would not stop the write): rank 1's shard file (a write
// failure on a rank that does not publish) or rank 0's manifest.json (a
// publish failure), with synchronous and background (--async_checkpoint)
// saves.
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/resume_test_util.h"

namespace mtb::checkpoint {
namespace {

struct Failure {
  const char* name;
  int rank;          // the rank whose hook plants the obstacle
  const char* file;  // what it blocks, inside staging
};
constexpr Failure kFailures[] = {
    {"ShardFileOfRank1", 1, "rank_00001.bin"},
    {"ManifestOfRank0", 0, "manifest.json"},
};

class FailedSave : public ::testing::TestWithParam<std::tuple<Failure, bool>> {};

TEST_P(FailedSave, RemovesItsStagingAndKeepsThePreviousCheckpoint) {
  const Failure failure = std::get<0>(GetParam());
  const bool async = std::get<1>(GetParam());
  const std::string dir = TestDir("ckpt");
  const std::string staging = absl::StrCat(dir, "/", StagingDirName(4));
  CheckpointOptions options = Saving(dir, 2);
  options.async_save = async;
  TrainOptions train;
  bool planted = false;  // written by the one rank thread that plants
  train.setup = [&](Checkpointer& checkpointer, int rank) {
    if (rank != failure.rank) return;
    Checkpointer::TestHooks hooks;
    hooks.hold_before_write = [&](int64_t step) {
      if (step != 4) return;
      // Staging exists (rank 0 prepared it before the hook runs).
      planted = CreateDirectories(absl::StrCat(staging, "/", failure.file)).ok();
    };
    checkpointer.set_test_hooks(hooks);
  };
  const std::vector<absl::Status> statuses =
      TrainAllowingFailure(ResumeConfig("ddp", 4), 2, options, train);
  ASSERT_TRUE(planted);
  ASSERT_EQ(statuses.size(), 2u);
  for (int rank = 0; rank < 2; ++rank) {
    // Every rank fails with the same save, naming the file.
    EXPECT_FALSE(statuses[rank].ok()) << "rank " << rank;
    EXPECT_TRUE(absl::StrContains(statuses[rank].message(), "checkpoint of step 4"))
        << "rank " << rank << ": " << statuses[rank];
    EXPECT_TRUE(absl::StrContains(statuses[rank].message(), failure.file))
        << "rank " << rank << ": " << statuses[rank];
  }
  EXPECT_FALSE(PathExists(staging)) << "the failed save left " << staging;
  EXPECT_FALSE(PathExists(dir + "/" + StepDirName(4))) << "the failed save was published";
  const absl::StatusOr<std::string> latest = ReadFileToString(dir + "/latest");
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, "step_00000002\n");
  EXPECT_TRUE(Verify(dir + "/" + StepDirName(2)).ok()) << Verify(dir + "/" + StepDirName(2));
  const absl::StatusOr<Resolved> resolved = ResolveLatest(dir);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_EQ(resolved->dir, dir + "/" + StepDirName(2));
  EXPECT_TRUE(resolved->notes.empty()) << resolved->notes[0];
}

// The control: the same run without the obstacle saves step 4.
TEST(FailedSaveControl, WithoutTheObstacleStepFourIsPublished) {
  const std::string dir = TestDir("ckpt");
  const std::vector<absl::Status> statuses =
      TrainAllowingFailure(ResumeConfig("ddp", 4), 2, Saving(dir, 2));
  ASSERT_EQ(statuses.size(), 2u);
  for (const absl::Status& status : statuses) EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(*ReadFileToString(dir + "/latest"), "step_00000004\n");
  EXPECT_FALSE(PathExists(absl::StrCat(dir, "/", StagingDirName(4))));
}

INSTANTIATE_TEST_SUITE_P(
    Saves, FailedSave, ::testing::Combine(::testing::ValuesIn(kFailures), ::testing::Bool()),
    [](const ::testing::TestParamInfo<std::tuple<Failure, bool>>& info) {
      return absl::StrCat(std::get<0>(info.param).name,
                          std::get<1>(info.param) ? "Async" : "Sync");
    });

}  // namespace
}  // namespace mtb::checkpoint
