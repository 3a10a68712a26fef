// comm_bench: an nccl-tests-compatible collective sweep over Gloo
// (//common/collective). docs/comm_bench.md has the flags, the definitions and the
// output; comm_bench_nccl (nccl_main.cc) is the same over NCCL.
//
//   bazel run //comm_bench -- --nproc=2 --ops=all_reduce --maxbytes=64M
#include <string>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "comm_bench/gloo_backend.h"
#include "comm_bench/gloo_worker.h"
#include "comm_bench/options.h"
#include "common/base/flags.h"
#include "common/launch/launch.h"
#include "common/launch/timeouts.h"
#include "common/base/logging.h"
#include "common/results/run_context.h"


namespace {

constexpr char kUsage[] =
    "nccl-tests-compatible sweep of Gloo collectives.\n"
    "  comm_bench --nproc=2 --ops=all_reduce,all_gather --minbytes=1K "
    "--maxbytes=64M [--dtype=bfloat16] [--out=PATH --markdown=PATH --plot=PATH]";

}  // namespace

int main(int argc, char** argv) {
  using namespace mtb::comm_bench;
  mtb::InitLogging(argv[0]);
  mtb::ParseCommandLineOrExit(argc, argv, kUsage);
  GlooWorkerOptions worker;
  worker.context = mtb::NewRunContext("comm_bench", argc, argv);
  worker.flags = ReadFlags();
  worker.timeouts = mtb::TimeoutOptionsFromFlags();
  if (absl::Status valid = mtb::ValidateTimeoutOptions(worker.timeouts);
      !valid.ok()) {
    return mtb::ReportAndExitCode("comm_bench", valid);
  }

  // Every flag is checked before the launcher starts a rank (exit 2).
  mtb::LaunchDefaults launch_defaults;
  launch_defaults.nproc = 2;
  launch_defaults.reports_heartbeats = true;
  absl::StatusOr<int> world_size = mtb::PlannedWorldSize(launch_defaults);
  if (!world_size.ok()) return mtb::ReportAndExitCode("comm_bench", world_size.status());
  absl::StatusOr<SweepOptions> sweep = ResolveOptions(worker.flags, *world_size);
  if (!sweep.ok()) return mtb::ReportAndExitCode("comm_bench", sweep.status());
  absl::Status supported = CheckSupported(GlooSupports, *sweep);
  if (!supported.ok()) return mtb::ReportAndExitCode("comm_bench", supported);
  absl::StatusOr<std::vector<mtb::Fault>> faults =
      ResolveFaults(worker.flags, *sweep, *world_size, worker.timeouts);
  if (!faults.ok()) return mtb::ReportAndExitCode("comm_bench", faults.status());
  worker.faults = *std::move(faults);
  absl::StatusOr<mtb::trace::TraceWindow> window =
      ResolveTraceWindow(worker.flags, *sweep, *world_size);
  if (!window.ok()) return mtb::ReportAndExitCode("comm_bench", window.status());
  worker.trace_window = *window;
  worker.sweep = *std::move(sweep);

  absl::StatusOr<mtb::LaunchDecision> launch =
      mtb::LaunchOrBecomeWorker(argc, argv, launch_defaults);
  if (!launch.ok()) return mtb::ReportAndExitCode("comm_bench", launch.status());
  if (launch->is_launcher()) return launch->exit_code;
  worker.rank_env = launch->rank_env;
  return RunGlooWorker(worker);
}
