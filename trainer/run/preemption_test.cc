// The preemption notice and the flight recorder both hear a SIGTERM: the
// recorder dumps (reason SIGTERM) and the process lives on to save and exit
// by itself; without the notice handler SIGTERM still kills it after the dump
// (flight_recorder_test).
#include "trainer/run/preemption.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/collective/flight_dumps.h"
#include "common/collective/flight_recorder.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

std::string DumpPath() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/preempted_rank.json");
}

// A rank: its communicator's recorder registered for dumps, then the notice
// handler; a SIGTERM arrives mid-step; it goes on, sees the notice, waits
// for the dump (the dumper thread writes it) and exits 4 by itself.
void RankThatGetsANotice() {
  auto recorder = std::make_shared<collective::FlightRecorder>();
  recorder->SetPosition(3, "backward");
  recorder->SetDumpPath(DumpPath());
  collective::RegisterForSignalDumps(recorder);
  InstallPreemptionHandler(/*rank=*/1);
  const absl::Time before = absl::Now();
  if (PreemptionNoticeReceived()) std::_Exit(10);
  ::raise(SIGTERM);
  if (!PreemptionNoticeReceived()) std::_Exit(11);
  if (PreemptionNoticeTime() < before || PreemptionNoticeTime() > absl::Now()) std::_Exit(12);
  ::raise(SIGTERM);  // a second notice changes nothing
  for (int wait = 0; wait < 500 && !PathExists(DumpPath()); ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // The dumper thread renames the file into place, then says so on stderr:
  // give that line time to follow before this process ends.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  std::_Exit(PathExists(DumpPath()) ? 4 : 13);
}

TEST(PreemptionDeathTest, ANoticeIsRecordedTheFlightRecorderDumpsAndTheRankLivesOn) {
  (void)::unlink(DumpPath().c_str());
  EXPECT_EXIT(RankThatGetsANotice(), ::testing::ExitedWithCode(4),
              "rank 1: SIGTERM \\(a preemption notice, or the launcher's teardown\\): finishing "
              "this step, then saving a "
              "checkpoint of it and exiting 4\n"
              "(.|\n)*flight recorder dumped to");
  collective::FlightRecorderDump dump;
  ASSERT_TRUE(ReadJsonFile(DumpPath(), &dump).ok());
  EXPECT_EQ(dump.step(), 3);
  EXPECT_EQ(dump.reason(), "SIGTERM (the launcher's teardown, or a kill)");
}

TEST(Preemption, NoNoticeBeforeASigterm) {
  EXPECT_FALSE(PreemptionNoticeReceived());
  EXPECT_EQ(PreemptionNoticeTime(), absl::InfinitePast());
}

}  // namespace
}  // namespace mtb
