#include "common/collective/flight_recorder.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/collective/flight_dumps.h"
#include "common/collective/heartbeat.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "gtest/gtest.h"

namespace mtb::collective {
namespace {

std::string TempDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

CollectiveRecord Record(int64_t sequence, CollectiveOp op = CollectiveOp::kAllReduce) {
  CollectiveRecord record;
  record.sequence = sequence;
  record.op = op;
  record.dtype = "float32";
  record.elements = 1024;
  record.size_bytes = 4096;
  record.issue_time = absl::FromUnixSeconds(1000) + absl::Milliseconds(sequence);
  return record;
}

CollectiveRecord Done(CollectiveRecord record, absl::Status status = absl::OkStatus()) {
  record.completed = true;
  record.wait_return_time = record.issue_time + absl::Milliseconds(1);
  record.status = std::move(status);
  return record;
}

TEST(FlightRecorder, TheRingKeepsTheLastCollectivesWithTheirStates) {
  FlightRecorder recorder(/*capacity=*/3);
  recorder.SetPosition(1, "forward");
  for (int64_t s = 0; s < 5; ++s) recorder.Issued(Record(s));
  recorder.Completed(Done(Record(0)));  // fell out of the ring: still counts
  recorder.Completed(Done(Record(2)));
  recorder.TransferDone(3, absl::FromUnixSeconds(1001));
  recorder.Completed(Done(Record(4), absl::DeadlineExceededError("all_reduce #4 timed out")));
  const FlightRecorderDump dump = recorder.Snapshot("test");
  EXPECT_EQ(dump.capacity(), 3);
  EXPECT_EQ(dump.issued(), 5);
  EXPECT_EQ(dump.last_completed(), 2);
  ASSERT_EQ(dump.entries_size(), 3);
  EXPECT_EQ(dump.entries(0).sequence(), 2);
  EXPECT_EQ(dump.entries(0).state(), "completed");
  EXPECT_EQ(dump.entries(1).sequence(), 3);
  EXPECT_EQ(dump.entries(1).state(), "transfer_done");
  EXPECT_EQ(dump.entries(1).transfer_done_time_us(), 1001 * 1000000LL);
  EXPECT_EQ(dump.entries(2).state(), "failed");
  EXPECT_EQ(dump.entries(2).error(), "all_reduce #4 timed out");
  EXPECT_EQ(dump.entries(2).op(), "all_reduce");
  EXPECT_EQ(dump.entries(2).size_bytes(), 4096);
  EXPECT_EQ(dump.entries(2).step(), 1);
  EXPECT_EQ(dump.entries(2).phase(), "forward");
  EXPECT_EQ(dump.reason(), "test");
}

TEST(FlightRecorder, ProgressNamesTheCollectiveARankWaitsInElseTheOldestInFlight) {
  FlightRecorder recorder;
  RankProgress idle = recorder.Progress();
  EXPECT_EQ(idle.collective, -1);
  recorder.SetPosition(3, "backward");
  recorder.Issued(Record(40));
  recorder.Completed(Done(Record(40)));
  recorder.Issued(Record(41));
  recorder.Issued(Record(42, CollectiveOp::kBroadcast));
  RankProgress progress = recorder.Progress();
  EXPECT_EQ(progress.step, 3);
  EXPECT_EQ(progress.phase, "backward");
  EXPECT_EQ(progress.collective, 41);  // the oldest in flight
  EXPECT_EQ(progress.collective_op, "all_reduce");
  EXPECT_FALSE(progress.waiting);
  EXPECT_EQ(progress.last_completed, 40);
  EXPECT_EQ(progress.issued, 43);
  recorder.SetWaiting(42, true);
  progress = recorder.Progress();
  EXPECT_EQ(progress.collective, 42);
  EXPECT_EQ(progress.collective_op, "broadcast");
  EXPECT_TRUE(progress.waiting);
  // Every event moves the counter; an unchanged position does not.
  const int64_t before = progress.counter;
  recorder.SetPosition(3, "backward");
  EXPECT_EQ(recorder.Progress().counter, before);
  recorder.TransferDone(41, absl::Now());
  EXPECT_GT(recorder.Progress().counter, before);
  EXPECT_FALSE(recorder.Progress().steady);
  recorder.MarkSteady();
  EXPECT_TRUE(recorder.Progress().steady);
}

TEST(FlightRecorder, DumpWritesJsonThatParsesBackAndNothingWithoutAPath) {
  FlightRecorder recorder;
  FlightIdentity identity;
  identity.rank = 2;
  identity.world_size = 3;
  identity.group = "attempt_1/world";
  identity.run_id = "run7";
  identity.attempt = 1;
  recorder.SetIdentity(identity);
  recorder.Issued(Record(0));
  EXPECT_TRUE(recorder.Dump("no path").ok());
  const std::string path =
      absl::StrCat(TempDir(), "/dumps/", FlightDumpFileName(identity));
  EXPECT_EQ(FlightDumpFileName(identity), "flight_run7.attempt1.rank2.json");
  EXPECT_FALSE(ReadFileToString(path).ok());
  recorder.SetDumpPath(path);
  ASSERT_TRUE(recorder.Dump("collective timeout").ok());
  FlightRecorderDump read;
  ASSERT_TRUE(ReadJsonFile(path, &read).ok());
  EXPECT_EQ(read.rank(), 2);
  EXPECT_EQ(read.world_size(), 3);
  EXPECT_EQ(read.run_id(), "run7");
  EXPECT_EQ(read.attempt(), 1);
  EXPECT_EQ(read.group(), "attempt_1/world");
  EXPECT_EQ(read.pid(), ::getpid());
  EXPECT_EQ(read.reason(), "collective timeout");
  ASSERT_EQ(read.entries_size(), 1);
  EXPECT_EQ(read.entries(0).state(), "issued");
}

TEST(FlightRecorder, SteadyStepTimesAndCheckpointPhasesAreTheStepAndSaveTimes) {
  FlightRecorder recorder;
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  recorder.SetPosition(1, "forward", t0);
  recorder.SetPosition(2, "forward", t0 + absl::Seconds(30));  // start-up: not counted
  EXPECT_EQ(recorder.Progress().slowest_step_ms, 0);
  recorder.MarkSteady();
  recorder.SetPosition(2, "checkpoint_write", t0 + absl::Seconds(31));
  recorder.SetPosition(2, "checkpoint_before_latest", t0 + absl::Seconds(32));
  recorder.SetPosition(3, "forward", t0 + absl::Seconds(33.5));
  recorder.SetPosition(4, "forward", t0 + absl::Seconds(34.5));
  const RankProgress progress = recorder.Progress();
  EXPECT_EQ(progress.last_step_ms, 1000);
  EXPECT_EQ(progress.slowest_step_ms, 3500);  // step 2 with its save
  EXPECT_EQ(progress.last_save_ms, 2500);
}

TEST(Heartbeat, LinesRoundTripAndBadOnesAreNamed) {
  RankProgress progress;
  progress.step = 3;
  progress.phase = "check pass";  // a space would split the line
  progress.collective = 41;
  progress.collective_op = "all_reduce";
  progress.waiting = true;
  progress.last_completed = 40;
  progress.issued = 42;
  progress.counter = 187;
  progress.steady = true;
  progress.last_step_ms = 850;
  progress.slowest_step_ms = 910;
  progress.last_save_ms = 300;
  const std::string line = FormatHeartbeat(progress);
  EXPECT_EQ(line,
            "mtb-heartbeat step=3 phase=check_pass collective=41 op=all_reduce "
            "waiting=1 last_completed=40 issued=42 counter=187 steady=1 done=0 "
            "step_ms=850 slowest_step_ms=910 save_ms=300");
  absl::StatusOr<RankProgress> parsed = ParseHeartbeat(line);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->phase, "check_pass");
  EXPECT_EQ(parsed->collective, 41);
  EXPECT_TRUE(parsed->waiting);
  EXPECT_EQ(parsed->counter, 187);
  EXPECT_TRUE(parsed->steady);
  EXPECT_FALSE(parsed->done);
  EXPECT_EQ(parsed->last_step_ms, 850);
  EXPECT_EQ(parsed->slowest_step_ms, 910);
  EXPECT_EQ(parsed->last_save_ms, 300);
  // A sender that does not time its steps leaves the times out: 0.
  const absl::StatusOr<RankProgress> untimed =
      ParseHeartbeat(line.substr(0, line.find(" step_ms=")));
  ASSERT_TRUE(untimed.ok()) << untimed.status();
  EXPECT_EQ(untimed->slowest_step_ms, 0);
  const RankProgress empty = *ParseHeartbeat(FormatHeartbeat(RankProgress()));
  EXPECT_EQ(empty.phase, "");
  EXPECT_EQ(empty.collective_op, "");
  EXPECT_EQ(ParseHeartbeat("hello").status().message(),
            "not a heartbeat line (no 'mtb-heartbeat'): 'hello'");
  EXPECT_EQ(ParseHeartbeat("mtb-heartbeat step=x").status().message(),
            "heartbeat field step='x' is not a number");
  EXPECT_EQ(ParseHeartbeat("mtb-heartbeat step=1").status().message(),
            "heartbeat lacks 'phase'");
}

TEST(Heartbeat, TheSenderWritesLinesUntilItsLastOneSaysDone) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  auto recorder = std::make_shared<FlightRecorder>();
  recorder->SetPosition(2, "forward");
  {
    HeartbeatSender sender(recorder, fds[1], absl::Milliseconds(10));
    absl::SleepFor(absl::Milliseconds(50));
  }
  std::string text;
  char buffer[4096];
  ssize_t got;
  while ((got = ::read(fds[0], buffer, sizeof(buffer))) > 0) text.append(buffer, got);
  ::close(fds[0]);
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_GE(lines.size(), 2u) << text;  // the first at once, the last at the end
  for (const std::string& line : lines) {
    absl::StatusOr<RankProgress> parsed = ParseHeartbeat(line);
    ASSERT_TRUE(parsed.ok()) << line;
    EXPECT_EQ(parsed->step, 2);
    EXPECT_EQ(parsed->done, &line == &lines.back()) << line;
  }
}

// A rank killed by the launcher's SIGTERM, or crashing, leaves its dump and
// still dies of that signal.
void DumpOnSignalThenDie(const std::string& path, int signal_number) {
  auto recorder = std::make_shared<FlightRecorder>();
  recorder->Issued(Record(7));
  recorder->SetPosition(5, "backward");
  recorder->SetDumpPath(path);
  RegisterForSignalDumps(recorder);
  ::raise(signal_number);
  // SIGTERM is delivered again once the dump is written; wait for it.
  while (true) ::pause();
}

TEST(FlightDumpsDeathTest, SigtermAndFatalSignalsDumpAndStillKill) {
  for (int signal_number : {SIGTERM, SIGSEGV}) {
    const std::string path =
        absl::StrCat(TempDir(), "/signal_", signal_number, ".json");
    EXPECT_EXIT(DumpOnSignalThenDie(path, signal_number),
                ::testing::KilledBySignal(signal_number), "flight recorder dumped to");
    FlightRecorderDump dump;
    ASSERT_TRUE(ReadJsonFile(path, &dump).ok()) << path;
    EXPECT_EQ(dump.step(), 5);
    EXPECT_EQ(dump.phase(), "backward");
    ASSERT_EQ(dump.entries_size(), 1);
    EXPECT_EQ(dump.entries(0).sequence(), 7);
    EXPECT_EQ(dump.reason(), signal_number == SIGTERM
                                 ? "SIGTERM (the launcher's teardown, or a kill)"
                                 : "SIGSEGV (fatal signal)");
  }
}

}  // namespace
}  // namespace mtb::collective
