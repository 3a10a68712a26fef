#include "comm_bench/gloo_worker.h"

#include <iostream>
#include <memory>

#include "absl/status/status.h"
#include "comm_bench/gloo_backend.h"
#include "comm_bench/report_files.h"
#include "comm_bench/table.h"
#include "common/collective/rendezvous.h"
#include "common/base/flags.h"
#include "common/launch/rendezvous_env.h"
#include "common/results/run_context.h"
#include "common/base/status.h"
#include "common/libtorch/torch_info.h"
#include "glog/logging.h"

namespace mtb::comm_bench {
namespace {

absl::StatusOr<CommBenchResult> Run(const GlooWorkerOptions& options) {
  collective::RendezvousOptions rendezvous =
      RendezvousOptionsFor(options.rank_env, options.timeouts);
  rendezvous.keep_records = false;  // the backend follows the observer
  ASSIGN_OR_RETURN(std::unique_ptr<collective::Communicator> communicator,
                   collective::Rendezvous(rendezvous));
  std::unique_ptr<Backend> backend = NewGlooBackend(*communicator);
  RETURN_IF_ERROR(CheckSupported(*backend, options.sweep));

  std::unique_ptr<TablePrinter> printer;
  if (backend->rank() == 0) printer = std::make_unique<TablePrinter>(std::cout, "gloo");
  ASSIGN_OR_RETURN(CommBenchResult result,
                   RunSweep(*backend, options.sweep, printer.get(), [&] {
                     return communicator->SetTimeout(
                         options.timeouts.collective_timeout);
                   }));
  // Everyone is done with the group before rank 0 (which may host the store)
  // writes files and leaves.
  RETURN_IF_ERROR(communicator->Barrier());
  return result;
}

}  // namespace

int RunGlooWorker(const GlooWorkerOptions& options) {
  absl::StatusOr<CommBenchResult> result = Run(options);
  if (!result.ok()) return ReportAndExitCode("comm_bench", result.status());
  if (options.rank_env.rank != 0) return VerdictExitCode(*result);

  RunContext context = options.context;
  FillTorchInfo(&context);
  context.set_world_size(options.rank_env.world_size);
  context.set_backend("gloo");
  FinishRunContext(&context);
  *result->mutable_context() = context;
  *result->mutable_options() = OptionsForResult(
      options.sweep, options.flags, options.rank_env.world_size, "gloo");
  const OutputPaths paths = ResolveOutputPaths(options.flags, "comm_bench");
  absl::Status written = WriteOutputs(*result, paths);
  if (!written.ok()) return ReportAndExitCode("comm_bench", written);
  std::cout << "# result: " << paths.json << "\n# verdict: " << result->verdict()
            << std::endl;
  return VerdictExitCode(*result);
}

}  // namespace mtb::comm_bench
