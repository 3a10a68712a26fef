// moe_comm: an expert-parallel MoE layer over Gloo (//common/collective) —
// benchmark of its dispatch and combine all_to_allv across a sweep (default),
// or --check against the single-process reference (docs/moe_comm.md).
// Flags are validated before any rank starts (exit 2);
// rank 0 writes the MoeCommResult JSON, the Markdown report and the SVGs.
// Exit 0 on success, 1 when a check fails or the run breaks.
#include <iostream>
#include <memory>
#include <string>

#include "ATen/Parallel.h"
#include "common/base/flags.h"
#include "common/base/logging.h"
#include "absl/flags/flag.h"
#include "common/collective/rendezvous.h"
#include "common/collective/transport_flag.h"
#include "common/faults/fault_injector.h"
#include "common/results/atomic_file.h"
#include "common/launch/launch.h"
#include "common/launch/launch_options.h"
#include "common/launch/rendezvous_env.h"
#include "common/launch/timeouts.h"
#include "common/libtorch/torch_info.h"
#include "common/results/output_path.h"
#include "common/results/run_context.h"
#include "moe_comm/flags.h"
#include "moe_comm/options.h"
#include "moe_comm/output.h"
#include "moe_comm/run.h"

namespace {

constexpr char kProgram[] = "moe_comm";

constexpr char kUsage[] =
    "expert-parallel MoE layer: dispatch/combine benchmark or --check.\n"
    "  bazel run //moe_comm -- --nproc=2\n"
    "  bazel run //moe_comm -- --nproc=4 --top_k=2 --skew=zipf:1.2\n"
    "  bazel run //moe_comm -- --nproc=4 --check --capacity_factor=1\n"
    "  bazel run //moe_comm -- --nproc=2 --trace_dir=traces --trace_steps=2:3";

}  // namespace

int main(int argc, char** argv) {
  using namespace mtb::moe_comm;  // NOLINT: one tool's own namespace
  mtb::InitLogging(argv[0]);
  mtb::ParseCommandLineOrExit(argc, argv, kUsage);

  // Every flag is checked before the launcher starts a rank (exit 2).
  mtb::LaunchDefaults launch_defaults;
  launch_defaults.nproc = 2;
  launch_defaults.reports_heartbeats = true;
  absl::StatusOr<MoeCommOptions> options = OptionsFromFlags();
  if (!options.ok()) return mtb::ReportAndExitCode(kProgram, options.status());
  absl::StatusOr<mtb::PlannedWorld> world =
      mtb::PlanWorld(mtb::ProcessEnvironment(), launch_defaults);
  if (!world.ok()) return mtb::ReportAndExitCode(kProgram, world.status());
  absl::Status valid =
      ValidateOptions(*options, world->world_size, world->label);
  const mtb::TimeoutOptions timeouts = mtb::TimeoutOptionsFromFlags();
  if (valid.ok()) valid = mtb::ValidateTimeoutOptions(timeouts);
  if (!valid.ok()) return mtb::ReportAndExitCode(kProgram, valid);
  const absl::StatusOr<MoeTraceOptions> trace = TraceOptionsFromFlags(
      static_cast<int>(ExpandSweep(*options, world->world_size).size()),
      timeouts.connect_timeout);
  if (!trace.ok()) return mtb::ReportAndExitCode(kProgram, trace.status());
  absl::StatusOr<std::vector<mtb::Fault>> faults =
      ResolveFaults(FaultFlag(), *options, world->world_size, timeouts);
  if (!faults.ok()) return mtb::ReportAndExitCode(kProgram, faults.status());
  const std::string out = OutFlag().empty()
                              ? mtb::DefaultResultPath(kProgram, "json")
                              : mtb::ResolveUserPath(OutFlag());
  std::vector<std::string> companions;
  if (MarkdownFlag()) companions.push_back("md");
  if (PlotFlag()) companions.insert(companions.end(), {"time.svg", "drops.svg"});
  std::vector<mtb::NamedPath> outputs = mtb::ResultFileSet(out, companions);
  for (mtb::NamedPath& file : mtb::RankTraceFiles(trace->dir, world->world_size)) {
    outputs.push_back(std::move(file));
  }
  if (absl::Status distinct = mtb::CheckOutputsAgainstInputs(outputs, {}); !distinct.ok()) {
    return mtb::ReportAndExitCode(kProgram, distinct);
  }
  if (absl::Status writable = mtb::CheckOutputWritable("out", out);
      !writable.ok()) {
    return mtb::ReportAndExitCode(kProgram, writable);
  }

  absl::StatusOr<mtb::LaunchDecision> launch =
      mtb::LaunchOrBecomeWorker(argc, argv, launch_defaults);
  if (!launch.ok()) return mtb::ReportAndExitCode(kProgram, launch.status());
  if (launch->is_launcher()) return launch->exit_code;
  mtb::collective::RendezvousOptions rendezvous =
      mtb::RendezvousOptionsFor(launch->rank_env, timeouts);
  rendezvous.transport = absl::GetFlag(FLAGS_transport);
  // Without the launcher's --log_dir the flight recorder dumps beside the
  // result.
  if (rendezvous.flight_recorder_dir.empty()) {
    rendezvous.flight_recorder_dir = mtb::DirectoryOf(out);
  }
  absl::StatusOr<std::unique_ptr<mtb::collective::Communicator>> comm =
      mtb::collective::Rendezvous(rendezvous);
  if (!comm.ok()) return mtb::ReportAndExitCode(kProgram, comm.status());
  mtb::collective::Communicator& communicator = **comm;

  // Ranks share this host's cores: one intra-op thread each.
  at::set_num_threads(1);
  mtb::RunContext context = mtb::NewRunContext(kProgram, argc, argv);
  mtb::FillTorchInfo(&context);
  context.set_world_size(communicator.world_size());
  context.set_backend(std::string(communicator.backend()));

  mtb::collective::FlightRecorder& flight = communicator.flight_recorder();
  mtb::FaultInjector injector(*faults, launch->rank_env.rank,
                              launch->rank_env.restart_count);
  absl::StatusOr<MoeCommResult> result = RunMoeComm(
      *options, communicator, HooksFromFlags(),
      [&] {
        // Start-up is over: the steady-state timeout, and the heartbeat watch.
        flight.MarkSteady();
        return communicator.SetTimeout(timeouts.collective_timeout);
      },
      *trace,
      [&](int64_t configuration, const char* phase) {
        flight.SetPosition(configuration, phase);
        (void)injector.At(configuration, phase);
      });
  if (!result.ok()) return mtb::ReportAndExitCode(kProgram, result.status());

  absl::Status written = absl::OkStatus();
  if (communicator.rank() == 0) {
    mtb::FinishRunContext(&context);
    *result->mutable_run_context() = context;
    absl::StatusOr<std::vector<std::string>> files =
        WriteOutputs(*result, out, MarkdownFlag(), PlotFlag());
    std::cout << RenderTable(*result) << "\n";
    if (files.ok()) {
      for (const std::string& line : *files) std::cout << line << "\n";
    }
    written = files.status();
    std::cout << std::flush;
  }
  // Ranks leave together, after rank 0 has written.
  const absl::Status left = communicator.Barrier();
  if (!written.ok()) return mtb::ReportAndExitCode(kProgram, written);
  if (!left.ok()) return mtb::ReportAndExitCode(kProgram, left);
  return result->pass() ? mtb::kExitOk : mtb::kExitFailure;
}
