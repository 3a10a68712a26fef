#include "common/base/disk_ceiling.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

using ::testing::HasSubstr;

std::string TestDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

TEST(DiskCeiling, MeasuresBothBoundsAndTakesTheSmaller) {
  for (int threads : {1, 2}) {
    DiskCeilingOptions options;
    options.directory = TestDir();
    options.bytes = 3 << 20;
    options.threads = threads;
    options.block_bytes = 1 << 20;
    absl::StatusOr<DiskCeiling> ceiling = MeasureDiskCeiling(options);
    ASSERT_TRUE(ceiling.ok()) << ceiling.status();
    EXPECT_EQ(ceiling->threads, threads);
    EXPECT_EQ(ceiling->bytes, 3 << 20);  // 3 MiB splits into 4096-aligned shares exactly
    EXPECT_GT(ceiling->write_seconds, 0);
    EXPECT_GT(ceiling->sha256_seconds, 0);
    EXPECT_DOUBLE_EQ(ceiling->ceiling_gbps(),
                     std::min(ceiling->write_gbps(), ceiling->sha256_gbps()));
    EXPECT_STREQ(ceiling->bound(),
                 ceiling->write_gbps() <= ceiling->sha256_gbps() ? "disk" : "sha256");
    EXPECT_TRUE(ceiling->files.empty());  // deleted
  }
}

TEST(DiskCeiling, SharesRoundUpToTheO_DirectAlignmentAndKeptFilesHoldThem) {
  DiskCeilingOptions options;
  options.directory = TestDir();
  options.bytes = 10000;  // 5000 per thread -> 8192
  options.threads = 2;
  options.keep_files = true;
  absl::StatusOr<DiskCeiling> ceiling = MeasureDiskCeiling(options);
  ASSERT_TRUE(ceiling.ok()) << ceiling.status();
  EXPECT_EQ(ceiling->bytes, 2 * 8192);
  ASSERT_EQ(ceiling->files.size(), 2u);
  for (const std::string& file : ceiling->files) {
    FILE* f = std::fopen(file.c_str(), "rb");
    ASSERT_NE(f, nullptr) << file;
    std::fseek(f, 0, SEEK_END);
    EXPECT_EQ(std::ftell(f), 8192) << file;
    // Random bytes, not zeros: a disk cannot skip or compress them.
    std::fseek(f, 0, SEEK_SET);
    int zeros = 0;
    for (int i = 0; i < 4096; ++i) zeros += std::fgetc(f) == 0;
    EXPECT_LT(zeros, 64) << file;
    std::fclose(f);
    ::unlink(file.c_str());
  }
}

TEST(DiskCeiling, BadOptionsAreInvalidArgumentsAndAMissingDirectoryAPrecondition) {
  DiskCeilingOptions options;
  options.directory = TestDir();
  options.bytes = 0;
  EXPECT_EQ(MeasureDiskCeiling(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.bytes = 4096;
  options.threads = 0;
  EXPECT_THAT(std::string(MeasureDiskCeiling(options).status().message()),
              HasSubstr("threads must be >= 1, not 0"));
  options.threads = 1;
  options.block_bytes = 1000;
  EXPECT_THAT(std::string(MeasureDiskCeiling(options).status().message()),
              HasSubstr("block_bytes 1000 is not a positive multiple of 4096"));
  options.block_bytes = 4096;
  options.directory = TestDir() + "/no/such/dir";
  const absl::Status missing = MeasureDiskCeiling(options).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(missing.message()), HasSubstr("/no/such/dir is not a directory"));
}

// A ceiling of 1 GB/s (the disk) under 2 GB/s (SHA-256): 1 GB in 1 s.
DiskCeiling OneGigabytePerSecond() {
  DiskCeiling ceiling;
  ceiling.threads = 1;
  ceiling.bytes = 1000000000;
  ceiling.write_seconds = 1.0;
  ceiling.sha256_seconds = 0.5;
  return ceiling;
}

TEST(JudgeAgainstCeiling, ASaveUnderItsCeilingIsAShareOfIt) {
  const DiskCeiling ceiling = OneGigabytePerSecond();
  EXPECT_STREQ(ceiling.bound(), "disk");
  EXPECT_DOUBLE_EQ(ceiling.ceiling_gbps(), 1.0);
  const CeilingVerdict verdict = JudgeAgainstCeiling(ceiling, 500000000, 1.0);
  EXPECT_DOUBLE_EQ(verdict.save_gbps, 0.5);
  EXPECT_DOUBLE_EQ(verdict.share, 0.5);
  EXPECT_TRUE(verdict.ceiling_valid);
}

TEST(JudgeAgainstCeiling, BeatingItByMoreThanTenPercentMakesTheCeilingInvalid) {
  const DiskCeiling ceiling = OneGigabytePerSecond();
  // 1.09 GB/s: within the 10% the two measurements may drift apart.
  EXPECT_TRUE(JudgeAgainstCeiling(ceiling, 1090000000, 1.0).ceiling_valid);
  // 1.11 GB/s: the ceiling did not bound the save.
  const CeilingVerdict beaten = JudgeAgainstCeiling(ceiling, 1110000000, 1.0);
  EXPECT_FALSE(beaten.ceiling_valid);
  EXPECT_NEAR(beaten.share, 1.11, 1e-12);
  // The SHA-256 bound decides when it is the smaller one.
  DiskCeiling hash_bound = ceiling;
  hash_bound.sha256_seconds = 4.0;  // 0.25 GB/s
  EXPECT_STREQ(hash_bound.bound(), "sha256");
  EXPECT_FALSE(JudgeAgainstCeiling(hash_bound, 500000000, 1.0).ceiling_valid);
  // An unmeasured ceiling bounds nothing.
  EXPECT_FALSE(JudgeAgainstCeiling(DiskCeiling{}, 1, 1.0).ceiling_valid);
}

}  // namespace
}  // namespace mtb
