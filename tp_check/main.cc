// tp_check: proves Megatron-style tensor and sequence parallelism against the
// unsharded common/nn layers, forward and backward, on --nproc ranks
// (docs/tp_check.md). Flags are validated before any rank starts; rank 0
// writes the TpCheckResult JSON (and --markdown) and prints one line per check.
// Exit 0 when every check passes, 1 when one fails, 2 for bad flags.
#include <iostream>
#include <memory>
#include <string>

#include "ATen/Parallel.h"
#include "common/base/flags.h"
#include "common/launch/launch.h"
#include "common/launch/timeouts.h"
#include "common/base/logging.h"
#include "common/results/output_path.h"
#include "common/results/run_context.h"
#include "common/libtorch/torch_info.h"
#include "tp_check/checks.h"
#include "tp_check/flags.h"
#include "tp_check/output.h"
#include "tp_check/ranks.h"

namespace {

constexpr char kProgram[] = "tp_check";

constexpr char kUsage[] =
    "checks tensor-parallel layers against the unsharded ones, forward and "
    "backward.\n"
    "  bazel run //tp_check -- --nproc=2            # every check on 2 ranks\n"
    "  bazel run //tp_check -- --nproc=4 --check=mlp,attention --markdown";

}  // namespace

int main(int argc, char** argv) {
  using namespace mtb::tp_check;  // NOLINT: one tool's own namespace
  mtb::InitLogging(argv[0]);
  mtb::ParseCommandLineOrExit(argc, argv, kUsage);

  const CheckOptions options = CheckOptionsFromFlags();
  const CheckHooks hooks = CheckHooksFromFlags();
  const mtb::EnvMap env = mtb::ProcessEnvironment();
  absl::StatusOr<World> world = ResolveWorld(env);
  absl::Status valid = world.ok() ? ValidateOptions(options, *world, hooks)
                                  : world.status();
  const mtb::TimeoutOptions timeouts = mtb::TimeoutOptionsFromFlags();
  if (valid.ok()) valid = mtb::ValidateTimeoutOptions(timeouts);
  if (!valid.ok()) return mtb::ReportAndExitCode(kProgram, valid);
  // An output that cannot be written fails now, before any rank starts.
  const std::string out_flag = mtb::ResolveUserPath(OutFlag());
  if (absl::Status distinct = mtb::CheckOutputsAgainstInputs(
          mtb::ResultFileSet(out_flag, MarkdownFlag() ? std::vector<std::string>{"md"}
                                                      : std::vector<std::string>{}),
          {});
      !distinct.ok()) {
    return mtb::ReportAndExitCode(kProgram, distinct);
  }
  if (absl::Status writable = mtb::CheckOutputWritable("out", out_flag); !writable.ok()) {
    return mtb::ReportAndExitCode(kProgram, writable);
  }

  absl::StatusOr<std::unique_ptr<mtb::collective::Communicator>> comm;
  if (RunsInProcess(env)) {
    mtb::SetProcessLogRank(0);
    comm = SingleRankCommunicator(timeouts.first_step_timeout);
  } else {
    absl::StatusOr<mtb::LaunchDecision> launch =
        mtb::LaunchOrBecomeWorker(argc, argv);
    if (!launch.ok()) return mtb::ReportAndExitCode(kProgram, launch.status());
    if (launch->is_launcher()) return launch->exit_code;
    comm = JoinGroup(launch->rank_env, timeouts);
  }
  if (!comm.ok()) return mtb::ReportAndExitCode(kProgram, comm.status());
  mtb::collective::Communicator& communicator = **comm;

  // The tensors are tiny: intra-op threads would only compete with the ranks.
  at::set_num_threads(1);
  mtb::RunContext context = mtb::NewRunContext(kProgram, argc, argv);
  mtb::FillTorchInfo(&context);
  context.set_world_size(communicator.world_size());
  context.set_backend(std::string(communicator.backend()));

  absl::StatusOr<TpCheckResult> result =
      RunChecks(options, communicator, hooks, [&] {
        return communicator.SetTimeout(timeouts.collective_timeout);
      });
  if (!result.ok()) return mtb::ReportAndExitCode(kProgram, result.status());

  absl::Status written = absl::OkStatus();
  if (communicator.rank() == 0) {
    mtb::FinishRunContext(&context);
    *result->mutable_run_context() = context;
    const std::string out = OutFlag().empty()
                                ? mtb::DefaultResultPath(kProgram, "json")
                                : mtb::ResolveUserPath(OutFlag());
    absl::StatusOr<std::string> report =
        WriteOutputs(*result, out, MarkdownFlag());
    std::cout << RenderCheckTable(*result) << "\nresult: " << out << "\n";
    if (report.ok() && !report->empty()) std::cout << *report << "\n";
    written = report.status();
    std::cout << std::flush;
  }
  // Ranks leave together, after rank 0 has written: a launcher tears the
  // group down at the first non-zero exit.
  const absl::Status left = communicator.Barrier();
  if (!written.ok()) return mtb::ReportAndExitCode(kProgram, written);
  if (!left.ok()) return mtb::ReportAndExitCode(kProgram, left);
  return result->pass() ? mtb::kExitOk : mtb::kExitFailure;
}
