#include "doctor/doctor.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ATen/Parallel.h"
#include "absl/strings/str_cat.h"
#include "common/collective/rendezvous.h"
#include "common/launch/rendezvous_env.h"
#include "common/libtorch/torch_info.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "common/results/run_context.h"
#include "doctor/checks.h"
#include "doctor/group_checks.h"
#include "glog/logging.h"

namespace mtb::doctor {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string Hostname() {
  char name[256] = {0};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace

std::vector<DoctorCheck> HostChecks(const DoctorOptions& options,
                                    const RunContext& context) {
  std::vector<DoctorCheck> checks;
  checks.push_back(CheckLibraries(context));
  checks.push_back(CheckBlas(context.blas_library()));
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  checks.push_back(CheckThreads(at::get_num_threads(), cores,
                                Env("OMP_NUM_THREADS"), Env("OPENBLAS_CORETYPE")));
  DoctorCheck cores_check = MakeCheck(
      "host", "cores", "pass", absl::StrCat(cores, " logical cores (", context.cpu_model(), ")"));
  cores_check.set_measured(cores);
  cores_check.set_unit("cores");
  checks.push_back(cores_check);
  checks.push_back(CheckMemory(ReadHostMemory()));
  const std::vector<DoctorCheck> fp32 = CheckGemms("fp32");
  std::vector<DoctorCheck> bf16 = CheckGemms("bf16");
  bf16[0] = CompareBf16ToFp32(bf16[0], fp32[0]);
  checks.insert(checks.end(), fp32.begin(), fp32.end());
  checks.insert(checks.end(), bf16.begin(), bf16.end());
  checks.push_back(CheckDisk(options.checkpoint_dir, options.disk_check_mb));
  const std::string hostname = Hostname();
  checks.push_back(
      CheckHostname(hostname, ResolveHostname(hostname), options.nnodes));
  checks.push_back(CheckGlooInterface(Env("GLOO_SOCKET_IFNAME")));
  checks.push_back(CheckFreePort());
  return checks;
}

int RunDoctorRank(const DoctorOptions& options, const RankEnv& rank_env) {
  RunContext context = NewRunContext("doctor", options.argc, options.argv);
  FillTorchInfo(&context);
  context.set_world_size(rank_env.world_size);
  DoctorResult result;
  result.set_schema_version(kDoctorSchemaVersion);
  *result.add_checks() = CheckLauncher(ProcessEnvironment(), rank_env);
  if (rank_env.local_rank == 0) {
    LOG(INFO) << "checking this host (build, host, network)";
    for (DoctorCheck& check : HostChecks(options, context)) {
      *result.add_checks() = std::move(check);
    }
  }
  if (rank_env.world_size > 1) {
    context.set_backend("gloo");
    LOG(INFO) << "joining a group of " << rank_env.world_size << " ranks";
    collective::RendezvousOptions rendezvous = RendezvousOptionsFor(rank_env, options.timeouts);
    rendezvous.transport = options.transport;
    absl::StatusOr<std::unique_ptr<collective::Communicator>> communicator =
        collective::Rendezvous(rendezvous);
    if (!communicator.ok()) {
      *result.add_checks() = MakeCheck(
          "rendezvous", "join", "fail",
          std::string(communicator.status().message()),
          "every rank must reach the store (--master_addr:--master_port) "
          "within --connect_timeout; run doctor on each node");
    } else {
      *result.add_checks() = MakeCheck(
          "rendezvous", "transport", "pass",
          absl::StrCat("collectives over ", (*communicator)->transport(), " (--transport=",
                       collective::TransportName(options.transport), ")"),
          "");
      GroupCheckOptions group;
      group.expected_world_size = options.expected_world_size;
      for (DoctorCheck& check : CheckGroup(**communicator, group)) {
        *result.add_checks() = std::move(check);
      }
    }
  } else {
    context.set_backend("none");
    *result.add_checks() = MakeCheck(
        "rendezvous", "group", "pass",
        "one rank: no group to check (use --nproc=2, or --nnodes on each node)");
    if (options.expected_world_size > 1) {
      result.mutable_checks()->rbegin()->set_status("fail");
      result.mutable_checks()->rbegin()->set_fix(absl::StrCat(
          "--expected_world_size=", options.expected_world_size,
          " but this is one rank"));
    }
  }
  result.set_verdict(Verdict(result));
  const bool failed = result.verdict() != "pass";
  if (rank_env.local_rank != 0 && rank_env.rank != 0) {
    // Only the node's first rank prints the table: a failing rank says why
    // in one line of its own, never exits 1 silently.
    for (const DoctorCheck& check : result.checks()) {
      if (check.status() != "fail") continue;
      std::cerr << "doctor: rank " << rank_env.rank << ": " << check.category() << " "
                << check.name() << " failed: " << check.value()
                << (check.fix().empty() ? "" : absl::StrCat(" (", check.fix(), ")")) << "\n";
    }
    return failed ? 1 : 0;
  }

  FinishRunContext(&context);
  *result.mutable_run_context() = context;
  std::cout << RenderTable(result) << "\nverdict: " << result.verdict() << "\n";
  if (rank_env.rank == 0) {
    const std::string out =
        options.out.empty() ? DefaultResultPath("doctor", "json") : options.out;
    if (absl::Status written = WriteJsonFile(result, out); !written.ok()) {
      std::cerr << "doctor: " << written.message() << "\n";
      return 1;
    }
    std::cout << "result: " << out << "\n";
  }
  std::cout << std::flush;
  return failed ? 1 : 0;
}

}  // namespace mtb::doctor
