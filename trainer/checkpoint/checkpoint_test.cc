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

namespace mtb::checkpoint {
namespace {

struct Crash : std::runtime_error {
  Crash() : std::runtime_error("crash") {}
};

std::string Bytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4);
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::string(std::getenv("TEST_TMPDIR")) + "/" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_TRUE(CreateDirectories(root_).ok());
  }

  // Two ranks: "model/w" (6 floats) split 4 + 2, "model/b" (3 floats) held
  // by rank 0. Values depend on the step so checkpoints differ.
  absl::Status Save(int64_t step, const std::string& run_id = "run-a",
                    const Hooks& hooks = {}) {
    const std::string staging = root_ + "/" + StagingDirName(step);
    const float s = static_cast<float>(step);
    const std::string w0 = Bytes({s, s + 1, s + 2, s + 3});
    const std::string w1 = Bytes({s + 4, s + 5});
    const std::string b = Bytes({-s, -s, -s});
    std::vector<RankReport> reports;
    for (int rank = 0; rank < 2; ++rank) {
      std::vector<TensorShard> shards;
      if (rank == 0) {
        shards.push_back({"model/w", "float32", {2, 3}, 0, 4, w0});
        shards.push_back({"model/b", "float32", {3}, 0, 3, b});
      } else {
        shards.push_back({"model/w", "float32", {2, 3}, 4, 2, w1});
      }
      RankState state;
      state.set_step(step);
      state.set_data_position(step * 8 + rank);
      state.set_seed(7);
      absl::StatusOr<RankReport> report =
          WriteRankFiles(staging, rank, shards, state, rank == 1 ? hooks : Hooks{});
      if (!report.ok()) return report.status();
      reports.push_back(*report);
    }
    CheckpointManifest manifest;
    manifest.set_run_id(run_id);
    manifest.set_step(step);
    manifest.set_strategy("ddp");
    manifest.set_world_size(2);
    return Publish(root_, manifest, reports, hooks);
  }

  std::string Dir(int64_t step) const { return root_ + "/" + StepDirName(step); }

  // Every file under `dir` by name -> SHA-256.
  std::map<std::string, std::string> Tree(const std::string& dir) const {
    std::map<std::string, std::string> tree;
    for (const char* name : {"rank_00000.bin", "rank_00001.bin", "rank_00000.meta",
                             "rank_00001.meta", "manifest.json", "READY"}) {
      tree[name] = Sha256Hex(*ReadFileToString(dir + "/" + name));
    }
    return tree;
  }

  // After editing a file on purpose, make the manifest agree with its new
  // size and hash, so that only the deeper check can catch it.
  void Rehash(int64_t step, const std::string& file) {
    CheckpointManifest manifest = *ReadManifest(Dir(step));
    const std::string bytes = *ReadFileToString(Dir(step) + "/" + file);
    for (FileEntry& entry : *manifest.mutable_files()) {
      if (entry.name() == file) {
        entry.set_size(static_cast<int64_t>(bytes.size()));
        entry.set_sha256(Sha256Hex(bytes));
      }
    }
    ASSERT_TRUE(WriteJsonFile(manifest, Dir(step) + "/manifest.json").ok());
  }

  void EditByte(const std::string& path, size_t at, char value) {
    std::string bytes = *ReadFileToString(path);
    ASSERT_LT(at, bytes.size());
    bytes[at] = value;
    ASSERT_TRUE(WriteFileAtomically(path, bytes).ok());
  }

  // The newest checkpoint is broken: verify names `expected`, resume falls
  // back to step 2 and says so.
  void ExpectBrokenAndFallback(const std::string& expected) {
    const absl::Status verified = Verify(Dir(4));
    EXPECT_FALSE(verified.ok());
    EXPECT_NE(verified.message().find(expected), std::string::npos) << verified.message();
    absl::StatusOr<Resolved> resolved = ResolveLatest(root_);
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    EXPECT_EQ(resolved->dir, Dir(2));
    ASSERT_FALSE(resolved->notes.empty());
    EXPECT_NE(resolved->notes[0].find("falling back to step_00000002"), std::string::npos)
        << resolved->notes[0];
  }

  std::string root_;
};

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

TEST_F(CheckpointTest, ATruncatedShardIsCorruptAndResumeFallsBack) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  ASSERT_EQ(::truncate((Dir(4) + "/rank_00001.bin").c_str(), 30), 0);
  ExpectBrokenAndFallback("rank_00001.bin: corrupt: 30 bytes, the manifest says 32 (truncated)");
}

TEST_F(CheckpointTest, AFlippedByteInAShardOrTheManifestIsCorrupt) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  EditByte(Dir(4) + "/rank_00000.bin", 30, 'x');
  ExpectBrokenAndFallback("rank_00000.bin: corrupt: SHA-256 differs from the manifest's");
  const CheckpointTreeAudit audit = AuditCheckpointTree(root_);
  EXPECT_EQ(audit.untrusted(), 1);
  EXPECT_EQ(DescribeAudit(audit),
            "step_00000002 (verified), step_00000004 (READY, fails verification: " +
                audit.checkpoints(1).error() + "); latest: step_00000004");
  EXPECT_NE(audit.checkpoints(1).error().find("SHA-256 differs"), std::string::npos);
  ASSERT_TRUE(Save(4).ok());
  EditByte(Dir(4) + "/manifest.json", 0, '[');
  ExpectBrokenAndFallback("manifest.json: corrupt: ");
}

TEST_F(CheckpointTest, AMissingFileIsNotCorruptDataButMissing) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  ASSERT_EQ(::unlink((Dir(4) + "/rank_00001.meta").c_str()), 0);
  EXPECT_EQ(Verify(Dir(4)).code(), absl::StatusCode::kNotFound);
  ExpectBrokenAndFallback("rank_00001.meta: missing (listed in the manifest)");
}

TEST_F(CheckpointTest, AMissingShardEntryLeavesElementsUncovered) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  CheckpointManifest manifest = *ReadManifest(Dir(4));
  for (TensorEntry& tensor : *manifest.mutable_tensors()) {
    if (tensor.name() == "model/w") tensor.mutable_shards()->RemoveLast();
  }
  ASSERT_TRUE(WriteJsonFile(manifest, Dir(4) + "/manifest.json").ok());
  ExpectBrokenAndFallback("model/w: shards cover 4 of 6 elements");
}

TEST_F(CheckpointTest, BadMagicAndBadVersionAreNamed) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  EditByte(Dir(4) + "/rank_00001.bin", 0, 'X');
  Rehash(4, "rank_00001.bin");
  ExpectBrokenAndFallback("rank_00001.bin: bad magic: not a checkpoint shard file");
  ASSERT_TRUE(Save(4).ok());
  EditByte(Dir(4) + "/rank_00001.bin", 8, 9);
  Rehash(4, "rank_00001.bin");
  ExpectBrokenAndFallback("rank_00001.bin: format version 9, this build reads version 1");
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
