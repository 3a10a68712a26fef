// The supervisor with /bin/sh children: output routing, failure teardown,
// signal forwarding. The launcher's own tests (launch_test) run real ranks.
#include "common/launch/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/results/atomic_file.h"
#include "gtest/gtest.h"

namespace mtb {
namespace {

ChildSpec Shell(int rank, const std::string& script) {
  ChildSpec spec;
  spec.rank = rank;
  spec.executable = "/bin/sh";
  spec.argv = {"sh", "-c", script};
  spec.env = {"PATH=/usr/bin:/bin"};
  return spec;
}

// Runs Supervise with stdout/stderr captured in files under TEST_TMPDIR.
class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = absl::StrCat(
        tmp != nullptr ? tmp : "/tmp", "/",
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_TRUE(CreateDirectories(dir_).ok());
    options_.stdout_fd = Open("stdout");
    options_.stderr_fd = Open("stderr");
  }
  void TearDown() override {
    ::close(options_.stdout_fd);
    ::close(options_.stderr_fd);
  }

  int Open(const std::string& name) {
    return ::open(absl::StrCat(dir_, "/", name).c_str(),
                  O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  std::string Read(const std::string& name) {
    absl::StatusOr<std::string> text =
        ReadFileToString(absl::StrCat(dir_, "/", name));
    return text.ok() ? *text : text.status().ToString();
  }
  SupervisionResult Run(const std::vector<ChildSpec>& children) {
    absl::StatusOr<SupervisionResult> result = Supervise(children, options_);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : SupervisionResult{};
  }

  std::string dir_;
  SupervisorOptions options_;
};

TEST_F(SupervisorTest, EveryLineIsPrefixedWithItsRankAndKeptInTheLogFile) {
  options_.log_dir = dir_;
  const SupervisionResult result =
      Run({Shell(0, "echo one; echo two >&2; printf 'no newline'"),
           Shell(1, "echo three")});
  EXPECT_EQ(result.exit_code, 0);
  EXPECT_EQ(result.summary, "");
  const std::string out = Read("stdout");
  EXPECT_TRUE(absl::StrContains(out, "[rank 0] one\n")) << out;
  EXPECT_TRUE(absl::StrContains(out, "[rank 0] no newline\n")) << out;
  EXPECT_TRUE(absl::StrContains(out, "[rank 1] three\n")) << out;
  EXPECT_EQ(Read("stderr"), "[rank 0] two\n");
  const std::string log = Read("rank_0.log");
  EXPECT_TRUE(absl::StrContains(log, "one\n")) << log;
  EXPECT_TRUE(absl::StrContains(log, "two\n")) << log;
  EXPECT_TRUE(absl::StrContains(log, "no newline\n")) << log;
  EXPECT_EQ(Read("rank_1.log"), "three\n");
}

TEST_F(SupervisorTest, FirstFailureTerminatesTheOthersAndIsNamed) {
  const SupervisionResult result =
      Run({Shell(0, "exec sleep 1000"), Shell(1, "exit 3"),
           Shell(2, "exec sleep 1000")});
  // 3 is reserved (a deterministic failure) and no other rank failed on its
  // own: the launcher passes it on.
  EXPECT_EQ(result.exit_code, 3);
  ASSERT_EQ(result.failure, 1);
  EXPECT_EQ(result.ends[1].exit_code, 3);
  for (int other : {0, 2}) {
    EXPECT_TRUE(result.ends[other].stopped_by_us);
    EXPECT_TRUE(result.ends[other].signaled);
    EXPECT_EQ(result.ends[other].signal, SIGTERM);
  }
  EXPECT_EQ(result.summary,
            absl::StrCat("launch: rank 1 (pid ", result.ends[1].pid,
                         ") exited with code 3; terminated ranks 0, 2; exit 3 (a "
                         "deterministic failure: a retry would fail the same way)"));
  // Said at once, before the others have ended.
  EXPECT_EQ(Read("stderr"),
            absl::StrCat("launch: rank 1 (pid ", result.ends[1].pid,
                         ") exited with code 3: stopping ranks 0, 2 (SIGKILL after 5s)\n"));
}

TEST_F(SupervisorTest, DeathBySignalIsNamedWithTheSignal) {
  const SupervisionResult result =
      Run({Shell(0, "exec sleep 1000"), Shell(1, "kill -9 $$")});
  EXPECT_EQ(result.exit_code, 1);
  ASSERT_EQ(result.failure, 1);
  EXPECT_EQ(result.summary,
            absl::StrCat("launch: rank 1 (pid ", result.ends[1].pid,
                         ") was killed by SIGKILL (signal 9) that the "
                         "launcher did not send (likely the kernel's OOM "
                         "killer: see `dmesg` or `journalctl -k`); terminated "
                         "rank 0"));
}

// A rank that announces a --fault=kill (common/faults) and then SIGKILLs
// itself is not blamed on the OOM killer; the announcement is read from its
// output even when it dies right after writing it. The unannounced SIGKILL
// above keeps the OOM wording (the negative case).
TEST_F(SupervisorTest, AnAnnouncedInjectedKillIsNamedAsTheInjection) {
  const SupervisionResult result = Run(
      {Shell(0, "exec sleep 1000"),
       Shell(1, "echo 'E1203 rank 1 x.cc:1] --fault=kill:rank=1,step=2: "
                "killing this rank' >&2; kill -9 $$")});
  EXPECT_EQ(result.exit_code, 1);
  ASSERT_EQ(result.failure, 1);
  EXPECT_TRUE(result.ends[1].announced_injected_kill);
  EXPECT_EQ(result.summary,
            absl::StrCat("launch: rank 1 (pid ", result.ends[1].pid,
                         ") was killed by SIGKILL (signal 9) sent by its own "
                         "--fault=kill injection; terminated rank 0"));
}

TEST_F(SupervisorTest, RankIgnoringSigtermIsKilledAfterTheGrace) {
  options_.kill_grace = absl::Milliseconds(200);
  options_.log_dir = dir_;
  // `trap '' TERM` ignores SIGTERM, and an ignored signal stays ignored
  // across exec. Rank 1 fails only once rank 0 ignores SIGTERM.
  const std::string ready = absl::StrCat(dir_, "/ignoring");
  const SupervisionResult result =
      Run({Shell(0, absl::StrCat("trap '' TERM; touch ", ready,
                                 "; exec sleep 1000")),
           Shell(1, absl::StrCat("while [ ! -e ", ready,
                                 " ]; do sleep 0.01; done; exit 5"))});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_TRUE(result.ends[0].needed_sigkill);
  EXPECT_EQ(result.ends[0].signal, SIGKILL);
  EXPECT_EQ(result.summary,
            absl::StrCat("launch: rank 1 (pid ", result.ends[1].pid,
                         ") exited with code 5; terminated rank 0 (rank 0 "
                         "needed SIGKILL after 200ms); its output: ",
                         dir_, "/rank_1.log"));
}

TEST_F(SupervisorTest, SigtermToTheSupervisorIsForwarded) {
  // Sends SIGTERM to this process once both children are running (they
  // print "ready" first); the supervisor's handler is installed by then.
  std::thread sender([this] {
    const auto give_up =
        std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (std::chrono::steady_clock::now() < give_up) {
      const std::string out = Read("stdout");
      if (absl::StrContains(out, "[rank 0] ready") &&
          absl::StrContains(out, "[rank 1] ready")) {
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(::getpid(), SIGTERM);
  });
  const SupervisionResult result =
      Run({Shell(0, "echo ready; exec sleep 1000"),
           Shell(1, "echo ready; exec sleep 1000")});
  sender.join();
  EXPECT_EQ(result.exit_code, 128 + SIGTERM);
  EXPECT_EQ(result.forwarded_signal, SIGTERM);
  EXPECT_EQ(result.failure, -1);
  for (const ChildEnd& end : result.ends) EXPECT_EQ(end.signal, SIGTERM);
  EXPECT_EQ(result.summary,
            "launch: received SIGTERM; forwarded it to ranks 0, 1");
}

// Sends SIGTERM to this process once every child has printed "ready".
std::thread SigtermWhenReady(std::function<std::string()> read_stdout, int children) {
  return std::thread([read_stdout, children] {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (std::chrono::steady_clock::now() < give_up) {
      const std::string out = read_stdout();
      int ready = 0;
      for (int rank = 0; rank < children; ++rank) {
        ready += absl::StrContains(out, absl::StrCat("[rank ", rank, "] ready"));
      }
      if (ready == children) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(::getpid(), SIGTERM);
  });
}

// A rank that saves its state on SIGTERM and exits kExitPreempted (4).
constexpr char kPreemptible[] =
    "trap 'exit 4' TERM; echo ready; while :; do sleep 0.05; done";

TEST_F(SupervisorTest, RanksThatSaveAndStopOnAForwardedSigtermArePreempted) {
  std::thread sender = SigtermWhenReady([this] { return Read("stdout"); }, 2);
  const SupervisionResult result = Run({Shell(0, kPreemptible), Shell(1, kPreemptible)});
  sender.join();
  EXPECT_TRUE(result.preempted);
  EXPECT_EQ(result.exit_code, 4);
  EXPECT_EQ(result.forwarded_signal, SIGTERM);
  EXPECT_EQ(result.summary,
            "launch: received SIGTERM; forwarded it to ranks 0, 1; every rank "
            "saved its state and stopped (exit 4: preempted)");
  EXPECT_EQ(Read("stderr"),
            "launch: received SIGTERM: forwarding it to ranks 0, 1 (SIGKILL after 5s)\n");
}

TEST_F(SupervisorTest, OneRankDyingOfTheForwardedSigtermIsNoPreemption) {
  std::thread sender = SigtermWhenReady([this] { return Read("stdout"); }, 2);
  const SupervisionResult result =
      Run({Shell(0, kPreemptible), Shell(1, "echo ready; exec sleep 1000")});
  sender.join();
  EXPECT_FALSE(result.preempted);
  EXPECT_EQ(result.exit_code, 128 + SIGTERM);
  EXPECT_EQ(result.summary, "launch: received SIGTERM; forwarded it to ranks 0, 1");
}

TEST_F(SupervisorTest, RanksPreemptedDirectlyAreNamedAndPreempted) {
  // The notice reached the ranks, not us (a scheduler signalling every
  // process): rank 1 stops first; rank 0 gets our SIGTERM and stops too.
  const SupervisionResult result =
      Run({Shell(0, kPreemptible), Shell(1, "sleep 0.3; exit 4")});
  EXPECT_TRUE(result.preempted);
  EXPECT_EQ(result.exit_code, 4);
  EXPECT_EQ(result.failure, 1);
  EXPECT_EQ(result.summary,
            absl::StrCat("launch: rank 1 (pid ", result.ends[1].pid,
                         ") exited with code 4 (preempted: it stopped on a SIGTERM "
                         "notice after saving its state); terminated rank 0; every rank "
                         "saved its state and stopped (exit 4: preempted)"));
}

TEST_F(SupervisorTest, AnExecutableThatCannotRunFailsWith127) {
  ChildSpec missing = Shell(0, "");
  missing.executable = "/nonexistent/rank_binary";
  const SupervisionResult result = Run({missing});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.ends[0].exit_code, 127);
  EXPECT_EQ(Read("stderr"),
            "[rank 0] launch: cannot execute /nonexistent/rank_binary for rank "
            "0\n");
}

TEST_F(SupervisorTest, ChildrenSeeOnlyTheirEnvironmentAndNoExtraDescriptors) {
  ChildSpec spec = Shell(0, "echo \"x=$X\"; ls /proc/self/fd | wc -l");
  spec.env.push_back("X=42");
  const SupervisionResult result = Run({spec});
  EXPECT_EQ(result.exit_code, 0);
  // ls sees 0, 1, 2 and the descriptor of the folder it lists.
  EXPECT_EQ(Read("stdout"), "[rank 0] x=42\n[rank 0] 4\n");
}

// A rank that sends the same heartbeat every 0.1 s for `seconds` (counter
// fixed), or a moving counter with `moving`.
std::string Heartbeats(const std::string& fields, double seconds, bool moving = false) {
  return absl::StrCat(
      "i=0; while [ $i -lt ", static_cast<int>(seconds * 10), " ]; do i=$((i+1)); "
      "echo \"mtb-heartbeat ", fields, " counter=", moving ? "$i" : "7",
      " steady=1 done=0\" >&3; sleep 0.1; done");
}

constexpr char kWaitsIn41[] =
    "step=3 phase=backward collective=41 op=all_reduce waiting=1 "
    "last_completed=40 issued=42";
constexpr char kInNone[] =
    "step=3 phase=forward collective=-1 op=- waiting=0 last_completed=40 "
    "issued=41";

TEST_F(SupervisorTest, AStalledGroupIsTornDownNamingTheRankItWaitsFor) {
  options_.heartbeat = HeartbeatPolicy::Fixed(absl::Milliseconds(500));
  // Both would go on for 30 s; the watch ends them after ~0.5 s of no progress.
  const SupervisionResult result =
      Run({Shell(0, Heartbeats(kWaitsIn41, 30)), Shell(1, Heartbeats(kInNone, 30))});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.failure, 1);
  EXPECT_TRUE(absl::StrContains(
      result.stall,
      "rank 1 is in no collective (step 3, forward); last completed #40 while "
      "rank 0 waits in all_reduce #41 (step 3, backward): the group waits for "
      "rank 1"))
      << result.stall;
  EXPECT_TRUE(absl::StartsWith(result.summary, "launch: heartbeat: no progress for "))
      << result.summary;
  EXPECT_TRUE(absl::EndsWith(result.summary, "; terminated ranks 0, 1")) << result.summary;
  // Heartbeat lines are the watch's, not output.
  EXPECT_EQ(Read("stdout"), "");
}

TEST_F(SupervisorTest, ARankThatKeepsMovingWhileTheOthersWaitIsNotAStall) {
  // Rank 0 waits twice the timeout; rank 1's counter moves all along.
  options_.heartbeat = HeartbeatPolicy::Fixed(absl::Milliseconds(500));
  const SupervisionResult result = Run(
      {Shell(0, Heartbeats(kWaitsIn41, 1.0)), Shell(1, Heartbeats(kInNone, 1.2, true))});
  EXPECT_EQ(result.exit_code, 0) << result.summary;
  EXPECT_EQ(result.stall, "");
}

TEST_F(SupervisorTest, AnExternalStopTearsTheGroupDownAndOnTeardownHearsOfFailures) {
  int asked = 0;
  options_.external_stop = [&]() -> std::optional<std::string> {
    if (++asked < 2) return std::nullopt;
    return std::string("node 1 failed: rank 3 exited with code 5");
  };
  SupervisionResult result = Run({Shell(0, "exec sleep 30"), Shell(1, "exec sleep 30")});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(result.failure, -1);
  EXPECT_EQ(result.summary,
            "launch: node 1 failed: rank 3 exited with code 5; terminated ranks 0, 1");
  options_.external_stop = nullptr;
  std::vector<std::string> heard;
  options_.on_teardown = [&](const ChildEnd* failed, const std::string& what) {
    heard.push_back(absl::StrCat(failed != nullptr ? failed->rank : -1, " ", what));
  };
  result = Run({Shell(0, "exec sleep 30"), Shell(1, "exit 5")});
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_TRUE(absl::StartsWith(heard[0], "1 rank 1 (pid ")) << heard[0];
  EXPECT_TRUE(absl::EndsWith(heard[0], ") exited with code 5")) << heard[0];
}

TEST_F(SupervisorTest, ReservedExitCodesCarryWhenTheRanksAgreeAndOtherFailuresAreOne) {
  SupervisionResult result = Run({Shell(0, "exit 3"), Shell(1, "exit 3")});
  EXPECT_EQ(result.exit_code, 3) << result.summary;
  result = Run({Shell(0, "exit 2"), Shell(1, "exec sleep 30")});
  EXPECT_EQ(result.exit_code, 2) << result.summary;
  EXPECT_TRUE(absl::EndsWith(result.summary, "; exit 2 (bad input: nothing ran, do not retry)"))
      << result.summary;
  // The first failure is not reserved: 1, whatever the others said later.
  result = Run({Shell(0, "exit 1"), Shell(1, "trap '' TERM; sleep 0.3; exit 3")});
  EXPECT_EQ(result.exit_code, 1) << result.summary;
  result = Run({Shell(0, "kill -9 $$"), Shell(1, "exec sleep 30")});
  EXPECT_EQ(result.exit_code, 1) << result.summary;
}

TEST_F(SupervisorTest, EveryWaitProgressPeriodSaysWhoWaitsForWhom) {
  options_.heartbeat = HeartbeatPolicy::Fixed(absl::Seconds(30));
  options_.wait_progress_every = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  const SupervisionResult result =
      Run({Shell(0, Heartbeats(kWaitsIn41, 1.5)), Shell(1, Heartbeats(kInNone, 1.5))});
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(result.exit_code, 0) << result.summary;
  const std::string err = Read("stderr");
  EXPECT_TRUE(absl::StrContains(
      err,
      "rank 1 is in no collective (step 3, forward); last completed #40 while rank 0 "
      "waits in all_reduce #41 (step 3, backward): the group waits for rank 1 (the "
      "heartbeat stops the group after 30s)\n"))
      << err;
  EXPECT_TRUE(absl::StartsWith(err, "launch: waiting: no progress for ")) << err;
  // Reports come once per period, not once per look (the launcher looks at
  // every heartbeat line: about 20 times a second here).
  const std::vector<std::string> parts = absl::StrSplit(err, "launch: waiting:");
  const int reports = static_cast<int>(parts.size()) - 1;
  EXPECT_GE(reports, 2) << err;
  EXPECT_LE(reports, took / absl::Milliseconds(300) + 1) << err;

  // Nobody waits (rank 0 computes too): nothing to say.
  std::string computing = kInNone;
  const SupervisionResult quiet =
      Run({Shell(0, Heartbeats(computing, 1.0)), Shell(1, Heartbeats(kInNone, 1.0))});
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_EQ(Read("stderr"), err) << "a report without a waiting rank";
}

// A rank that reports its last step and save times, then on SIGTERM takes
// `save_s` to save and exits 4 (preempted).
std::string SavesOnSigterm(int step_ms, int save_ms, double save_s) {
  return absl::StrCat("trap 'sleep ", save_s,
                      "; exit 4' TERM; echo ready; while :; do echo \"mtb-heartbeat ", kInNone,
                      " counter=1 steady=1 done=0 step_ms=", step_ms, " slowest_step_ms=", step_ms,
                      " save_ms=", save_ms, "\" >&3; sleep 0.05; done");
}

TEST_F(SupervisorTest, AForwardedSigtermLeavesRoomForTheLastStepAndSave) {
  options_.kill_grace = absl::Milliseconds(200);
  options_.heartbeat = HeartbeatPolicy::Fixed(absl::Seconds(30));
  // A step of 0.6 s and a save of 0.4 s: 2 s of grace; the save takes 0.8 s.
  std::thread sender = SigtermWhenReady([this] { return Read("stdout"); }, 2);
  SupervisionResult result =
      Run({Shell(0, SavesOnSigterm(600, 400, 0.8)), Shell(1, SavesOnSigterm(600, 400, 0.8))});
  sender.join();
  EXPECT_TRUE(result.preempted) << result.summary;
  EXPECT_EQ(result.exit_code, 4);
  EXPECT_EQ(Read("stderr"),
            "launch: received SIGTERM: forwarding it to ranks 0, 1 (SIGKILL after 2s: room "
            "for twice the last step and save, 1s; --kill_grace=200ms)\n");

  // Nothing reported: --kill_grace alone, and the save does not fit. (The
  // first run's "ready" lines go first, so the signal waits for these.)
  ASSERT_EQ(::ftruncate(options_.stdout_fd, 0), 0);
  ASSERT_EQ(::lseek(options_.stdout_fd, 0, SEEK_SET), 0);
  sender = SigtermWhenReady([this] { return Read("stdout"); }, 2);
  result = Run({Shell(0, SavesOnSigterm(0, 0, 0.8)), Shell(1, SavesOnSigterm(0, 0, 0.8))});
  sender.join();
  EXPECT_FALSE(result.preempted);
  EXPECT_TRUE(result.ends[0].needed_sigkill);
}

TEST_F(SupervisorTest, TheSummarySaysWhereTheFlightRecorderDumpsAre) {
  const SupervisionResult result =
      Run({Shell(0,
                 "echo 'rank 0: flight recorder dumped to /runs/r1/flight_r1.attempt0.rank0.json"
                 " (collective failed)' >&2; exit 1"),
           Shell(1, "exec sleep 30")});
  EXPECT_TRUE(absl::EndsWith(
      result.summary, "; flight recorder dumps in /runs/r1 (profiler_agg forensics /runs/r1)"))
      << result.summary;
}

TEST(SignalName, NamesKnownSignals) {
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(SignalName(SIGTERM), "SIGTERM");
}

}  // namespace
}  // namespace mtb
