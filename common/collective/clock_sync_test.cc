#include "common/collective/clock_sync.h"

#include <cmath>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace mtb::collective {
namespace {

// Threads share one clock, so the true offset is 0 and every estimate must
// lie within half its own round trip of it.
TEST(ClockSync, RanksOnOneClockEstimateZeroWithinHalfTheirRoundTrip) {
  const int world_size = 3;
  const Store store = Store::InProcess(absl::Seconds(20));
  std::vector<absl::StatusOr<ClockOffset>> offsets(world_size, ClockOffset{});
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < world_size; ++rank) {
    ranks.emplace_back([&, rank] {
      offsets[rank] = EstimateClockOffset(store, rank, world_size, 5, absl::Seconds(20));
    });
  }
  for (std::thread& t : ranks) t.join();
  ASSERT_TRUE(offsets[0].ok()) << offsets[0].status();
  EXPECT_EQ(offsets[0]->offset_us, 0);
  for (int rank = 1; rank < world_size; ++rank) {
    ASSERT_TRUE(offsets[rank].ok()) << offsets[rank].status();
    EXPECT_GT(offsets[rank]->rtt_us, 0);
    EXPECT_LE(std::abs(offsets[rank]->offset_us), offsets[rank]->rtt_us / 2 + 1)
        << "rank " << rank;
  }
}

TEST(ClockSync, AMissingRankZeroTimesOut) {
  const Store store = Store::InProcess(absl::Seconds(5));
  const absl::StatusOr<ClockOffset> alone =
      EstimateClockOffset(store, 1, 2, 2, absl::Milliseconds(300));
  EXPECT_FALSE(alone.ok());
}

}  // namespace
}  // namespace mtb::collective
