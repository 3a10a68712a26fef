#include "common/launch/timeouts.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

using ::testing::HasSubstr;

TEST(Timeouts, DefaultsAreValid) {
  EXPECT_TRUE(ValidateTimeoutOptions(TimeoutOptions()).ok());
  EXPECT_TRUE(ValidateTimeoutOptions(TimeoutOptionsFromFlags()).ok());
}

TEST(Timeouts, EachBadValueNamesItsFlagAndRule) {
  struct Case {
    void (*mutate)(TimeoutOptions&);
    const char* message;
  };
  const Case cases[] = {
      {[](TimeoutOptions& o) { o.connect_timeout = absl::ZeroDuration(); },
       "--connect_timeout=0 must be a positive"},
      {[](TimeoutOptions& o) { o.first_step_timeout = absl::Seconds(-1); },
       "--first_step_timeout=-1s must be a positive"},
      {[](TimeoutOptions& o) {
         o.collective_timeout = absl::InfiniteDuration();
       },
       "--collective_timeout=inf must be a positive, finite"},
      {[](TimeoutOptions& o) { o.wait_progress_every = absl::ZeroDuration(); },
       "--wait_progress_every=0 must be a positive"},
      {[](TimeoutOptions& o) { o.connect_timeout = absl::Seconds(1); },
       "--connect_timeout=1s must be at least 2s"},
      {[](TimeoutOptions& o) {
         o.first_step_timeout = absl::Seconds(30);
         o.collective_timeout = absl::Minutes(1);
       },
       "--first_step_timeout=30s must be >= --collective_timeout=1m"},
  };
  for (const Case& c : cases) {
    TimeoutOptions options;
    c.mutate(options);
    const absl::Status status = ValidateTimeoutOptions(options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  }
}

TEST(Timeouts, TheHeartbeatMustEndAHangBeforeTheCollectiveTimeout) {
  TimeoutOptions options;
  options.collective_timeout = absl::Seconds(10);
  EXPECT_TRUE(ValidateHeartbeatTimeout(absl::ZeroDuration(), options).ok());
  EXPECT_TRUE(ValidateHeartbeatTimeout(absl::Seconds(9), options).ok());
  const absl::Status status = ValidateHeartbeatTimeout(absl::Seconds(10), options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "--heartbeat_timeout=10s must be < --collective_timeout=10s: in a "
            "hang the waiting ranks' collective timeout would end the run "
            "before the launcher could name the rank they wait for (0 turns "
            "the heartbeat off)");
}

}  // namespace
}  // namespace mtb
