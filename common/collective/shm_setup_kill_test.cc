// A rank SIGKILLed while the shared-memory segment is being set up (memfd
// creation and its hand-over over a Unix socket): the creator (local rank 0)
// right after creating the memfd and before publishing its socket, the
// creator after handing the segment to its first peer only, and a peer that
// has connected but not yet received the segment. Every survivor fails within
// the collective timeout (plus process start-up) and names the dead rank; the
// segment is anonymous, so /dev/shm is unchanged. Ranks are forked children
// meeting on a TCPStore this test hosts; a survivor reports its outcome
// through the store and stays alive until every survivor has (so that no
// survivor's exit is taken for the victim's), and the victim stays a zombie
// until the test reaps it.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
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
// The collective timeout, which also bounds the segment's setup.
constexpr absl::Duration kTimeout = absl::Seconds(4);

std::set<std::string> DevShmEntries() {
  std::set<std::string> entries;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", error)) {
    entries.insert(entry.path().filename().string());
  }
  return entries;
}

const char* kill_stage = nullptr;

void KillAtStage(const char* stage) {
  if (kill_stage != nullptr && std::strcmp(stage, kill_stage) == 0) raise(SIGKILL);
}

struct KillCase {
  int victim;
  const char* stage;
  // Also accepted in a survivor's error besides the victim: the creator,
  // where the creator fails first because of the victim and a later survivor
  // sees the creator fail (see the instantiation).
  int also_named;
};

RendezvousOptions ChildOptions(int rank, int port) {
  RendezvousOptions options;
  options.rank = rank;
  options.world_size = kWorldSize;
  options.master_addr = "127.0.0.1";
  options.master_port = port;
  options.connect_timeout = absl::Seconds(60);
  options.first_step_timeout = kTimeout;
  options.transport = Transport::kShm;
  options.shm_slot_bytes = 4096;
  return options;
}

// A child rank: joins the group over shared memory and all-reduces once.
// Reports through the store "ok" (the failure was as expected) or what was
// wrong, then waits for the test's release and exits.
[[noreturn]] void RunChild(int rank, int port, const KillCase& kill) {
  if (rank == kill.victim) {
    kill_stage = kill.stage;
    SetShmSetupHookForTesting(&KillAtStage);
  }
  const RendezvousOptions options = ChildOptions(rank, port);
  absl::StatusOr<Store> store = ConnectStore(options);
  if (!store.ok()) _exit(3);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<Communicator>> comm = Rendezvous(options);
  absl::Status status = comm.status();
  if (comm.ok()) {
    at::Tensor tensor = at::ones({1 << 12});
    status = (*comm)->AllReduce(tensor);
  }
  const absl::Duration took = absl::Now() - start;
  const bool named = absl::StrContains(status.message(), absl::StrCat("rank ", kill.victim, " (")) ||
                     (kill.also_named >= 0 && rank != kill.also_named &&
                      absl::StrContains(status.message(), absl::StrCat("rank ", kill.also_named, " (")));
  std::string report = "ok";
  if (status.ok()) {
    report = "succeeded";
  } else if (!named || took > kTimeout + absl::Seconds(20)) {
    report = absl::StrCat("after ", absl::FormatDuration(took), ": ", status.ToString());
  }
  std::fprintf(stderr, "rank %d after %s: %s\n", rank, absl::FormatDuration(took).c_str(),
               status.ToString().c_str());
  (void)store->Set(absl::StrCat("result/", rank), report);
  (void)store->Get("release", absl::Seconds(120));
  // Skip destructors: the group is broken.
  _exit(0);
}

class ShmSetupKill : public ::testing::TestWithParam<KillCase> {};

TEST_P(ShmSetupKill, SurvivorsFailWithinTheTimeoutNamingTheDeadRankAndDevShmStaysClean) {
  const KillCase kill = GetParam();
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
  std::vector<pid_t> children;
  for (int rank = 0; rank < kWorldSize; ++rank) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) RunChild(rank, port, kill);
    children.push_back(pid);
  }
  for (int rank = 0; rank < kWorldSize; ++rank) {
    if (rank == kill.victim) continue;
    absl::StatusOr<std::string> report =
        store->Get(absl::StrCat("result/", rank), absl::Seconds(90));
    ASSERT_TRUE(report.ok()) << "rank " << rank << " did not report: " << report.status();
    EXPECT_EQ(*report, "ok") << "rank " << rank;
  }
  ASSERT_TRUE(store->Set("release", "1").ok());
  for (int rank = 0; rank < kWorldSize; ++rank) {
    int status = 0;
    ASSERT_EQ(waitpid(children[rank], &status, 0), children[rank]);
    if (rank == kill.victim) {
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
          << "the victim was not killed at " << kill.stage;
    } else {
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank " << rank;
    }
  }
  std::set<std::string> left;
  for (const std::string& entry : DevShmEntries()) {
    if (before.count(entry) == 0) left.insert(entry);
  }
  EXPECT_TRUE(left.empty()) << "new in /dev/shm: " << *left.begin();
}

// The creator's death names it for every survivor. A peer's death during the
// hand-over: the creator names it (the hand-over fails, or its first
// all-reduce times out waiting for a rank that never mapped the segment);
// the other peer names it too, or names the creator when the creator gave up
// on the hand-over first.
INSTANTIATE_TEST_SUITE_P(
    Moments, ShmSetupKill,
    ::testing::Values(KillCase{0, "created", -1}, KillCase{0, "served", -1},
                      KillCase{1, "connected", 0}),
    [](const ::testing::TestParamInfo<KillCase>& info) {
      return absl::StrCat("Rank", info.param.victim, "At_", info.param.stage);
    });

}  // namespace
}  // namespace mtb::collective
