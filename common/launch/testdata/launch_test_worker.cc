// A multi-rank binary for the launcher's tests: it launches itself like any
// tool (LaunchOrBecomeWorker), and each rank then does what the flags say.
//
// Every rank first connects to the store the launcher hosts (or hosts it
// itself as rank 0 when started by hand), prints "rank R pid P ready" and
// waits for all ranks to be ready; only then does anything fail, so a test
// knows every pid. Store and collectives go through //common/collective, as in
// every tool.
#include <ATen/ATen.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/collective/communicator.h"
#include "common/collective/rendezvous.h"
#include "common/collective/store.h"
#include "common/base/flags.h"
#include "common/launch/launch.h"
#include "common/launch/rendezvous_env.h"
#include "common/launch/timeouts.h"
#include "common/launch/testdata/process_state.h"
#include "common/base/logging.h"
#include "common/base/status.h"

ABSL_FLAG(int, exit_rank, -1, "this rank exits with --exit_code once ready");
ABSL_FLAG(int, exit_code, 0, "exit code for --exit_rank");
ABSL_FLAG(int, exit_attempts, -1,
          "--exit_rank exits only on attempts (TORCHELASTIC_RESTART_COUNT) "
          "below this (-1: on every attempt)");
ABSL_FLAG(bool, resumed, false,
          "set by the launcher on restarts (LaunchDefaults::restart_args)");
ABSL_FLAG(int, sigkill_rank, -1, "this rank SIGKILLs itself once ready");
ABSL_FLAG(bool, others_wait, false,
          "ranks with nothing to do wait forever instead of exiting 0");
ABSL_FLAG(bool, print_env, false, "print the rank variables");
ABSL_FLAG(bool, rank0_exits_first, false,
          "rank 0 exits at once; the others use the store once it is gone");
ABSL_FLAG(bool, all_reduce, false,
          "join the group (//common/collective), all-reduce each rank's number and "
          "print the sum");
ABSL_FLAG(int, hang_rank, -1,
          "with --all_reduce: this rank joins the group, then never enters "
          "the all-reduce the others wait in");
ABSL_FLAG(int, fail_with_buckets_in_flight_rank, -1,
          "join the group; every rank issues an async all-reduce, this rank "
          "issues a second one no peer ever issues and then fails its step "
          "(abandoning the communicator); the others keep computing");

namespace mtb {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "<unset>";
}

[[noreturn]] void WaitForever() {
  while (true) ::pause();
}

void PrintEnv() {
  std::printf(
      "env RANK=%s LOCAL_RANK=%s WORLD_SIZE=%s LOCAL_WORLD_SIZE=%s "
      "GROUP_RANK=%s GROUP_WORLD_SIZE=%s MASTER_ADDR=%s MASTER_PORT=%s "
      "TORCHELASTIC_RESTART_COUNT=%s TORCHELASTIC_USE_AGENT_STORE=%s "
      "OMP_NUM_THREADS=%s\n",
      Env("RANK").c_str(), Env("LOCAL_RANK").c_str(), Env("WORLD_SIZE").c_str(),
      Env("LOCAL_WORLD_SIZE").c_str(), Env("GROUP_RANK").c_str(),
      Env("GROUP_WORLD_SIZE").c_str(), Env("MASTER_ADDR").c_str(),
      Env("MASTER_PORT").c_str(), Env("TORCHELASTIC_RESTART_COUNT").c_str(),
      Env("TORCHELASTIC_USE_AGENT_STORE").c_str(),
      Env("OMP_NUM_THREADS").c_str());
}

// Rank 0 exits; the others wait until its process is gone, then use the
// store, which the launcher still hosts.
absl::Status UseStoreAfterRankZero(const RankEnv& rank_env, collective::Store& store,
                                   absl::Duration timeout) {
  if (rank_env.rank == 0) {
    return store.Set("rank0_pid", std::to_string(::getpid()));
  }
  ASSIGN_OR_RETURN(const std::string pid, store.Get("rank0_pid", timeout));
  while (!ProcessIsGone(std::stoi(pid))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::string key = absl::StrCat("after/", rank_env.rank);
  RETURN_IF_ERROR(store.Set(key, "1"));
  RETURN_IF_ERROR(store.Get(key, timeout).status());
  std::printf("store alive after rank 0 exited\n");
  return absl::OkStatus();
}

absl::Status AllReduce(const RankEnv& rank_env, const collective::Store& store,
                       const collective::RendezvousOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<collective::Communicator> communicator,
                   collective::JoinGroup(store, options));
  if (rank_env.rank == absl::GetFlag(FLAGS_hang_rank)) WaitForever();
  at::Tensor value =
      at::full({1}, static_cast<double>(rank_env.rank), at::kDouble);
  RETURN_IF_ERROR(communicator->AllReduce(value));
  std::printf("all_reduce sum=%.0f world_size=%d\n", value.item<double>(),
              rank_env.world_size);
  // What ran it: the transport and the all-reduce's recorded algorithm
  // (across hosts, the hierarchical path).
  const std::vector<collective::CollectiveRecord> records = communicator->log().Records();
  std::printf("collective transport=%s algorithm=%s\n",
              std::string(communicator->transport()).c_str(),
              records.empty() ? "?" : records.back().algorithm.c_str());
  return absl::OkStatus();
}

// A step that fails on one rank while its bucket all-reduces are in flight:
// the rank must exit at once, not when the collective timeout fires.
absl::Status FailWithBucketsInFlight(const RankEnv& rank_env,
                                     const collective::Store& store,
                                     const collective::RendezvousOptions& options,
                                     int failing_rank) {
  ASSIGN_OR_RETURN(std::unique_ptr<collective::Communicator> communicator,
                   collective::JoinGroup(store, options));
  at::Tensor bucket0 = at::ones({4096});
  at::Tensor bucket1 = at::ones({4096});
  collective::CollectiveHandle first = communicator->AllReduceAsync(bucket0);
  if (rank_env.rank != failing_rank) {
    std::fflush(nullptr);
    WaitForever();  // still "in backward": never issues the second bucket
  }
  collective::CollectiveHandle second = communicator->AllReduceAsync(bucket1);
  const absl::Status failure = absl::InternalError(absl::StrCat(
      "rank ", rank_env.rank, ": step failed with ",
      communicator->log().InFlight(), " bucket all-reduces in flight"));
  communicator->Abandon(failure);
  return failure;
}

absl::Status RunRank(const RankEnv& rank_env) {
  // The tests pass --collective_timeout alone; the first-step timeout
  // follows it (this binary has no "first step").
  TimeoutOptions timeouts = TimeoutOptionsFromFlags();
  timeouts.first_step_timeout = timeouts.collective_timeout;
  const absl::Duration connect_timeout = timeouts.connect_timeout;
  const collective::RendezvousOptions options =
      RendezvousOptionsFor(rank_env, timeouts);
  ASSIGN_OR_RETURN(collective::Store root, collective::ConnectStore(options));
  collective::Store store =
      root.WithPrefix(absl::StrCat("test/attempt_", rank_env.restart_count));
  if (absl::GetFlag(FLAGS_print_env)) PrintEnv();
  std::printf("rank %d pid %d ready (attempt %d%s)\n", rank_env.rank, ::getpid(),
              rank_env.restart_count, absl::GetFlag(FLAGS_resumed) ? ", resumed" : "");
  for (size_t attempt = 0; attempt < rank_env.earlier_attempts.size(); ++attempt) {
    std::printf("rank %d: attempt %zu ended (--max_restarts=%d): %s\n", rank_env.rank, attempt,
                rank_env.max_restarts, rank_env.earlier_attempts[attempt].c_str());
  }
  std::fflush(stdout);
  // Nothing fails before every rank has announced itself.
  RETURN_IF_ERROR(store.Set(absl::StrCat("ready/", rank_env.rank), "1"));
  for (int rank = 0; rank < rank_env.world_size; ++rank) {
    RETURN_IF_ERROR(
        store.Get(absl::StrCat("ready/", rank), connect_timeout).status());
  }

  if (rank_env.rank == absl::GetFlag(FLAGS_sigkill_rank)) ::raise(SIGKILL);
  const int exit_attempts = absl::GetFlag(FLAGS_exit_attempts);
  if (rank_env.rank == absl::GetFlag(FLAGS_exit_rank) &&
      (exit_attempts < 0 || rank_env.restart_count < exit_attempts)) {
    std::fflush(nullptr);
    ::_exit(absl::GetFlag(FLAGS_exit_code));
  }
  if (absl::GetFlag(FLAGS_rank0_exits_first)) {
    return UseStoreAfterRankZero(rank_env, store, connect_timeout);
  }
  if (const int failing = absl::GetFlag(FLAGS_fail_with_buckets_in_flight_rank);
      failing >= 0) {
    return FailWithBucketsInFlight(rank_env, root, options, failing);
  }
  if (absl::GetFlag(FLAGS_all_reduce)) {
    RETURN_IF_ERROR(AllReduce(rank_env, root, options));
  }
  if (absl::GetFlag(FLAGS_others_wait)) {
    std::fflush(nullptr);
    WaitForever();
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace mtb

int main(int argc, char** argv) {
  mtb::InitLogging(argv[0]);
  mtb::ParseCommandLineOrExit(argc, argv,
                              "launch_test_worker [--nproc=N] [flags]");
  mtb::LaunchDefaults defaults;
  defaults.restart_args = {"--resumed"};
  defaults.reports_heartbeats = true;
  absl::StatusOr<mtb::LaunchDecision> launch =
      mtb::LaunchOrBecomeWorker(argc, argv, defaults);
  if (!launch.ok()) {
    return mtb::ReportAndExitCode("launch_test_worker", launch.status());
  }
  if (launch->is_launcher()) return launch->exit_code;
  return mtb::ReportAndExitCode("launch_test_worker",
                                mtb::RunRank(launch->rank_env));
}
