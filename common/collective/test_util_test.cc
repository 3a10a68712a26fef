#include "common/collective/test_util.h"

#include <atomic>

#include "ATen/ATen.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

namespace mtb::collective {
namespace {

TEST(RunRanksAsThreads, EveryRankRunsWithItsOwnRank) {
  std::atomic<int> rank_sum{0};
  const absl::Status status = RunRanksAsThreads(4, [&](Communicator& comm) {
    EXPECT_EQ(comm.world_size(), 4);
    rank_sum += comm.rank();
  });
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(rank_sum, 0 + 1 + 2 + 3);
}

TEST(RunRanksAsThreads, AssertionFailuresInRankThreadsFailTheTest) {
  EXPECT_NONFATAL_FAILURE_ON_ALL_THREADS(
      (void)RunRanksAsThreads(2,
                              [](Communicator& comm) {
                                if (comm.rank() == 1)
                                  ADD_FAILURE() << "from the thread of rank 1";
                              }),
      "from the thread of rank 1");
}

TEST(RunRanksAsThreads, ExceptionInABodyIsReportedWithTheRank) {
  const absl::Status status = RunRanksAsThreads(2, [](Communicator& comm) {
    if (comm.rank() == 1) throw std::runtime_error("boom");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(status.message(), "rank 1 threw: boom");
}

TEST(RankGenerator, RanksAndSeedsGetDistinctReproducibleStreams) {
  auto draw = [](uint64_t seed, int rank) {
    at::Generator generator = RankGenerator(seed, rank);
    return at::randn({8}, generator);
  };
  EXPECT_TRUE(at::equal(draw(1, 0), draw(1, 0)));
  EXPECT_FALSE(at::equal(draw(1, 0), draw(1, 1)));
  EXPECT_FALSE(at::equal(draw(1, 1), draw(2, 0)));
  EXPECT_FALSE(at::equal(draw(0, 1), draw(1, 0)));
}

}  // namespace
}  // namespace mtb::collective
