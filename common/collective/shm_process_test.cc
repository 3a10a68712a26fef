// The shared-memory transport between real processes: a rank SIGKILLed while
// the group streams all-reduces makes the others fail with kUnavailable
// naming it (long before the collective timeout), and nothing is left in
// /dev/shm. Ranks are forked children meeting on a TCPStore this test hosts;
// the killed child stays a zombie until the test reaps it, which the
// survivors must also see as gone.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
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

// A child rank: all-reduces until one fails. Exit 0 when that failure is the
// victim's death as this test expects it, 3 otherwise (what it was goes to
// stderr). The victim kills itself `kill_after` into the loop.
[[noreturn]] void RunChild(int rank, int port, absl::Duration kill_after) {
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
  if (rank == kVictim) {
    std::thread([kill_after] {
      absl::SleepFor(kill_after);
      raise(SIGKILL);
    }).detach();
  }
  const absl::Time start = absl::Now();
  while (true) {
    const absl::Status status = (*comm)->AllReduce(tensor);
    if (status.ok()) continue;
    const bool expected =
        status.code() == absl::StatusCode::kUnavailable &&
        absl::StrContains(status.message(), absl::StrCat("rank ", kVictim, " (pid ")) &&
        absl::StrContains(status.message(), "exited while this rank waited for it") &&
        absl::Now() - start < absl::Seconds(60);
    std::fprintf(stderr, "rank %d: %s\n", rank, status.ToString().c_str());
    // Skip destructors: the group is broken and the test only needs the code.
    _exit(expected ? 0 : 3);
  }
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
    if (pid == 0) RunChild(rank, port, kill_after);
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

}  // namespace
}  // namespace mtb::collective
