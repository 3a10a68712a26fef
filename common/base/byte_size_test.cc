#include "common/base/byte_size.h"

#include "gtest/gtest.h"

namespace mtb {
namespace {

TEST(ParseByteSize, SuffixesArePowersOf1024) {
  EXPECT_EQ(*ParseByteSize("minbytes", "1K"), 1024);
  EXPECT_EQ(*ParseByteSize("minbytes", "1k"), 1024);
  EXPECT_EQ(*ParseByteSize("maxbytes", "64M"), int64_t{64} << 20);
  EXPECT_EQ(*ParseByteSize("maxbytes", "3M"), int64_t{3} << 20);
  EXPECT_EQ(*ParseByteSize("maxbytes", "2G"), int64_t{2} << 30);
  EXPECT_EQ(*ParseByteSize("maxbytes", "4096"), 4096);
  EXPECT_EQ(*ParseByteSize("maxbytes", "0"), 0);
}

TEST(ParseByteSize, JunkIsInvalidArgumentNamingTheFlag) {
  for (const char* bad : {"", "K", "-1K", "-5", "1.5M", "12Q", "1 K", "0x10",
                          "1KB", "+4", "99999999999999999999"}) {
    absl::StatusOr<int64_t> parsed = ParseByteSize("minbytes", bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find("--minbytes="), absl::string_view::npos)
        << parsed.status();
  }
}

TEST(ParseByteSize, OverflowIsRejectedNotWrapped) {
  EXPECT_FALSE(ParseByteSize("maxbytes", "8589934592G").ok());
  EXPECT_EQ(*ParseByteSize("maxbytes", "1048576G"), int64_t{1} << 50);
}

}  // namespace
}  // namespace mtb
