// doctor: checks an environment before a run (build and libraries, host,
// network, and with --nproc/--nnodes a real rank group), prints a table with
// the fix for anything wrong, writes a DoctorResult JSON, exits 1 if any
// check failed. docs/doctor.md.
//
//   bazel run //doctor                       # this host, one rank
//   bazel run //doctor -- --nproc=2          # + a 2-rank group over Gloo
//   doctor --nnodes=2 --node_rank=1 --master_addr=10.0.0.1 --master_port=29500
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/base/flags.h"
#include "common/base/logging.h"
#include "common/collective/transport_flag.h"
#include "common/launch/launch.h"
#include "common/launch/launch_options.h"
#include "common/launch/rank_env.h"
#include "common/launch/timeouts.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"
#include "common/results/run_context.h"
#include "doctor/checks.h"
#include "doctor/doctor.h"

ABSL_FLAG(std::string, checkpoint_dir, "results",
          "the directory checkpoints will go to: its write+fsync bandwidth and "
          "free space are checked");
ABSL_FLAG(int32_t, disk_check_mb, 64,
          "MiB written (and fsynced) by the disk check, at most 64 (and never more than "
          "10% of the free space)");
ABSL_FLAG(int32_t, expected_world_size, 0,
          "fail unless the group has this many ranks (0: any)");
ABSL_FLAG(std::string, out, "",
          "result JSON (default results/doctor_<UTC time>.json in the checkout)");

namespace {

constexpr char kProgram[] = "doctor";
constexpr char kUsage[] =
    "checks this environment for distributed training and says how to fix "
    "what is wrong.\n"
    "  bazel run //doctor -- [--nproc=2] [--checkpoint_dir=DIR] "
    "[--expected_world_size=N]";

}  // namespace

int main(int argc, char** argv) {
  mtb::InitLogging(argv[0]);
  mtb::ParseCommandLineOrExit(argc, argv, kUsage);
  using mtb::doctor::DoctorOptions;
  DoctorOptions options;
  options.timeouts = mtb::TimeoutOptionsFromFlags();
  if (absl::Status valid = mtb::ValidateTimeoutOptions(options.timeouts);
      !valid.ok()) {
    return mtb::ReportAndExitCode(kProgram, valid);
  }
  const mtb::LaunchOptions launch_options = mtb::LaunchOptionsFromFlags({1});
  if (absl::Status valid = mtb::ValidateLaunchOptions(launch_options); !valid.ok()) {
    return mtb::ReportAndExitCode(kProgram, valid);
  }
  if (!launch_options.master_addr.empty()) {
    if (absl::Status resolves =
            mtb::CheckAddressResolves("--master_addr", launch_options.master_addr);
        !resolves.ok()) {
      return mtb::ReportAndExitCode(kProgram, resolves);
    }
  }
  options.checkpoint_dir = mtb::ResolveUserPath(absl::GetFlag(FLAGS_checkpoint_dir));
  options.disk_check_mb = absl::GetFlag(FLAGS_disk_check_mb);
  options.expected_world_size = absl::GetFlag(FLAGS_expected_world_size);
  options.nnodes = launch_options.nnodes;
  options.transport = absl::GetFlag(FLAGS_transport);
  options.out = mtb::ResolveUserPath(absl::GetFlag(FLAGS_out));
  options.argc = argc;
  options.argv = argv;
  if (options.checkpoint_dir.empty()) {
    return mtb::ReportAndExitCode(
        kProgram, absl::InvalidArgumentError("--checkpoint_dir must name a directory"));
  }
  if (options.disk_check_mb < 1 || options.disk_check_mb > mtb::doctor::kMaxDiskProbeMib) {
    return mtb::ReportAndExitCode(
        kProgram, absl::InvalidArgumentError(absl::StrCat(
                      "--disk_check_mb=", options.disk_check_mb, " must be in [1, ",
                      mtb::doctor::kMaxDiskProbeMib, "] (the probe never takes more than ",
                      "10% of the free space either)")));
  }
  if (options.expected_world_size < 0) {
    return mtb::ReportAndExitCode(
        kProgram, absl::InvalidArgumentError(absl::StrCat(
                      "--expected_world_size=", options.expected_world_size,
                      " must be >= 0 (0: any)")));
  }
  if (absl::Status writable = mtb::CheckOutputWritable("out", options.out);
      !writable.ok()) {
    return mtb::ReportAndExitCode(kProgram, writable);
  }

  // A node other than 0 must reach node 0's store before it starts ranks
  // that would otherwise wait out --connect_timeout with a vaguer error.
  if (!mtb::HasRankEnv(mtb::ProcessEnvironment()) && launch_options.nnodes > 1 &&
      launch_options.node_rank > 0) {
    mtb::doctor::DoctorResult result;
    result.set_schema_version(mtb::doctor::kDoctorSchemaVersion);
    *result.add_checks() = mtb::doctor::CheckReachable(
        "master", launch_options.master_addr,
        launch_options.master_port > 0 ? launch_options.master_port
                                       : mtb::kDefaultMasterPort,
        options.timeouts.connect_timeout);
    if (result.checks(0).status() != "pass") {
      result.set_verdict(mtb::doctor::Verdict(result));
      mtb::RunContext context = mtb::NewRunContext(kProgram, argc, argv);
      mtb::FinishRunContext(&context);
      *result.mutable_run_context() = context;
      std::cout << mtb::doctor::RenderTable(result)
                << "\nverdict: " << result.verdict() << "\n";
      const std::string out = options.out.empty()
                                  ? mtb::DefaultResultPath(kProgram, "json")
                                  : options.out;
      if (mtb::WriteJsonFile(result, out).ok()) std::cout << "result: " << out << "\n";
      std::cerr << kProgram << ": " << result.checks(0).value() << "\n";
      return 1;
    }
  }

  absl::StatusOr<mtb::LaunchDecision> launch =
      mtb::LaunchOrBecomeWorker(argc, argv, {/*nproc=*/1});
  if (!launch.ok()) return mtb::ReportAndExitCode(kProgram, launch.status());
  if (launch->is_launcher()) return launch->exit_code;
  return mtb::doctor::RunDoctorRank(options, launch->rank_env);
}
