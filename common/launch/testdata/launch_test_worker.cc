// A multi-rank binary for the launcher's tests: it launches itself like any
// tool (LaunchOrBecomeWorker), and each rank then does what the flags say.
//
// Every rank first joins the store the launcher hosts (or hosts it itself as
// rank 0 when started by hand), prints "rank R pid P ready" and waits for all
// ranks to be ready; only then does anything fail, so a test knows every pid.
#include <ATen/ATen.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "common/launch/launch.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/torch_status.h"

ABSL_FLAG(int, exit_rank, -1, "this rank exits with --exit_code once ready");
ABSL_FLAG(int, exit_code, 0, "exit code for --exit_rank");
ABSL_FLAG(int, sigkill_rank, -1, "this rank SIGKILLs itself once ready");
ABSL_FLAG(bool, others_wait, false,
          "ranks with nothing to do wait forever instead of exiting 0");
ABSL_FLAG(bool, print_env, false, "print the rank variables");
ABSL_FLAG(bool, rank0_exits_first, false,
          "rank 0 exits at once; the others use the store once it is gone");
ABSL_FLAG(bool, all_reduce, false,
          "all-reduce each rank's number over Gloo and print the sum");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(60),
          "store and Gloo timeout");

namespace mtb {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "<unset>";
}

[[noreturn]] void WaitForever() {
  while (true) ::pause();
}

bool ProcessIsGone(pid_t pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ||
         line[close + 2] == 'Z' || line[close + 2] == 'X';
}

absl::Status AllReduce(const RankEnv& rank_env,
                       const c10::intrusive_ptr<c10d::Store>& store,
                       std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
  options->devices.push_back(
      interface != nullptr && *interface != '\0'
          ? c10d::ProcessGroupGloo::createDeviceForInterface(interface)
          : c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(
      c10::make_intrusive<c10d::PrefixStore>("gloo", store), rank_env.rank,
      rank_env.world_size, options);
  std::vector<at::Tensor> tensors = {
      at::full({1}, static_cast<double>(rank_env.rank), at::kDouble)};
  group->allreduce(tensors)->wait();
  std::printf("all_reduce sum=%.0f world_size=%d\n", tensors[0].item<double>(),
              rank_env.world_size);
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::Status RunRank(const RankEnv& rank_env) {
  const auto timeout =
      absl::ToChronoMilliseconds(absl::GetFlag(FLAGS_connect_timeout));
  c10::intrusive_ptr<c10d::Store> store;
  RETURN_IF_ERROR(CallGuarded("connect to the store", [&] {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(rank_env.master_port);
    options.isServer = rank_env.HostsStore();
    options.waitWorkers = false;
    options.timeout = timeout;
    store = c10::make_intrusive<c10d::PrefixStore>(
        absl::StrCat("test/", rank_env.restart_count),
        c10::make_intrusive<c10d::TCPStore>(rank_env.master_addr, options));
  }));
  if (absl::GetFlag(FLAGS_print_env)) {
    std::printf(
        "env RANK=%s LOCAL_RANK=%s WORLD_SIZE=%s LOCAL_WORLD_SIZE=%s "
        "GROUP_RANK=%s GROUP_WORLD_SIZE=%s MASTER_ADDR=%s MASTER_PORT=%s "
        "TORCHELASTIC_RESTART_COUNT=%s TORCHELASTIC_USE_AGENT_STORE=%s "
        "OMP_NUM_THREADS=%s\n",
        Env("RANK").c_str(), Env("LOCAL_RANK").c_str(),
        Env("WORLD_SIZE").c_str(), Env("LOCAL_WORLD_SIZE").c_str(),
        Env("GROUP_RANK").c_str(), Env("GROUP_WORLD_SIZE").c_str(),
        Env("MASTER_ADDR").c_str(), Env("MASTER_PORT").c_str(),
        Env("TORCHELASTIC_RESTART_COUNT").c_str(),
        Env("TORCHELASTIC_USE_AGENT_STORE").c_str(),
        Env("OMP_NUM_THREADS").c_str());
  }
  std::printf("rank %d pid %d ready\n", rank_env.rank, ::getpid());
  std::fflush(stdout);
  RETURN_IF_ERROR(CallGuarded("ready barrier", [&] {
    if (store->add("ready", 1) == rank_env.world_size) {
      store->set("all_ready", {1});
    }
    store->wait({"all_ready"});
  }));

  if (rank_env.rank == absl::GetFlag(FLAGS_sigkill_rank)) ::raise(SIGKILL);
  if (rank_env.rank == absl::GetFlag(FLAGS_exit_rank)) {
    std::fflush(nullptr);
    ::_exit(absl::GetFlag(FLAGS_exit_code));
  }
  if (absl::GetFlag(FLAGS_rank0_exits_first)) {
    if (rank_env.rank == 0) {
      const std::string pid = std::to_string(::getpid());
      return CallGuarded("publish pid", [&] {
        store->set("rank0_pid", std::vector<uint8_t>(pid.begin(), pid.end()));
      });
    }
    RETURN_IF_ERROR(CallGuarded("store after rank 0 exited", [&] {
      const std::vector<uint8_t> bytes = store->get("rank0_pid");
      const pid_t rank0 = std::stoi(std::string(bytes.begin(), bytes.end()));
      while (!ProcessIsGone(rank0)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      store->set(absl::StrCat("after/", rank_env.rank), {1});
      store->get(absl::StrCat("after/", rank_env.rank));
    }));
    std::printf("store alive after rank 0 exited\n");
    return absl::OkStatus();
  }
  if (absl::GetFlag(FLAGS_all_reduce)) {
    RETURN_IF_ERROR(CallGuarded(
        "all_reduce", [&] { return AllReduce(rank_env, store, timeout); }));
  }
  if (absl::GetFlag(FLAGS_others_wait)) WaitForever();
  return absl::OkStatus();
}

}  // namespace
}  // namespace mtb

int main(int argc, char** argv) {
  mtb::InitLogging(argv[0]);
  mtb::ParseCommandLineOrExit(argc, argv,
                              "launch_test_worker [--nproc=N] [flags]");
  absl::StatusOr<mtb::LaunchDecision> launch =
      mtb::LaunchOrBecomeWorker(argc, argv);
  if (!launch.ok()) {
    return mtb::ReportAndExitCode("launch_test_worker", launch.status());
  }
  if (launch->is_launcher()) return launch->exit_code;
  return mtb::ReportAndExitCode("launch_test_worker",
                                mtb::RunRank(launch->rank_env));
}
