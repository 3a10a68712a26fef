// Verify once, read only what you need (docs/checkpoint.md, "Verify once"):
// ranks that no launcher of ours started (torchrun, by hand: RANK set and
// MTB_VERIFIED_CHECKPOINT_SHA256 absent) check a resume checkpoint's
// structure when they plan and hash, when they load, only the files they
// read, whole (a file's digest vouches for the whole file). Counted per rank
// (Checkpointer::load_hashed_bytes) on three rank threads over Gloo, against
// the manifest's file sizes: an fsdp rank hashes its own shard and state
// files, and rank 0's shard file, which holds the AdamW step every rank
// loads (rank 2 never hashes rank 1's); a ddp rank every shard file (its
// parameters are whole) and its own state file; a rank of our launcher,
// which verified the checkpoint first, hashes nothing. A flipped byte in a
// file only rank 1 reads fails the resume on every rank, naming the file.
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
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
  std::vector<absl::Status> ResumeAsRanks(const std::string& strategy, const char* verdict,
                                          std::vector<int64_t>* hashed,
                                          RunOutput* out = nullptr) {
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
    };
    std::vector<absl::Status> statuses = TrainAllowingFailure(
        ResumeConfig(strategy, 4), kRanks, Saving(dir_, 0, "latest"), train, out);
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

int64_t AllFiles(const CheckpointManifest& manifest) {
  int64_t total = 0;
  for (const FileEntry& file : manifest.files()) total += file.size();
  return total;
}

TEST_F(HashOnLoad, AnFsdpRankWithoutALauncherHashesOnlyTheFilesItReads) {
  const CheckpointManifest manifest = SaveStepTwo("fsdp");
  std::vector<int64_t> hashed;
  RunOutput out;
  for (const absl::Status& status : ResumeAsRanks("fsdp", nullptr, &hashed, &out)) {
    ASSERT_TRUE(status.ok()) << status;
  }
  for (int rank = 0; rank < kRanks; ++rank) {
    const std::string own = absl::StrFormat("rank_%05d", rank);
    std::vector<std::string> reads = {own + ".bin", own + ".meta"};
    if (rank != 0) reads.push_back("rank_00000.bin");  // the AdamW step
    EXPECT_EQ(hashed[rank], SizeOf(manifest, reads)) << "rank " << rank;
    EXPECT_LT(hashed[rank], AllFiles(manifest)) << "rank " << rank << " hashed every file";
  }
  EXPECT_EQ(out.result.checkpoint().load_hashed_bytes(), hashed[0]);
}

TEST_F(HashOnLoad, ADdpRankHashesEveryShardFileItReadsAndOnlyItsOwnStateFile) {
  const CheckpointManifest manifest = SaveStepTwo("ddp");
  std::vector<int64_t> hashed;
  for (const absl::Status& status : ResumeAsRanks("ddp", nullptr, &hashed)) {
    ASSERT_TRUE(status.ok()) << status;
  }
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(hashed[rank], SizeOf(manifest, {"rank_00000.bin", "rank_00001.bin",
                                              "rank_00002.bin",
                                              absl::StrFormat("rank_%05d.meta", rank)}))
        << "rank " << rank;
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

TEST_F(HashOnLoad, AFlippedByteInAFileOnlyRankOneReadsFailsTheResumeOnEveryRank) {
  SaveStepTwo("fsdp");
  ASSERT_TRUE(CorruptShardFile(Step(2), 1).ok());
  std::vector<int64_t> hashed;
  const std::vector<absl::Status> statuses = ResumeAsRanks("fsdp", nullptr, &hashed);
  ASSERT_EQ(statuses.size(), static_cast<size_t>(kRanks));
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_FALSE(statuses[rank].ok()) << "rank " << rank << " used a corrupt checkpoint";
    EXPECT_TRUE(absl::StrContains(statuses[rank].message(),
                                  "rank 1: " + Step(2) +
                                      "/rank_00001.bin: corrupt: SHA-256 differs"))
        << "rank " << rank << ": " << statuses[rank];
  }
  // The control: a launcher (RANK unset) hashes every file when it plans
  // and refuses the same checkpoint before any rank starts.
  EXPECT_FALSE(VerifyCheckpoint(Step(2)).ok());
}

}  // namespace
}  // namespace mtb::checkpoint
