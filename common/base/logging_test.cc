#include "common/base/logging.h"

#include <thread>

#include "glog/logging.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

TEST(Logging, ThreadRankOverridesProcessRank) {
  EXPECT_EQ(CurrentLogRank(), -1);
  SetProcessLogRank(3);
  EXPECT_EQ(CurrentLogRank(), 3);
  {
    ScopedThreadLogRank scoped(5);
    EXPECT_EQ(CurrentLogRank(), 5);
    std::thread other([] { EXPECT_EQ(CurrentLogRank(), 3); });
    other.join();
  }
  EXPECT_EQ(CurrentLogRank(), 3);
  SetProcessLogRank(-1);
}

TEST(LoggingDeathTest, EveryLineCarriesTheRank) {
  InitLogging("logging_test");
  EXPECT_DEATH(
      {
        ScopedThreadLogRank scoped(7);
        LOG(ERROR) << "hello from a rank";
        std::abort();
      },
      "rank 7 logging_test.cc:[0-9]+\\] hello from a rank");
}

}  // namespace
}  // namespace mtb
