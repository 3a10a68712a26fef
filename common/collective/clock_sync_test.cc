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

// Hand-computed: rank 1's clock runs 500 us ahead of rank 0's. The round
// trip of 60 us (symmetric) gives -500 exactly; a shorter-looking estimate
// from an asymmetric trip (100 us, the answer 20 us late: -570) or a slow
// one (200 us: -500 +- 100) must not win.
TEST(ClockSync, TheSampleWithTheSmallestRoundTripGivesTheOffset) {
  const std::vector<ClockSample> samples = {
      {1000, 600, 1200},   // rtt 200: 600 - 1100 = -500
      {3000, 2480, 3100},  // rtt 100: 2480 - 3050 = -570
      {5000, 4530, 5060},  // rtt 60: 4530 - 5030 = -500
      {7000, 6600, 7080},  // rtt 80: 6600 - 7040 = -440
  };
  const ClockOffset best = BestClockOffset(samples);
  EXPECT_EQ(best.offset_us, -500);
  EXPECT_EQ(best.rtt_us, 60);
  // Equal round trips: the first wins.
  const ClockOffset first = BestClockOffset({{0, 10, 40}, {100, 90, 140}});
  EXPECT_EQ(first.offset_us, -10);
  EXPECT_EQ(first.rtt_us, 40);
}

// Ranks whose clocks disagree, as on different hosts: rank 1's clock is
// 1.00025 s ahead and rank 2's 3 ms behind; each estimate lies within half
// its round trip of the true offset (what to add to get rank 0's time).
TEST(ClockSync, SkewedClocksAreEstimatedWithinHalfTheRoundTrip) {
  const int world_size = 3;
  const std::vector<int64_t> skew_us = {0, 1000250, -3000};
  const Store store = Store::InProcess(absl::Seconds(20));
  std::vector<absl::StatusOr<ClockOffset>> offsets(world_size, ClockOffset{});
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < world_size; ++rank) {
    ranks.emplace_back([&, rank] {
      offsets[rank] = EstimateClockOffset(store, rank, world_size, 5, absl::Seconds(20),
                                          [&, rank] { return SystemClockUs() + skew_us[rank]; });
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int rank = 1; rank < world_size; ++rank) {
    ASSERT_TRUE(offsets[rank].ok()) << offsets[rank].status();
    EXPECT_LE(std::abs(offsets[rank]->offset_us - static_cast<double>(-skew_us[rank])),
              offsets[rank]->rtt_us / 2 + 1)
        << "rank " << rank << ": offset " << offsets[rank]->offset_us << ", rtt "
        << offsets[rank]->rtt_us;
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
