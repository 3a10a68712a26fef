// The shared-memory transport between real processes: a rank SIGKILLed while
// the group streams all-reduces makes the others fail with kUnavailable
// naming it (long before the collective timeout), and nothing is left in
// /dev/shm. Ranks are forked children meeting on a TCPStore this test hosts;
// the killed child stays a zombie until the test reaps it, which the
// survivors must also see as gone. A rank whose pid lives on as another
// program (it execs `sleep` mid-stream: the pid-reuse case, a live process
// behind the rank's pid) is not seen as gone; the others fail at the
// collective timeout, kDeadlineExceeded, naming the rank.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ATen/ATen.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/collective/communicator.h"
#include "common/collective/rendezvous.h"
#include "gtest/gtest.h"

namespace mtb::collective {
namespace {

constexpr int kWorldSize = 3;
constexpr int kVictim = 2;

std::set<std::string> DevShmEntries() {
  std::set<std::string> entries;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    entries.insert(entry.path().filename().string());
  }
  return entries;
}

// How the victim leaves the group.
enum class Death {
  kKilled,    // SIGKILL: its pid becomes a zombie, then nothing
  kPidLives,  // execs `sleep`: its pid stays a live process, not the rank
};

constexpr absl::Duration kPidLivesTimeout = absl::Seconds(2);

// A child rank: all-reduces until one fails. Exit 0 when that failure is the
// victim's death as this test expects it, 3 otherwise (what it was goes to
// stderr). The victim leaves `kill_after` into the loop.
[[noreturn]] void RunChild(int rank, int port, absl::Duration kill_after, Death death) {
  RendezvousOptions options;
  options.rank = rank;
  options.world_size = kWorldSize;
  options.master_addr = "127.0.0.1";
  options.master_port = port;
  options.connect_timeout = absl::Seconds(60);
  options.first_step_timeout = absl::Seconds(60);
  options.transport = Transport::kShm;
  options.shm_slot_bytes = 4096;  // many steps per all-reduce
  absl::StatusOr<std::unique_ptr<Communicator>> comm = Rendezvous(options);
  if (!comm.ok()) {
    std::fprintf(stderr, "rank %d: rendezvous failed: %s\n", rank,
                 comm.status().ToString().c_str());
    _exit(3);
  }
  at::Tensor tensor = at::ones({1 << 20});
  if (!(*comm)->AllReduce(tensor).ok()) _exit(3);  // every rank is in
  // The segment is anonymous: mapped as a memfd, never from /dev/shm.
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  bool memfd = false, named = false;
  char line[512];
  while (maps != nullptr && std::fgets(line, sizeof(line), maps) != nullptr) {
    memfd = memfd || absl::StrContains(line, "/memfd:mtb-collective-shm");
    named = named || absl::StrContains(line, "/dev/shm/");
  }
  if (maps != nullptr) std::fclose(maps);
  if (!memfd || named) {
    std::fprintf(stderr, "rank %d: memfd mapped %d, /dev/shm mapped %d\n", rank, memfd, named);
    _exit(4);
  }
  if (death == Death::kPidLives && !(*comm)->SetTimeout(kPidLivesTimeout).ok()) _exit(3);
  if (rank == kVictim) {
    std::thread([kill_after, death] {
      absl::SleepFor(kill_after);
      if (death == Death::kKilled) raise(SIGKILL);
      // Same pid, another program: every thread of the rank is gone, its
      // mapping of the segment too; /proc/<pid>/stat shows a live `sleep`.
      execl("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr));
      _exit(5);  // exec failed
    }).detach();
  }
  const absl::Time start = absl::Now();
  while (true) {
    const absl::Status status = (*comm)->AllReduce(tensor);
    if (status.ok()) continue;
    const std::string named = absl::StrCat("rank ", kVictim, " (pid ");
    const bool expected =
        death == Death::kKilled
            ? status.code() == absl::StatusCode::kUnavailable &&
                  absl::StrContains(status.message(), named) &&
                  absl::StrContains(status.message(), "exited while this rank waited for it") &&
                  absl::Now() - start < absl::Seconds(60)
            : status.code() == absl::StatusCode::kDeadlineExceeded &&
                  absl::StrContains(status.message(),
                                    absl::StrCat("shm: timed out waiting for ", named));
    std::fprintf(stderr, "rank %d: %s\n", rank, status.ToString().c_str());
    // Skip destructors: the group is broken and the test only needs the code.
    _exit(expected ? 0 : 3);
  }
}

// /proc/<pid>/comm: the program a pid runs now.
std::string ProcessName(pid_t pid) {
  std::FILE* file = std::fopen(absl::StrCat("/proc/", pid, "/comm").c_str(), "r");
  char name[64] = {};
  if (file != nullptr) {
    if (std::fgets(name, sizeof(name), file) == nullptr) name[0] = '\0';
    std::fclose(file);
  }
  return name;
}

class ShmProcess : public ::testing::TestWithParam<int> {};

TEST_P(ShmProcess, KilledRankMakesTheOthersFailNamingItAndLeavesNoSharedMemory) {
  const std::set<std::string> before = DevShmEntries();
  RendezvousOptions server;
  server.rank = 0;
  server.world_size = kWorldSize;
  server.master_addr = "127.0.0.1";
  server.master_port = 0;
  server.is_server = true;
  absl::StatusOr<Store> store = ConnectStore(server);
  ASSERT_TRUE(store.ok()) << store.status();
  const int port = store->tcp_port();
  const absl::Duration kill_after = absl::Milliseconds(GetParam());
  std::vector<pid_t> children;
  for (int rank = 0; rank < kWorldSize; ++rank) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) RunChild(rank, port, kill_after, Death::kKilled);
    children.push_back(pid);
  }
  // Survivors first: the victim is not reaped until they are done, so they
  // see a zombie.
  for (int rank = 0; rank < kWorldSize; ++rank) {
    if (rank == kVictim) continue;
    int status = 0;
    ASSERT_EQ(waitpid(children[rank], &status, 0), children[rank]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << rank << " did not fail as expected (see its stderr)";
  }
  int victim_status = 0;
  ASSERT_EQ(waitpid(children[kVictim], &victim_status, 0), children[kVictim]);
  EXPECT_TRUE(WIFSIGNALED(victim_status) && WTERMSIG(victim_status) == SIGKILL);
  std::set<std::string> left;
  for (const std::string& entry : DevShmEntries()) {
    if (before.count(entry) == 0) left.insert(entry);
  }
  EXPECT_TRUE(left.empty()) << "new in /dev/shm: " << *left.begin();
}

// Kill moments after the group is up (ms into the all-reduce loop).
INSTANTIATE_TEST_SUITE_P(KillAfterMilliseconds, ShmProcess, ::testing::Values(30, 400));

// Liveness is checked by pid (/proc/<pid>/stat: gone, or a zombie), so a rank
// whose pid belongs to a live process again — reused by the kernel, or, as
// here, the rank exec'd into another program — is not seen as gone. The
// collective timeout still catches it and names the rank: the survivors fail
// kDeadlineExceeded "shm: timed out waiting for rank 2 (pid N)" within the
// timeout (2 s), not kUnavailable, and not never.
TEST(ShmProcessPidLives, ARankWhosePidLivesOnIsCaughtByTheTimeoutNamingIt) {
  RendezvousOptions server;
  server.rank = 0;
  server.world_size = kWorldSize;
  server.master_addr = "127.0.0.1";
  server.master_port = 0;
  server.is_server = true;
  absl::StatusOr<Store> store = ConnectStore(server);
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<pid_t> children;
  for (int rank = 0; rank < kWorldSize; ++rank) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) RunChild(rank, store->tcp_port(), absl::Milliseconds(100), Death::kPidLives);
    children.push_back(pid);
  }
  const absl::Time start = absl::Now();
  for (int rank = 0; rank < kWorldSize; ++rank) {
    if (rank == kVictim) continue;
    int status = 0;
    ASSERT_EQ(waitpid(children[rank], &status, 0), children[rank]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << rank << " did not fail as expected (see its stderr)";
  }
  // The survivors were done while the victim's pid still ran `sleep`.
  EXPECT_EQ(waitpid(children[kVictim], nullptr, WNOHANG), 0);
  EXPECT_EQ(ProcessName(children[kVictim]), "sleep\n");
  kill(children[kVictim], SIGKILL);
  ASSERT_EQ(waitpid(children[kVictim], nullptr, 0), children[kVictim]);
  std::fprintf(stderr, "survivors failed %.1f s after the ranks started\n",
               absl::ToDoubleSeconds(absl::Now() - start));
}

}  // namespace
}  // namespace mtb::collective
