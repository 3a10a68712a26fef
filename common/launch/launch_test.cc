// The launcher with real processes: testdata/launch_test_worker launches
// itself, as every tool does. Timing enters only as liveness bounds (a launch
// that has not ended after kLiveness fails the test); nothing here depends
// on how fast a rank starts or dies.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/results/atomic_file.h"
#include "common/launch/testdata/process_state.h"
#include "gtest/gtest.h"

extern char** environ;

namespace mtb {
namespace {

constexpr char kWorker[] = "common/launch/testdata/launch_test_worker";
// Generous bounds: each case needs a few seconds on 2 busy cores.
constexpr auto kLiveness = std::chrono::seconds(120);

std::string TempDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

// Our environment without any rank variables, plus `extra`.
std::vector<std::string> Environment(
    const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string line = *entry;
    const std::string name = line.substr(0, line.find('='));
    if (name == "RANK" || name == "WORLD_SIZE" || name == "LOCAL_RANK" ||
        name == "MASTER_ADDR" || name == "MASTER_PORT" ||
        name == "LOCAL_WORLD_SIZE" || extra.count(name) > 0) {
      continue;
    }
    env.push_back(line);
  }
  for (const auto& [name, value] : extra) env.push_back(name + "=" + value);
  return env;
}

// One launcher (or hand-started rank) with stdout and stderr in files.
class Process {
 public:
  Process(const std::string& name, std::vector<std::string> args,
          const std::map<std::string, std::string>& extra_env = {}) {
    out_path_ = absl::StrCat(TempDir(), "/", name, ".stdout");
    err_path_ = absl::StrCat(TempDir(), "/", name, ".stderr");
    args.insert(args.begin(), kWorker);
    const std::vector<std::string> env = Environment(extra_env);
    std::vector<char*> argv;
    for (const std::string& arg : args)
      argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (const std::string& line : env)
      envp.push_back(const_cast<char*>(line.c_str()));
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&actions, 2, err_path_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int error = posix_spawn(&pid_, kWorker, &actions, nullptr,
                                  argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    EXPECT_EQ(error, 0) << "cannot start " << kWorker;
  }

  ~Process() {
    if (!ended_ && pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }

  pid_t pid() const { return pid_; }

  // The exit status as waitpid reports it; fails the test (and kills the
  // process) past the liveness bound.
  int Wait() {
    const auto give_up = std::chrono::steady_clock::now() + kLiveness;
    while (std::chrono::steady_clock::now() < give_up) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        ended_ = true;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "still running after the liveness bound; stderr:\n"
                  << Stderr();
    return -1;
  }

  int WaitForExitCode() {
    const int status = Wait();
    EXPECT_TRUE(WIFEXITED(status)) << "status " << status;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::string Stdout() const { return Read(out_path_); }
  std::string Stderr() const { return Read(err_path_); }

  // The pids the ranks announced ("rank R pid P ready"), by rank, once
  // `ranks` have; fails past the liveness bound.
  std::map<int, pid_t> WaitForReadyRanks(int ranks) const {
    const auto give_up = std::chrono::steady_clock::now() + kLiveness;
    std::map<int, pid_t> pids;
    while (std::chrono::steady_clock::now() < give_up) {
      pids = ReadyRanks();
      if (static_cast<int>(pids.size()) >= ranks) return pids;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "only " << pids.size() << " of " << ranks
                  << " ranks got ready; stdout:\n"
                  << Stdout();
    return pids;
  }

  std::map<int, pid_t> ReadyRanks() const {
    static const std::regex kReady("rank (\\d+) pid (\\d+) ready");
    std::map<int, pid_t> pids;
    const std::string out = Stdout();
    for (std::sregex_iterator it(out.begin(), out.end(), kReady), end;
         it != end; ++it) {
      pids[std::stoi((*it)[1])] = std::stoi((*it)[2]);
    }
    return pids;
  }

 private:
  static std::string Read(const std::string& path) {
    absl::StatusOr<std::string> text = ReadFileToString(path);
    return text.ok() ? *text : "";
  }

  pid_t pid_ = -1;
  bool ended_ = false;
  std::string out_path_;
  std::string err_path_;
};

void ExpectAllGone(const std::map<int, pid_t>& pids) {
  for (const auto& [rank, pid] : pids) {
    const auto give_up = std::chrono::steady_clock::now() + kLiveness;
    while (!ProcessIsGone(pid) && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(ProcessIsGone(pid))
        << "rank " << rank << " (pid " << pid << ") is still running";
  }
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), length), 0);
  EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length),
            0);
  ::close(fd);
  return ntohs(address.sin_port);
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST(Launch, EveryRankGetsTheTorchrunEnvironmentAndALogFile) {
  const std::string log_dir = TempDir() + "/env_logs";
  Process launcher("env", {"--nproc=3", "--print_env", "--log_dir=" + log_dir});
  EXPECT_EQ(launcher.WaitForExitCode(), 0) << launcher.Stderr();
  const std::string out = launcher.Stdout();
  std::smatch port_match;
  ASSERT_TRUE(
      std::regex_search(out, port_match, std::regex("MASTER_PORT=(\\d+)")))
      << out;
  const std::string port = port_match[1];
  for (int rank = 0; rank < 3; ++rank) {
    const std::string line = absl::StrCat(
        "env RANK=", rank, " LOCAL_RANK=", rank,
        " WORLD_SIZE=3 LOCAL_WORLD_SIZE=3 GROUP_RANK=0 GROUP_WORLD_SIZE=1 "
        "MASTER_ADDR=127.0.0.1 MASTER_PORT=",
        port,
        " TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_USE_AGENT_STORE=True "
        "OMP_NUM_THREADS=1");
    EXPECT_TRUE(
        absl::StrContains(out, absl::StrCat("[rank ", rank, "] ", line)))
        << out;
    absl::StatusOr<std::string> log =
        ReadFileToString(absl::StrCat(log_dir, "/rank_", rank, ".log"));
    ASSERT_TRUE(log.ok()) << log.status();
    EXPECT_TRUE(absl::StrContains(*log, line + "\n")) << *log;
    EXPECT_FALSE(absl::StrContains(*log, "[rank")) << *log;
  }
  // One warning about OMP_NUM_THREADS, as torchrun.
  int warnings = 0;
  for (const std::string& line : Lines(launcher.Stderr())) {
    if (absl::StrContains(line, "OMP_NUM_THREADS")) ++warnings;
  }
  EXPECT_EQ(warnings, 1) << launcher.Stderr();
}

TEST(Launch, RankExitingWithThreeTearsDownTheGroupAndIsNamed) {
  Process launcher("exit3", {"--nproc=3", "--exit_rank=1", "--exit_code=3",
                             "--others_wait"});
  const int exit_code = launcher.WaitForExitCode();
  const std::map<int, pid_t> pids = launcher.ReadyRanks();
  ASSERT_EQ(pids.size(), 3u) << launcher.Stdout();
  // 3 (deterministic) carries: an outer scheduler must not retry.
  EXPECT_EQ(exit_code, 3);
  const std::vector<std::string> lines = Lines(launcher.Stderr());
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(),
            absl::StrCat("launch: rank 1 (pid ", pids.at(1),
                         ") exited with code 3; terminated ranks 0, 2; exit 3 (a deterministic "
                         "failure: a retry would fail the same way)"));
  ExpectAllGone(pids);
}

TEST(Launch, RankKilledBySignalIsNamedWithTheSignal) {
  Process launcher("sigkill",
                   {"--nproc=2", "--sigkill_rank=1", "--others_wait"});
  const int exit_code = launcher.WaitForExitCode();
  const std::map<int, pid_t> pids = launcher.ReadyRanks();
  ASSERT_EQ(pids.size(), 2u) << launcher.Stdout();
  EXPECT_EQ(exit_code, 1);
  EXPECT_EQ(Lines(launcher.Stderr()).back(),
            absl::StrCat("launch: rank 1 (pid ", pids.at(1),
                         ") was killed by SIGKILL (signal 9) that the "
                         "launcher did not send (likely the kernel's OOM "
                         "killer: see `dmesg` or `journalctl -k`); terminated "
                         "rank 0"));
  ExpectAllGone(pids);
}

TEST(Launch, AFailedRankRestartsTheWholeGroupWithTheRestartArguments) {
  // Rank 1 fails on the first attempt only: one restart, then success.
  Process launcher("restart", {"--nproc=2", "--max_restarts=2", "--exit_rank=1",
                               "--exit_code=5", "--exit_attempts=1"});
  EXPECT_EQ(launcher.WaitForExitCode(), 0) << launcher.Stderr();
  const std::string err = launcher.Stderr();
  EXPECT_NE(err.find("exited with code 5"), std::string::npos) << err;
  EXPECT_NE(err.find("launch: restarting all 2 ranks (restart 1 of 2) with --resumed"),
            std::string::npos)
      << err;
  const std::string out = launcher.Stdout();
  EXPECT_NE(out.find("ready (attempt 0)"), std::string::npos) << out;
  EXPECT_NE(out.find("rank 0 pid"), std::string::npos);
  EXPECT_NE(out.find("ready (attempt 1, resumed)"), std::string::npos) << out;
  EXPECT_EQ(out.find("attempt 2"), std::string::npos) << "restarted more than needed";
  // The restarted ranks are told how the first attempt ended
  // (MTB_RESTART_HISTORY) and the budget (TORCHELASTIC_MAX_RESTARTS).
  const std::regex told(
      "\\[rank 0\\] rank 0: attempt 0 ended \\(--max_restarts=2\\): rank 1 \\(pid \\d+\\) exited with code 5\n");
  EXPECT_TRUE(std::regex_search(out, told)) << out;
}

TEST(Launch, RestartsStopAtTheBudgetAndNeverForADeterministicFailure) {
  Process spent("restart_spent", {"--nproc=2", "--max_restarts=1", "--exit_rank=0",
                                  "--exit_code=5"});
  EXPECT_EQ(spent.WaitForExitCode(), 1);
  EXPECT_NE(spent.Stderr().find("launch: giving up after 1 restart(s) (--max_restarts=1)"),
            std::string::npos)
      << spent.Stderr();
  Process deterministic("restart_deterministic",
                        {"--nproc=2", "--max_restarts=3", "--exit_rank=0", "--exit_code=3"});
  EXPECT_EQ(deterministic.WaitForExitCode(), 3);
  EXPECT_NE(deterministic.Stderr().find("launch: not restarting: exit code 3 is a "
                                        "deterministic failure"),
            std::string::npos)
      << deterministic.Stderr();
  EXPECT_EQ(deterministic.Stdout().find("attempt 1"), std::string::npos);
}

TEST(Launch, TheStoreOutlivesRankZero) {
  Process launcher("rank0_first", {"--nproc=2", "--rank0_exits_first"});
  EXPECT_EQ(launcher.WaitForExitCode(), 0) << launcher.Stderr();
  EXPECT_TRUE(absl::StrContains(launcher.Stdout(),
                                "[rank 1] store alive after rank 0 exited"))
      << launcher.Stdout();
}

TEST(Launch, SigtermToTheLauncherIsForwardedToEveryRank) {
  Process launcher("sigterm", {"--nproc=2", "--others_wait"});
  const std::map<int, pid_t> pids = launcher.WaitForReadyRanks(2);
  ::kill(launcher.pid(), SIGTERM);
  EXPECT_EQ(launcher.WaitForExitCode(), 128 + SIGTERM);
  EXPECT_EQ(Lines(launcher.Stderr()).back(),
            "launch: received SIGTERM; forwarded it to ranks 0, 1");
  ExpectAllGone(pids);
}

TEST(Launch, RanksDieWithTheLauncher) {
  Process launcher("pdeathsig", {"--nproc=2", "--others_wait"});
  const std::map<int, pid_t> pids = launcher.WaitForReadyRanks(2);
  ::kill(launcher.pid(), SIGKILL);
  const int status = launcher.Wait();
  EXPECT_TRUE(WIFSIGNALED(status));
  ExpectAllGone(pids);
}

TEST(Launch, RankVariablesMakeTheProcessOneRank) {
  // By hand, env:// style: no launcher, rank 0 hosts the store itself.
  Process rank("by_hand", {"--print_env"},
               {{"RANK", "0"},
                {"WORLD_SIZE", "1"},
                {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", absl::StrCat(FreePort())}});
  EXPECT_EQ(rank.WaitForExitCode(), 0) << rank.Stderr();
  EXPECT_TRUE(absl::StrContains(rank.Stdout(), "rank 0 pid")) << rank.Stdout();
  EXPECT_FALSE(absl::StrContains(rank.Stdout(), "[rank")) << rank.Stdout();
  EXPECT_FALSE(absl::StrContains(rank.Stderr(), "launch:")) << rank.Stderr();
}

TEST(Launch, TwoNodesOnLoopbackAllReduceAcrossLaunchers) {
  const std::string port = absl::StrCat(FreePort());
  std::vector<std::string> common = {"--nnodes=2", "--nproc=2",
                                     "--master_addr=127.0.0.1",
                                     "--master_port=" + port, "--all_reduce"};
  std::vector<std::string> node1_args = common;
  node1_args.push_back("--node_rank=1");
  std::vector<std::string> node0_args = common;
  node0_args.push_back("--node_rank=0");
  // Node 1 first: its ranks wait for node 0's store.
  Process node1("node1", node1_args);
  Process node0("node0", node0_args);
  EXPECT_EQ(node0.WaitForExitCode(), 0) << node0.Stderr();
  EXPECT_EQ(node1.WaitForExitCode(), 0) << node1.Stderr();
  for (int rank : {0, 1}) {
    EXPECT_TRUE(absl::StrContains(
        node0.Stdout(),
        absl::StrCat("[rank ", rank, "] all_reduce sum=6 world_size=4")))
        << node0.Stdout();
  }
  for (int rank : {2, 3}) {
    EXPECT_TRUE(absl::StrContains(
        node1.Stdout(),
        absl::StrCat("[rank ", rank, "] all_reduce sum=6 world_size=4")))
        << node1.Stdout();
  }
  EXPECT_TRUE(absl::StrContains(node1.Stderr(),
                                "launch: node 1 of 2 starts ranks 2-3 of 4"))
      << node1.Stderr();
}

TEST(Launch, RankHangingInACollectiveTimesOutThePeersAndTheGroupIsTornDown) {
  // Rank 1 joins the group and then never enters the all-reduce ranks 0 and
  // 2 wait in. Their 2 s collective timeout fires; the liveness bound is far
  // above it (kLiveness >= 10 x the timeout).
  Process launcher("hang", {"--nproc=3", "--all_reduce", "--hang_rank=1",
                            "--collective_timeout=2s"});
  const int exit_code = launcher.WaitForExitCode();
  const std::map<int, pid_t> pids = launcher.ReadyRanks();
  ASSERT_EQ(pids.size(), 3u) << launcher.Stdout();
  EXPECT_EQ(exit_code, 1);
  const std::string err = launcher.Stderr();
  // The first rank to time out reports the collective, its sequence number,
  // its rank and the timeout.
  std::smatch failure;
  ASSERT_TRUE(std::regex_search(
      err, failure,
      std::regex("\\[rank ([02])\\] launch_test_worker: all_reduce #0 "
                 "\\(float64, 1 elements\\) on rank ([02]) of 3 failed after "
                 "timeout 2s")))
      << err;
  EXPECT_EQ(failure[1], failure[2]);
  // The launcher names a rank that timed out and stops the hung one. When it
  // saw the group stall for a second or more before the 2 s timeout fired,
  // the line starts with whom the group waited for, which must be rank 1.
  const std::string last = Lines(err).back();
  std::smatch summary;
  ASSERT_TRUE(std::regex_match(
      last, summary,
      std::regex("launch: (the group waited for rank (\\d+) \\(.*\\); )?"
                 "rank [02] \\(pid \\d+\\) exited with code 1; "
                 "terminated ranks? (.*)")))
      << last;
  if (summary[1].matched) {
    EXPECT_EQ(summary[2].str(), "1") << last;
  }
  EXPECT_TRUE(absl::StrContains(summary[3].str(), "1")) << last;
  ExpectAllGone(pids);
}

TEST(Launch, RankFailingWithCollectivesInFlightEndsTheJobWellInsideTheTimeout) {
  // Rank 1 fails its step with two all-reduces issued, one of which no peer
  // will ever issue. Without abandoning, its exit would wait for that one
  // until the 60 s collective timeout; the bound below is half of that.
  const absl::Time start = absl::Now();
  Process launcher("fail_fast", {"--nproc=2",
                                 "--fail_with_buckets_in_flight_rank=1",
                                 "--collective_timeout=60s"});
  const int exit_code = launcher.WaitForExitCode();
  const absl::Duration elapsed = absl::Now() - start;
  const std::map<int, pid_t> pids = launcher.ReadyRanks();
  ASSERT_EQ(pids.size(), 2u) << launcher.Stdout();
  EXPECT_EQ(exit_code, 1);
  const std::string err = launcher.Stderr();
  EXPECT_TRUE(absl::StrContains(
      err, "rank 1: step failed with 2 bucket all-reduces in flight"))
      << err;
  EXPECT_TRUE(absl::StrContains(Lines(err).back(),
                                "launch: rank 1 (pid"))
      << err;
  EXPECT_LT(elapsed, absl::Seconds(30)) << err;
  ExpectAllGone(pids);
}

// Bad input: one line naming the variable or flag, exit 2, no rank started.
struct BadInput {
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  std::string line;
};

TEST(Launch, BadInputIsOneLineAndExitTwo) {
  const std::vector<BadInput> cases = {
      {{}, {{"RANK", "5"}, {"WORLD_SIZE", "2"}}, "RANK=5 must be < WORLD_SIZE=2"},
      {{},
       {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "abc"}},
       "MASTER_PORT='abc' is not a port number (1-65535)"},
      {{"--nproc=0"}, {}, "--nproc=0 must be >= 1"},
      {{"--nproc_per_node=0"}, {}, "--nproc=0 must be >= 1"},
      {{"--nnodes=2"},
       {},
       "--nnodes=2 needs --master_addr (the address of node 0, where its "
       "launcher hosts the TCPStore; every node must reach it)"},
      {{"--nnodes=2", "--node_rank=2", "--master_addr=127.0.0.1"},
       {},
       "--node_rank=2 must be < --nnodes=2"},
      // The timeout hierarchy: the heartbeat must end a hang before the
      // collective timeout would.
      {{"--nproc=2", "--heartbeat_timeout=5s", "--collective_timeout=5s"},
       {},
       "--heartbeat_timeout=5s must be < --collective_timeout=5s: in a hang the "
       "waiting ranks' collective timeout would end the run before the launcher "
       "could name the rank they wait for (0 turns the heartbeat off)"},
      {{"--nproc=2", "--heartbeat_timeout=soon"},
       {},
       "--heartbeat_timeout=soon is neither auto nor a duration (e.g. 90s, 0 for off)"},
      // An address nobody resolves is said at once, by the launcher and by a
      // rank, instead of being retried for --connect_timeout.
      {{"--nnodes=2", "--node_rank=1", "--master_addr=no-such-host.invalid"},
       {},
       "--master_addr=no-such-host.invalid does not resolve (Name or service not known): "
       "give node 0's IP address or a name every node resolves"},
      {{},
       {{"RANK", "1"},
        {"WORLD_SIZE", "2"},
        {"MASTER_ADDR", "no-such-host.invalid"},
        {"MASTER_PORT", "29500"}},
       "MASTER_ADDR=no-such-host.invalid does not resolve (Name or service not known): "
       "give node 0's IP address or a name every node resolves"},
  };
  int index = 0;
  for (const BadInput& bad : cases) {
    Process process(absl::StrCat("bad", index++), bad.args, bad.env);
    EXPECT_EQ(process.WaitForExitCode(), 2);
    EXPECT_EQ(process.Stderr(),
              absl::StrCat("launch_test_worker: ", bad.line, "\n"));
    EXPECT_EQ(process.Stdout(), "");
  }
}

}  // namespace
}  // namespace mtb
