#include "trainer/checkpoint/checkpoint.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/base/sha256.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint/audit.h"
#include "trainer/checkpoint/checkpoint_test_fixture.h"

namespace mtb::checkpoint {
namespace {

TEST_F(CheckpointTest, ASavedCheckpointVerifiesAndReadsBackEachRanksShard) {
  ASSERT_TRUE(Save(2).ok());
  EXPECT_TRUE(Verify(Dir(2)).ok()) << Verify(Dir(2));
  EXPECT_EQ(*ReadFileToString(root_ + "/latest"), "step_00000002\n");
  EXPECT_FALSE(access((root_ + "/" + StagingDirName(2)).c_str(), F_OK) == 0) << "staging left";
  absl::StatusOr<RankCheckpoint> rank1 = ReadRank(Dir(2), 1);
  ASSERT_TRUE(rank1.ok()) << rank1.status();
  EXPECT_EQ(rank1->tensors.at("model/w"), Bytes({6, 7}));
  EXPECT_EQ(rank1->placements.at("model/w").offset(), 4);
  EXPECT_EQ(rank1->tensors.count("model/b"), 0u);
  EXPECT_EQ(rank1->state.data_position(), 17);
  EXPECT_EQ(rank1->state.rank(), 1);
  const CheckpointManifest manifest = *ReadManifest(Dir(2));
  ASSERT_EQ(manifest.tensors_size(), 2);
  EXPECT_EQ(manifest.tensors(1).name(), "model/w");
  EXPECT_EQ(manifest.tensors(1).shards_size(), 2);
  absl::StatusOr<Resolved> resolved = ResolveLatest(root_);
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->dir, Dir(2));
  EXPECT_TRUE(resolved->notes.empty());
}

TEST_F(CheckpointTest, AGarbageOrDanglingLatestFallsBackSayingWhich) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  ASSERT_TRUE(WriteFileAtomically(root_ + "/latest", "\x01\x02garbage").ok());
  absl::StatusOr<Resolved> garbage = ResolveLatest(root_);
  ASSERT_TRUE(garbage.ok());
  EXPECT_EQ(garbage->dir, Dir(4));
  EXPECT_NE(garbage->notes[0].find("`latest` is garbage"), std::string::npos) << garbage->notes[0];
  ASSERT_TRUE(WriteFileAtomically(root_ + "/latest", "step_00000009\n").ok());
  absl::StatusOr<Resolved> dangling = ResolveLatest(root_);
  ASSERT_TRUE(dangling.ok());
  EXPECT_EQ(dangling->dir, Dir(4));
  EXPECT_NE(dangling->notes[0].find("`latest` names step_00000009, which fails verification"),
            std::string::npos)
      << dangling->notes[0];
}

TEST_F(CheckpointTest, ACrashInAnyPhaseLeavesThePreviousCheckpointIntactAndResumable) {
  ASSERT_TRUE(Save(2).ok());
  const std::map<std::string, std::string> before = Tree(Dir(2));
  for (const char* phase : {"mid_shard_write", "before_ready", "before_latest"}) {
    Hooks hooks;
    const std::string which = phase;
    auto crash = [] { throw Crash(); };
    if (which == "mid_shard_write") hooks.mid_shard_write = crash;
    if (which == "before_ready") hooks.before_ready = crash;
    if (which == "before_latest") hooks.before_latest = crash;
    EXPECT_THROW((void)Save(4, "run-a", hooks), Crash) << phase;
    EXPECT_EQ(Tree(Dir(2)), before) << phase;
    // What a restarted job's rank 0 records: nothing untrusted is visible.
    const CheckpointTreeAudit audit = AuditCheckpointTree(root_);
    EXPECT_EQ(audit.untrusted(), 0) << phase << ": " << DescribeAudit(audit);
    EXPECT_EQ(audit.latest(), "step_00000002") << phase;
    ASSERT_EQ(audit.checkpoints_size(), which == "before_latest" ? 2 : 1) << phase;
    EXPECT_TRUE(audit.checkpoints(0).verified()) << phase;
    if (which == "before_latest") {
      EXPECT_TRUE(audit.checkpoints(1).orphan()) << DescribeAudit(audit);
      EXPECT_TRUE(audit.staging().empty());
    } else {
      EXPECT_EQ(std::vector<std::string>(audit.staging().begin(), audit.staging().end()),
                std::vector<std::string>{".step_00000004.tmp"})
          << phase;
    }
    absl::StatusOr<Resolved> resolved = ResolveLatest(root_);
    ASSERT_TRUE(resolved.ok()) << phase << ": " << resolved.status();
    EXPECT_EQ(resolved->dir, Dir(2)) << phase;
    if (which == "before_latest") {
      // Published but never named: an orphan, ignored and said so.
      ASSERT_EQ(resolved->notes.size(), 1u);
      EXPECT_NE(resolved->notes[0].find("ignoring step_00000004: READY but never named"),
                std::string::npos);
    } else {
      EXPECT_TRUE(resolved->notes.empty()) << resolved->notes[0];
    }
  }
  // The next save of that step replaces the orphan safely.
  ASSERT_TRUE(Save(4).ok());
  EXPECT_TRUE(Verify(Dir(4)).ok());
  EXPECT_EQ(ResolveLatest(root_)->dir, Dir(4));
}

TEST_F(CheckpointTest, RetentionKeepsTheLastNOfThisRunAndNeverAnotherRuns) {
  ASSERT_TRUE(Save(1, "run-old").ok());
  for (int step = 2; step <= 6; ++step) {
    ASSERT_TRUE(Save(step, "run-a").ok());
    ASSERT_TRUE(Prune(root_, "run-a", 2).ok());
  }
  std::vector<std::string> left;
  for (int step = 1; step <= 6; ++step) {
    if (access(Dir(step).c_str(), F_OK) == 0) left.push_back(StepDirName(step));
  }
  EXPECT_EQ(left, (std::vector<std::string>{"step_00000001", "step_00000005", "step_00000006"}));
  EXPECT_TRUE(Prune(root_, "run-a", 0)->empty()) << "keep_last 0 keeps everything";
}

}  // namespace
}  // namespace mtb::checkpoint
