#include "common/trace/window.h"

#include "gtest/gtest.h"

namespace mtb::trace {
namespace {

TEST(TraceWindow, EmptyMeansEveryOne) {
  const absl::StatusOr<TraceWindow> window = ParseTraceWindow("", "", 10, "--steps=10");
  ASSERT_TRUE(window.ok());
  EXPECT_TRUE(window->Contains(1));
  EXPECT_TRUE(window->Contains(1000000));
  EXPECT_FALSE(window->Contains(0));
}

TEST(TraceWindow, ABKeepsAThroughB) {
  const absl::StatusOr<TraceWindow> window =
      ParseTraceWindow("2:3", "/tmp/t", 5, "5 configurations");
  ASSERT_TRUE(window.ok()) << window.status();
  EXPECT_FALSE(window->Contains(1));
  EXPECT_TRUE(window->Contains(2));
  EXPECT_TRUE(window->Contains(3));
  EXPECT_FALSE(window->Contains(4));
}

TEST(TraceWindow, OutOfRangeOrMalformedNamesTheFlagAndTheBound) {
  for (const char* bad : {"0:2", "3:2", "1:6", "2", "a:b", "1:2:3", ":"}) {
    const absl::StatusOr<TraceWindow> window =
        ParseTraceWindow(bad, "/tmp/t", 5, "--steps=5");
    ASSERT_FALSE(window.ok()) << bad;
    EXPECT_EQ(window.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(window.status().message(),
              std::string("--trace_steps=") + bad +
                  " must be A:B with 1 <= A <= B <= --steps=5");
  }
}

TEST(TraceWindow, AWindowWithoutATraceDirIsRefused) {
  const absl::StatusOr<TraceWindow> window = ParseTraceWindow("1:2", "", 5, "--steps=5");
  ASSERT_FALSE(window.ok());
  EXPECT_EQ(window.status().message(), "--trace_steps needs --trace_dir");
}

}  // namespace
}  // namespace mtb::trace
