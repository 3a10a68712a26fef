#include "comm_bench/nccl_bootstrap.h"

#include <cstdlib>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb::comm_bench {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(NcclBootstrap, OtherRanksReadWhatRankZeroPublishes) {
  const std::string path = TempPath("id_ok");
  const std::string id(128, 'x');
  std::thread rank_zero([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_TRUE(PublishNcclId(path, id).ok());
  });
  absl::StatusOr<std::string> read = WaitForNcclId(path, 128, absl::Seconds(10));
  rank_zero.join();
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, id);
}

TEST(NcclBootstrap, AnExistingFileIsRefusedNotReused) {
  const std::string path = TempPath("id_stale");
  ASSERT_TRUE(PublishNcclId(path, std::string(128, 'a')).ok());
  absl::Status again = PublishNcclId(path, std::string(128, 'b'));
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(again.message()), HasSubstr(path));
}

TEST(NcclBootstrap, WaitingTimesOutNamingThePath) {
  const std::string path = TempPath("id_never");
  absl::StatusOr<std::string> read = WaitForNcclId(path, 128, absl::Milliseconds(50));
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr(path));
}

TEST(NcclBootstrap, AWrongSizedIdIsDataLoss) {
  const std::string path = TempPath("id_short");
  ASSERT_TRUE(PublishNcclId(path, "short").ok());
  EXPECT_EQ(WaitForNcclId(path, 128, absl::Seconds(1)).status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace mtb::comm_bench
