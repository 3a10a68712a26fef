// Verification (verify.cc): anything that does not verify is never used.
// Corruptions by a disk (flipped bytes, truncation, a missing file) and by
// an editor who knows the format (a manifest edited and READY resealed to
// match) are both caught, named by file, and `latest` falls back past them.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "common/base/sha256.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "gtest/gtest.h"
#include "trainer/checkpoint/audit.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpoint_test_fixture.h"
#include "trainer/checkpoint/shard_file.h"

namespace mtb::checkpoint {
namespace {

using CheckpointVerify = CheckpointTest;

bool NamesFile(const absl::Status& status, const std::string& file) {
  return status.message().find(file) != absl::string_view::npos;
}

TEST_F(CheckpointVerify, EveryFlippedByteOfTheManifestOrReadyIsDetected) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  // leveldb log_test style: every offset of both files, two kinds of flip
  // (all bits, the lowest bit: a JSON digit or space that stays valid).
  int flips = 0, detected = 0, resolutions = 0, fell_back = 0;
  for (const char* name : {"manifest.json", "READY"}) {
    const std::string path = Dir(4) + "/" + name;
    const std::string original = *ReadFileToString(path);
    ASSERT_GT(original.size(), 20u);
    // In place, unsynced: thousands of edits, no fsync each.
    const int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    for (size_t at = 0; at < original.size(); ++at) {
      for (const unsigned char mask : {0xffu, 0x01u}) {
        const char flipped = static_cast<char>(original[at] ^ mask);
        ASSERT_EQ(::pwrite(fd, &flipped, 1, static_cast<off_t>(at)), 1);
        ++flips;
        const absl::Status verified = Verify(Dir(4));
        // The error names the file that changed.
        if (!verified.ok() && NamesFile(verified, name)) ++detected;
        // Resolving re-verifies step 2 in full each time: sampled (every
        // 4th offset) to keep the test short; detection above is every one.
        if (mask == 0xff && at % 4 == 0) {
          ++resolutions;
          absl::StatusOr<Resolved> resolved = ResolveLatest(root_);
          if (resolved.ok() && resolved->dir == Dir(2)) ++fell_back;
        }
        ASSERT_EQ(::pwrite(fd, &original[at], 1, static_cast<off_t>(at)), 1);
      }
    }
    ::close(fd);
  }
  EXPECT_EQ(detected, flips);
  EXPECT_EQ(fell_back, resolutions);
  EXPECT_GT(flips, 1000);
  // The negative case: the restored files verify.
  EXPECT_TRUE(Verify(Dir(4)).ok()) << Verify(Dir(4));
}

TEST_F(CheckpointVerify, AnEditedManifestIsDataLossNamingTheFile) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  // Valid JSON, a plausible value: the shard moved by 4 bytes.
  CheckpointManifest manifest = *ReadManifest(Dir(4));
  ASSERT_EQ(manifest.tensors(1).name(), "model/w");  // rank 0's first tensor
  manifest.mutable_tensors(1)->mutable_shards(0)->set_byte_offset(
      manifest.tensors(1).shards(0).byte_offset() + 4);
  ASSERT_TRUE(WriteJsonFile(manifest, Dir(4) + "/manifest.json").ok());
  EXPECT_EQ(Verify(Dir(4)).code(), absl::StatusCode::kDataLoss);
  ExpectBrokenAndFallback("manifest.json: corrupt: SHA-256 differs from the one READY records");
  // The same edit resealed (READY rewritten to match) is caught by the
  // layout: the byte ranges no longer tile the shard file.
  Reseal(4, manifest);
  ExpectBrokenAndFallback("rank_00000.bin: corrupt: the manifest's byte ranges");
}

TEST_F(CheckpointVerify, ResealedEditsOfRunStepWorldSizeAndHeadersAreCaught) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  const CheckpointManifest saved = *ReadManifest(Dir(4));
  CheckpointManifest manifest = saved;
  manifest.set_step(6);
  Reseal(4, manifest);
  ExpectBrokenAndFallback("manifest.json: corrupt: step 6 in directory step_00000004");
  manifest = saved;
  manifest.set_world_size(3);
  Reseal(4, manifest);
  ExpectBrokenAndFallback("not one rank_NNNNN.bin and .meta per rank of world size 3");
  manifest = saved;
  manifest.mutable_files(0)->set_name("../rank_00000.bin");
  Reseal(4, manifest);
  ExpectBrokenAndFallback("file name '../rank_00000.bin' is not one rank_NNNNN.bin or .meta");
  // A shard header that names another rank or tensor count.
  Reseal(4, saved);
  ASSERT_TRUE(Verify(Dir(4)).ok()) << Verify(Dir(4));
  EditByte(Dir(4) + "/rank_00001.bin", 12, 0);
  Rehash(4, "rank_00001.bin");
  ExpectBrokenAndFallback(
      "rank_00001.bin: corrupt: its header says rank 0 with 1 tensors, the manifest rank 1 "
      "with 1");
  ASSERT_TRUE(Save(4).ok());
  EditByte(Dir(4) + "/rank_00000.bin", 16, 5);
  Rehash(4, "rank_00000.bin");
  ExpectBrokenAndFallback("its header says rank 0 with 5 tensors, the manifest rank 0 with 2");
  // A rank's state file of another rank.
  ASSERT_TRUE(Save(4).ok());
  const std::string meta0 = *ReadFileToString(Dir(4) + "/rank_00000.meta");
  ASSERT_TRUE(WriteFileAtomically(Dir(4) + "/rank_00001.meta", meta0).ok());
  Rehash(4, "rank_00001.meta");
  ExpectBrokenAndFallback("rank_00001.meta: corrupt: it is rank 0's state at step 4");
}

TEST_F(CheckpointVerify, AFormatOneCheckpointIsRefusedNamingTheFormat) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  // What a format-1 save wrote: READY holding the run id only.
  ASSERT_TRUE(WriteFileAtomically(Dir(4) + "/READY", "run-a\n").ok());
  EXPECT_EQ(Verify(Dir(4)).code(), absl::StatusCode::kFailedPrecondition);
  ExpectBrokenAndFallback("READY: holds no manifest digest: a checkpoint of format 1");
}

TEST_F(CheckpointVerify, ATruncatedShardIsCorruptAndResumeFallsBack) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  ASSERT_EQ(::truncate((Dir(4) + "/rank_00001.bin").c_str(), 30), 0);
  ExpectBrokenAndFallback("rank_00001.bin: corrupt: 30 bytes, the manifest says 32 (truncated)");
}

TEST_F(CheckpointVerify, AFlippedShardByteIsCorruptAndTheAuditSaysSo) {
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
}

TEST_F(CheckpointVerify, AMissingFileIsNotCorruptDataButMissing) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  ASSERT_EQ(::unlink((Dir(4) + "/rank_00001.meta").c_str()), 0);
  EXPECT_EQ(Verify(Dir(4)).code(), absl::StatusCode::kNotFound);
  ExpectBrokenAndFallback("rank_00001.meta: missing (listed in the manifest)");
}

TEST_F(CheckpointVerify, AMissingDirectoryIsNotFound) {
  const absl::Status verified = Verify(root_ + "/step_00000099");
  EXPECT_EQ(verified.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(verified.message(), root_ + "/step_00000099: not found");
}

TEST_F(CheckpointVerify, AMissingShardEntryLeavesElementsUncovered) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  CheckpointManifest manifest = *ReadManifest(Dir(4));
  for (TensorEntry& tensor : *manifest.mutable_tensors()) {
    if (tensor.name() == "model/w") tensor.mutable_shards()->RemoveLast();
  }
  Reseal(4, manifest);
  ExpectBrokenAndFallback("model/w: shards cover 4 of 6 elements");
}

TEST_F(CheckpointVerify, BadMagicAndBadVersionAreNamed) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  EditByte(Dir(4) + "/rank_00001.bin", 0, 'X');
  Rehash(4, "rank_00001.bin");
  ExpectBrokenAndFallback("rank_00001.bin: bad magic: not a checkpoint shard file");
  ASSERT_TRUE(Save(4).ok());
  EditByte(Dir(4) + "/rank_00001.bin", 8, 9);
  Rehash(4, "rank_00001.bin");
  ExpectBrokenAndFallback("rank_00001.bin: format version 9, this build reads version 2");
}

TEST_F(CheckpointVerify, ATrustedDigestSkipsHashingButNotTheLayout) {
  ASSERT_TRUE(Save(2).ok());
  absl::StatusOr<VerifiedCheckpoint> full = VerifyCheckpoint(Dir(2));
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_TRUE(full->content_hashed);
  EXPECT_EQ(full->manifest_sha256, Sha256Hex(*ReadFileToString(Dir(2) + "/manifest.json")));
  // A flipped payload byte is what only hashing sees: the trusted pass does
  // not hash (the launcher did), a pass with another digest does.
  EditByte(Dir(2) + "/rank_00000.bin", 30, 'x');
  absl::StatusOr<VerifiedCheckpoint> trusted = VerifyCheckpoint(Dir(2), full->manifest_sha256);
  ASSERT_TRUE(trusted.ok()) << trusted.status();
  EXPECT_FALSE(trusted->content_hashed);
  EXPECT_EQ(VerifyCheckpoint(Dir(2), std::string(64, '0')).status().code(),
            absl::StatusCode::kDataLoss);
  // Sizes and headers are still checked with a trusted digest.
  ASSERT_EQ(::truncate((Dir(2) + "/rank_00001.bin").c_str(), 30), 0);
  const absl::Status truncated = VerifyCheckpoint(Dir(2), full->manifest_sha256).status();
  EXPECT_EQ(truncated.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(NamesFile(truncated, "rank_00001.bin: corrupt: 30 bytes")) << truncated;
}

// Range digests (ShardPlacement.sha256): every tensor's bytes have their
// own SHA-256, which verify checks, so that a reader can hash only what it
// reads. A flipped payload byte whose file digest was resealed to match is
// still caught, naming the file and the tensor; a checkpoint written before
// range digests (none in its manifest) still verifies by its file digests.
TEST_F(CheckpointVerify, EveryTensorRangeHasItsOwnDigestAndVerifyChecksIt) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  const CheckpointManifest manifest = *ReadManifest(Dir(4));
  int ranges = 0;
  for (const TensorEntry& tensor : manifest.tensors()) {
    for (const ShardPlacement& shard : tensor.shards()) {
      const std::string file = *ReadFileToString(Dir(4) + "/" + shard.file());
      EXPECT_EQ(shard.sha256(), Sha256Hex(file.substr(shard.byte_offset(), shard.byte_length())))
          << tensor.name() << " in " << shard.file();
      ++ranges;
    }
  }
  EXPECT_EQ(ranges, 3);
  // Byte 30 of rank 0's file is in model/w's range [24, +16).
  EditByte(Dir(4) + "/rank_00000.bin", 30, 'x');
  Rehash(4, "rank_00000.bin");
  ExpectBrokenAndFallback(
      "rank_00000.bin: corrupt: SHA-256 differs from the manifest's in tensor model/w "
      "(bytes [24, +16))");
}

TEST_F(CheckpointVerify, ACheckpointWithoutRangeDigestsIsCheckedByItsFileDigests) {
  ASSERT_TRUE(Save(2).ok());
  ASSERT_TRUE(Save(4).ok());
  CheckpointManifest manifest = *ReadManifest(Dir(4));
  for (TensorEntry& tensor : *manifest.mutable_tensors()) {
    for (ShardPlacement& shard : *tensor.mutable_shards()) shard.clear_sha256();
  }
  Reseal(4, manifest);
  ASSERT_TRUE(Verify(Dir(4)).ok()) << Verify(Dir(4));
  EditByte(Dir(4) + "/rank_00001.bin", 30, 'x');
  ExpectBrokenAndFallback("rank_00001.bin: corrupt: SHA-256 differs from the manifest's");
  // Without range digests, a resealed file digest is all there is: the edit
  // passes (what the range digests above close).
  Rehash(4, "rank_00001.bin");
  EXPECT_TRUE(Verify(Dir(4)).ok());
}

}  // namespace
}  // namespace mtb::checkpoint
