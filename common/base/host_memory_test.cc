#include "common/base/host_memory.h"

#include <cstring>
#include <memory>

#include "gtest/gtest.h"

namespace mtb {
namespace {

TEST(HostMemory, TotalIsPositiveAndAvailableWithinIt) {
  const absl::StatusOr<HostMemory> host = ReadHostMemory();
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_GT(host->total_bytes, 0);
  EXPECT_LE(host->available_bytes, host->total_bytes);
}

// VmHWM is a high-water mark: touching 64 MiB raises it by at least that,
// and it stays when the memory is freed.
TEST(ProcessMemory, HighWaterMarkRisesWithTouchedMemoryAndStays) {
  const absl::StatusOr<ProcessMemory> before = ReadProcessMemory();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_GT(before->rss_bytes, 0);
  EXPECT_GE(before->hwm_bytes, before->rss_bytes);
  constexpr size_t kBytes = size_t{64} << 20;
  {
    std::unique_ptr<char[]> block(new char[kBytes]);
    std::memset(block.get(), 1, kBytes);  // resident only once touched
    const absl::StatusOr<ProcessMemory> touched = ReadProcessMemory();
    ASSERT_TRUE(touched.ok());
    EXPECT_GE(touched->rss_bytes - before->rss_bytes,
              static_cast<int64_t>(kBytes) * 9 / 10);
    // Keeps the block alive and used until after the reading.
    EXPECT_EQ(block[kBytes - 1], 1);
  }
  const absl::StatusOr<ProcessMemory> after = ReadProcessMemory();
  ASSERT_TRUE(after.ok());
  EXPECT_GE(after->hwm_bytes,
            before->rss_bytes + static_cast<int64_t>(kBytes) * 9 / 10);
}

}  // namespace
}  // namespace mtb
