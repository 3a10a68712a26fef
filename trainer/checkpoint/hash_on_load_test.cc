// Verify once, read only what you need (docs/checkpoint.md, "Verify once"):
// ranks that no launcher of ours started (torchrun, by hand: RANK set and
// MTB_VERIFIED_CHECKPOINT_SHA256 absent) check a resume checkpoint's
// structure when they plan and hash, when they load, only the bytes they
// read: each tensor range by its own digest (ShardPlacement.sha256). Counted
// per rank (Checkpointer::load_hashed_bytes) on three rank threads over
// Gloo, against the manifest's ranges: an fsdp rank hashes its own shard's
// ranges, its state file and, from rank 0's shard file, only the 8 bytes of
// the AdamW step every rank loads; a ddp rank every range of every shard
// file (its parameters are whole) and its own state file; a rank of our
// launcher, which verified the checkpoint first, hashes nothing. A flipped
// byte in a range only rank 1 reads fails the resume on every rank, naming
// rank 1, the file and the tensor; one in a range of rank 0's file that only
// rank 0 reads is found by rank 0 alone. A checkpoint written before range
// digests is hashed by whole files, as it was.
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/plan.h"
#include "trainer/checkpoint/resume_test_util.h"

namespace mtb::checkpoint {
namespace {

constexpr int kRanks = 3;

class HashOnLoad : public ::testing::Test {
 protected:
  void TearDown() override {
    ::unsetenv("RANK");
    ::unsetenv(kVerifiedCheckpointEnv);
  }

  // Saves step 2 of `strategy` on kRanks ranks under `dir_` (as a launcher:
  // RANK unset); returns the checkpoint's manifest.
  CheckpointManifest SaveStepTwo(const std::string& strategy) {
    dir_ = TestDir("ckpt");
    const RunOutput saved = Train(ResumeConfig(strategy, 2), kRanks, Saving(dir_, 2));
    EXPECT_TRUE(saved.status.ok()) << saved.status;
    absl::StatusOr<VerifiedCheckpoint> verified = VerifyCheckpoint(Step(2));
    EXPECT_TRUE(verified.ok()) << verified.status();
    digest_ = verified.ok() ? verified->manifest_sha256 : "";
    return verified.ok() ? verified->manifest : CheckpointManifest();
  }

  std::string Step(int step) const { return absl::StrCat(dir_, "/", StepDirName(step)); }

  // Resumes to step 4 as a rank process (RANK set), with `verdict` in the
  // environment (nullptr: none, as under torchrun). Each rank's hashed bytes
  // go to `hashed`; returns every rank's status.
  // `steps`: the run's total; `resume`: the --resume= given; `resumed`
  // (if given): each rank's checkpoint loaded.
  std::vector<absl::Status> ResumeAsRanks(const std::string& strategy, const char* verdict,
                                          std::vector<int64_t>* hashed,
                                          RunOutput* out = nullptr, int steps = 4,
                                          const std::string& resume = "latest",
                                          std::vector<std::string>* resumed = nullptr) {
    ::setenv("RANK", "0", /*overwrite=*/1);
    if (verdict == nullptr) {
      ::unsetenv(kVerifiedCheckpointEnv);
    } else {
      ::setenv(kVerifiedCheckpointEnv, verdict, /*overwrite=*/1);
    }
    hashed->assign(kRanks, -1);
    std::vector<Checkpointer*> checkpointers(kRanks, nullptr);
    TrainOptions train;
    train.setup = [&](Checkpointer& checkpointer, int rank) { checkpointers[rank] = &checkpointer; };
    train.after_run = [&](collective::Communicator*, int rank) {
      (*hashed)[rank] = checkpointers[rank]->load_hashed_bytes();
      if (resumed != nullptr) (*resumed)[rank] = checkpointers[rank]->plan().resume_dir;
    };
    if (resumed != nullptr) resumed->assign(kRanks, "");
    std::vector<absl::Status> statuses = TrainAllowingFailure(
        ResumeConfig(strategy, steps), kRanks, Saving(dir_, 0, resume), train, out);
    ::unsetenv("RANK");
    return statuses;
  }

  std::string dir_;
  std::string digest_;
};

// Bytes of the files `names` by the manifest.
int64_t SizeOf(const CheckpointManifest& manifest, const std::vector<std::string>& names) {
  std::map<std::string, int64_t> sizes;
  for (const FileEntry& file : manifest.files()) sizes[file.name()] = file.size();
  int64_t total = 0;
  for (const std::string& name : names) {
    EXPECT_EQ(sizes.count(name), 1u) << name;
    total += sizes[name];
  }
  return total;
}

// Bytes of every tensor range in shard file `file`.
int64_t RangesIn(const CheckpointManifest& manifest, const std::string& file) {
  int64_t total = 0;
  for (const TensorEntry& tensor : manifest.tensors()) {
    for (const ShardPlacement& shard : tensor.shards()) {
      if (shard.file() == file) total += shard.byte_length();
    }
  }
  return total;
}

// The placement of the tensor holding byte `at` of `file`.
std::string TensorAt(const CheckpointManifest& manifest, const std::string& file, int64_t at,
                     ShardPlacement* placement = nullptr) {
  for (const TensorEntry& tensor : manifest.tensors()) {
    for (const ShardPlacement& shard : tensor.shards()) {
      if (shard.file() == file && shard.byte_offset() <= at &&
          at < shard.byte_offset() + shard.byte_length()) {
        if (placement != nullptr) *placement = shard;
        return tensor.name();
      }
    }
  }
  return "";
}

TEST_F(HashOnLoad, AnFsdpRankWithoutALauncherHashesOnlyTheRangesItReads) {
  const CheckpointManifest manifest = SaveStepTwo("fsdp");
  // The AdamW step: 8 bytes, held by rank 0 only, loaded by every rank.
  int64_t step_bytes = -1;
  for (const TensorEntry& tensor : manifest.tensors()) {
    if (tensor.name() != "optimizer/step") continue;
    ASSERT_EQ(tensor.shards_size(), 1);
    EXPECT_EQ(tensor.shards(0).file(), "rank_00000.bin");
    step_bytes = tensor.shards(0).byte_length();
  }
  ASSERT_EQ(step_bytes, 8);
  std::vector<int64_t> hashed;
  RunOutput out;
  for (const absl::Status& status : ResumeAsRanks("fsdp", nullptr, &hashed, &out)) {
    ASSERT_TRUE(status.ok()) << status;
  }
  for (int rank = 0; rank < kRanks; ++rank) {
    const std::string own = absl::StrFormat("rank_%05d", rank);
    const int64_t expected = RangesIn(manifest, own + ".bin") +
                             SizeOf(manifest, {own + ".meta"}) + (rank != 0 ? step_bytes : 0);
    EXPECT_EQ(hashed[rank], expected) << "rank " << rank;
    if (rank != 0) {
      // Before range digests: rank 0's whole shard file for its 8 bytes.
      EXPECT_LT(hashed[rank], SizeOf(manifest, {own + ".bin", own + ".meta", "rank_00000.bin"}))
          << "rank " << rank << " hashed rank 0's shard file whole";
    }
  }
  EXPECT_EQ(out.result.checkpoint().load_hashed_bytes(), hashed[0]);
}

TEST_F(HashOnLoad, ADdpRankHashesEveryRangeOfEveryShardFileAndOnlyItsOwnStateFile) {
  const CheckpointManifest manifest = SaveStepTwo("ddp");
  std::vector<int64_t> hashed;
  for (const absl::Status& status : ResumeAsRanks("ddp", nullptr, &hashed)) {
    ASSERT_TRUE(status.ok()) << status;
  }
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(hashed[rank], RangesIn(manifest, "rank_00000.bin") +
                                RangesIn(manifest, "rank_00001.bin") +
                                RangesIn(manifest, "rank_00002.bin") +
                                SizeOf(manifest, {absl::StrFormat("rank_%05d.meta", rank)}))
        << "rank " << rank;
  }
}

TEST_F(HashOnLoad, ACheckpointWithoutRangeDigestsIsHashedByWholeFiles) {
  CheckpointManifest manifest = SaveStepTwo("fsdp");
  for (TensorEntry& tensor : *manifest.mutable_tensors()) {
    for (ShardPlacement& shard : *tensor.mutable_shards()) shard.clear_sha256();
  }
  // As a checkpoint written before range digests: its manifest has none.
  const std::string bytes = ToJson(manifest);
  ASSERT_TRUE(WriteFileAtomically(Step(2) + "/manifest.json", bytes).ok());
  ASSERT_TRUE(
      WriteFileAtomically(Step(2) + "/READY", ReadyFileContents(manifest.run_id(), bytes)).ok());
  std::vector<int64_t> hashed;
  for (const absl::Status& status : ResumeAsRanks("fsdp", nullptr, &hashed)) {
    ASSERT_TRUE(status.ok()) << status;
  }
  for (int rank = 0; rank < kRanks; ++rank) {
    const std::string own = absl::StrFormat("rank_%05d", rank);
    std::vector<std::string> reads = {own + ".bin", own + ".meta"};
    if (rank != 0) reads.push_back("rank_00000.bin");  // the AdamW step
    EXPECT_EQ(hashed[rank], SizeOf(manifest, reads)) << "rank " << rank;
  }
}

TEST_F(HashOnLoad, RanksOfALauncherThatVerifiedHashNothingAgain) {
  SaveStepTwo("fsdp");
  std::vector<int64_t> hashed;
  for (const absl::Status& status : ResumeAsRanks("fsdp", digest_.c_str(), &hashed)) {
    ASSERT_TRUE(status.ok()) << status;
  }
  EXPECT_EQ(hashed, std::vector<int64_t>(kRanks, 0));
}

TEST_F(HashOnLoad, AFlippedByteInARangeOnlyRankOneReadsFailsTheResumeOnEveryRank) {
  const CheckpointManifest manifest = SaveStepTwo("fsdp");
  absl::StatusOr<std::string> path = CorruptShardFile(Step(2), 1);  // its middle byte
  ASSERT_TRUE(path.ok()) << path.status();
  const std::string file = "rank_00001.bin";
  ShardPlacement range;
  const std::string tensor = TensorAt(manifest, file, SizeOf(manifest, {file}) / 2, &range);
  ASSERT_FALSE(tensor.empty());
  std::vector<int64_t> hashed;
  const std::vector<absl::Status> statuses = ResumeAsRanks("fsdp", nullptr, &hashed);
  ASSERT_EQ(statuses.size(), static_cast<size_t>(kRanks));
  const std::string expected = absl::StrCat(
      "rank 1: ", Step(2), "/", file, ": corrupt: SHA-256 differs from the manifest's in tensor ",
      tensor, " (bytes [", range.byte_offset(), ", +", range.byte_length(), "))");
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_FALSE(statuses[rank].ok()) << "rank " << rank << " used a corrupt checkpoint";
    EXPECT_TRUE(absl::StrContains(statuses[rank].message(), expected))
        << "rank " << rank << ": " << statuses[rank] << "\nexpected: " << expected;
    EXPECT_FALSE(absl::StrContains(statuses[rank].message(), "rank 0: "))
        << "rank 0 does not read rank 1's file: " << statuses[rank];
  }
  // The control: a launcher (RANK unset) hashes every range when it plans
  // and refuses the same checkpoint before any rank starts.
  EXPECT_FALSE(VerifyCheckpoint(Step(2)).ok());
}

TEST_F(HashOnLoad, AFlippedByteInRankZerosFileOutsideTheStepIsFoundByRankZeroAlone) {
  const CheckpointManifest manifest = SaveStepTwo("fsdp");
  ASSERT_TRUE(CorruptShardFile(Step(2), 0).ok());
  const std::string tensor =
      TensorAt(manifest, "rank_00000.bin", SizeOf(manifest, {"rank_00000.bin"}) / 2);
  ASSERT_NE(tensor, "optimizer/step");
  std::vector<int64_t> hashed;
  const std::vector<absl::Status> statuses = ResumeAsRanks("fsdp", nullptr, &hashed);
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_FALSE(statuses[rank].ok()) << "rank " << rank;
    EXPECT_TRUE(absl::StrContains(statuses[rank].message(),
                                  absl::StrCat("rank 0: ", Step(2),
                                               "/rank_00000.bin: corrupt: SHA-256 differs "
                                               "from the manifest's in tensor ",
                                               tensor)))
        << "rank " << rank << ": " << statuses[rank];
    // Ranks 1 and 2 read only the step's 8 bytes of that file: intact.
    EXPECT_FALSE(absl::StrContains(statuses[rank].message(), "rank 1: ")) << statuses[rank];
    EXPECT_FALSE(absl::StrContains(statuses[rank].message(), "rank 2: ")) << statuses[rank];
  }
}

// --resume=latest under torchrun: a checkpoint whose bytes fail at load
// (found by rank 1 alone) is skipped on every rank, the ranks agree on the
// previous one, say which was skipped and why, and the run ends bit-equal
// to a run that never stopped. Negative cases: an explicit --resume= never
// falls back; with every checkpoint rotten the resume fails naming both.
class FallBackAtLoad : public HashOnLoad {
 protected:
  // Steps 2 and 4 of fsdp, saved as a launcher (RANK unset).
  void SaveStepsTwoAndFour() {
    dir_ = TestDir("ckpt");
    const RunOutput saved = Train(ResumeConfig("fsdp", 4), kRanks, Saving(dir_, 2));
    ASSERT_TRUE(saved.status.ok()) << saved.status;
    ASSERT_TRUE(VerifyCheckpoint(Step(4)).ok());
  }
};

TEST_F(FallBackAtLoad, LatestFallsBackOnEveryRankAndEndsEqualToARunThatNeverStopped) {
  SaveStepsTwoAndFour();
  const RunOutput continuous = Train(ResumeConfig("fsdp", 6), kRanks, CheckpointOptions());
  ASSERT_TRUE(continuous.status.ok()) << continuous.status;
  ASSERT_TRUE(CorruptShardFile(Step(4), 1).ok());
  std::vector<int64_t> hashed;
  std::vector<std::string> resumed;
  RunOutput out;
  for (const absl::Status& status :
       ResumeAsRanks("fsdp", nullptr, &hashed, &out, 6, "latest", &resumed)) {
    ASSERT_TRUE(status.ok()) << status;
  }
  EXPECT_EQ(resumed, std::vector<std::string>(kRanks, Step(2)));
  EXPECT_EQ(out.result.checkpoint().resumed_step(), 2);
  EXPECT_EQ(out.result.checkpoint().resumed_from(), Step(2));
  bool said = false;
  for (const std::string& note : out.result.checkpoint().notes()) {
    said |= absl::StrContains(note, "--resume=latest: skipping step_00000004, which fails at "
                                    "load (") &&
            absl::StrContains(note, "rank 1: " + Step(4) + "/rank_00001.bin: corrupt: SHA-256 "
                                    "differs") &&
            absl::StrContains(note, "falling back to step_00000002");
  }
  EXPECT_TRUE(said) << "no note names the skipped checkpoint and why";
  ASSERT_EQ(out.params.size(), continuous.params.size());
  for (size_t i = 0; i < out.params.size(); ++i) {
    EXPECT_TRUE(out.params[i].equal(continuous.params[i])) << "parameter " << i;
  }
}

TEST_F(FallBackAtLoad, AnExplicitResumeNeverFallsBackAndAllRottenFailsNamingBoth) {
  SaveStepsTwoAndFour();
  ASSERT_TRUE(CorruptShardFile(Step(4), 1).ok());
  std::vector<int64_t> hashed;
  for (const absl::Status& status : ResumeAsRanks("fsdp", nullptr, &hashed, nullptr, 6, Step(4))) {
    EXPECT_FALSE(status.ok());
    EXPECT_TRUE(absl::StrContains(status.message(), "rank 1: " + Step(4) + "/rank_00001.bin"))
        << status;
    EXPECT_FALSE(absl::StrContains(status.message(), "falling back")) << status;
  }
  ASSERT_TRUE(CorruptShardFile(Step(2), 2).ok());
  for (const absl::Status& status : ResumeAsRanks("fsdp", nullptr, &hashed, nullptr, 6)) {
    EXPECT_FALSE(status.ok());
    EXPECT_TRUE(absl::StrContains(status.message(), "rank 2: " + Step(2) + "/rank_00002.bin"))
        << status;
    EXPECT_TRUE(absl::StrContains(status.message(),
                                  "no older checkpoint of this run to fall back to (failed at "
                                  "load before: step_00000004 (resuming from " +
                                      Step(4) + ": rank 1: "))
        << status;
  }
}

}  // namespace
}  // namespace mtb::checkpoint
