// The restart history's arithmetic (steps lost) and its log lines, and the
// attempts read back from a store the way a restarted rank 0 reads them.
#include "trainer/run/restart_history.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "trainer/train_result.pb.h"

namespace mtb {
namespace {

AttemptRecord Attempt(int attempt, const std::string& from, int64_t resumed_step,
                      int64_t last_completed_step) {
  AttemptRecord record;
  record.set_attempt(attempt);
  record.set_resumed_from(from);
  record.set_resumed_step(resumed_step);
  record.set_resumed_known(true);
  record.set_last_completed_step(last_completed_step);
  return record;
}

TEST(RestartHistory, StepsLostAreTheCompletedStepsTheNextAttemptTrainsAgain) {
  std::vector<AttemptRecord> attempts = {Attempt(0, "", 0, 5), Attempt(1, "/c/step_00000004", 4, 7),
                                         Attempt(2, "/c/step_00000006", 6, 10)};
  attempts[0].set_ended("rank 1 (pid 7) was killed by SIGKILL");
  attempts[1].set_ended("rank 0 (pid 9) exited with code 1");
  const RestartHistory history = AssembleHistory(attempts, /*max_restarts=*/3);
  EXPECT_EQ(history.restarts(), 2);
  EXPECT_EQ(history.max_restarts(), 3);
  ASSERT_EQ(history.attempts_size(), 3);
  EXPECT_EQ(history.attempts(0).steps_lost(), 1);  // 5 done, resumed at 4
  EXPECT_EQ(history.attempts(1).steps_lost(), 1);  // 7 done, resumed at 6
  EXPECT_EQ(history.attempts(2).steps_lost(), 0);  // the final attempt
  EXPECT_EQ(history.steps_lost(), 2);
  const std::vector<std::string> lines = DescribeHistory(history);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "restart 1 of 3: attempt 0 (fresh start, completed step 5) ended: rank 1 (pid 7) "
            "was killed by SIGKILL; attempt 1 resumed from step_00000004; 1 completed step(s) "
            "lost");
  EXPECT_EQ(lines[1],
            "restart 2 of 3: attempt 1 (from step 4, completed step 7) ended: rank 0 (pid 9) "
            "exited with code 1; attempt 2 resumed from step_00000006; 1 completed step(s) lost");
}

TEST(RestartHistory, UnknownStartsAndStepsLoseNothingByGuess) {
  // Attempt 0 died before recording a step; attempt 1 started afresh.
  AttemptRecord first = Attempt(0, "", 0, -1);
  AttemptRecord second;
  second.set_attempt(1);
  second.set_last_completed_step(3);  // start never recorded
  const RestartHistory history = AssembleHistory({first, second, Attempt(2, "", 0, 6)}, 2);
  EXPECT_EQ(history.attempts(0).steps_lost(), 0);
  EXPECT_EQ(history.attempts(1).steps_lost(), 3);  // attempt 2 started afresh
  EXPECT_EQ(history.steps_lost(), 3);
  const std::vector<std::string> lines = DescribeHistory(history);
  EXPECT_NE(lines[0].find("no step recorded"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("where attempt 1 began is unknown"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("start unknown"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("attempt 2 started afresh"), std::string::npos) << lines[1];
}

}  // namespace
}  // namespace mtb
