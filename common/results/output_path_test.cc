// Outputs never overwrite inputs (CheckOutputsAgainstInputs): the same
// file by any spelling, symlink or hard link, and one run's outputs that
// would overwrite each other.
#include "common/results/output_path.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "common/results/atomic_file.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

class OutputCollision : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(std::getenv("TEST_TMPDIR")) + "/" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_TRUE(CreateDirectories(dir_ + "/sub").ok());
    ASSERT_TRUE(WriteFileAtomically(dir_ + "/data.bin", "tokens").ok());
  }
  absl::Status Check(const std::string& out) {
    return CheckOutputsAgainstInputs({{"--out", out}}, {{"--data", dir_ + "/data.bin"}});
  }
  std::string dir_;
};

TEST_F(OutputCollision, TheSameFileByAnySpellingIsRefusedNamingBoth) {
  ASSERT_EQ(::symlink((dir_ + "/data.bin").c_str(), (dir_ + "/link.bin").c_str()), 0);
  ASSERT_EQ(::link((dir_ + "/data.bin").c_str(), (dir_ + "/hard.bin").c_str()), 0);
  for (const std::string& out :
       {dir_ + "/data.bin", dir_ + "/./sub/../data.bin", dir_ + "//data.bin",
        dir_ + "/link.bin", dir_ + "/hard.bin"}) {
    const absl::Status refused = Check(out);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << out;
    EXPECT_EQ(refused.message(), "--out=" + out + " is the same file as --data (" + dir_ +
                                     "/data.bin): refusing to overwrite an input; choose "
                                     "another output path");
  }
  EXPECT_EQ(*ReadFileToString(dir_ + "/data.bin"), "tokens");
  // The negative case: another file, and a copy with the same bytes.
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/copy.bin", "tokens").ok());
  EXPECT_TRUE(Check(dir_ + "/copy.bin").ok());
  EXPECT_TRUE(Check(dir_ + "/sub/data.bin").ok());
  EXPECT_TRUE(Check("").ok());
}

TEST_F(OutputCollision, RelativeSpellingsOfTheWorkingDirectoryMatch) {
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(::chdir(dir_.c_str()), 0);
  const absl::Status refused = Check("./sub/../data.bin");
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(::chdir(cwd), 0);
}

TEST_F(OutputCollision, TwoOutputsThatAreOneFileAreRefusedEvenBeforeTheyExist) {
  const absl::Status refused = CheckOutputsAgainstInputs(
      {{"--out", dir_ + "/r.json"}, {"--markdown", dir_ + "/sub/../r.json"}}, {});
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("--markdown=" + dir_ + "/sub/../r.json and --out=" + dir_ +
                                   "/r.json are the same file"),
            std::string::npos)
      << refused;
  EXPECT_FALSE(PathExists(dir_ + "/r.json")) << "the check writes nothing";
  EXPECT_TRUE(CheckOutputsAgainstInputs(
                  {{"--out", dir_ + "/r.json"}, {"--markdown", dir_ + "/r.md"}}, {})
                  .ok());
}

TEST_F(OutputCollision, NormalPathFoldsDotsAndResolvesExistingSymlinks) {
  ASSERT_EQ(::symlink((dir_ + "/sub").c_str(), (dir_ + "/alias").c_str()), 0);
  EXPECT_EQ(NormalPath(dir_ + "/alias/new/../x.json"), NormalPath(dir_ + "/sub/x.json"));
  EXPECT_NE(NormalPath(dir_ + "/alias/x.json"), NormalPath(dir_ + "/x.json"));
}

TEST(FreeSpace, TooLittleIsRefusedNamingTheFlagAndSizes) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  const absl::StatusOr<int64_t> free_bytes = FreeBytesAt(dir + "/not/yet/there.json");
  ASSERT_TRUE(free_bytes.ok()) << free_bytes.status();
  EXPECT_GT(*free_bytes, 0);
  EXPECT_TRUE(CheckFreeSpace("out", dir + "/r.json", 1).ok());
  const absl::Status refused = CheckFreeSpace("out", dir + "/r.json", *free_bytes * 2 + 1);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("--out=" + dir + "/r.json: not enough free space: it needs "),
            std::string::npos)
      << refused;
}

}  // namespace
}  // namespace mtb
