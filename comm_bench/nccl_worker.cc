#include "comm_bench/nccl_worker.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "comm_bench/nccl_backend.h"
#include "comm_bench/nccl_bootstrap.h"
#include "comm_bench/report_files.h"
#include "comm_bench/table.h"
#include "common/results/cuda_info.h"
#include "common/base/flags.h"
#include "common/launch/local_ranks.h"
#include "common/results/run_context.h"
#include "common/base/status.h"
#include "glog/logging.h"

namespace mtb::comm_bench {
namespace {

absl::StatusOr<CommBenchResult> Run(const NcclWorkerOptions& options) {
  const RankEnv& env = options.rank_env;
  NcclBackendOptions backend_options;
  backend_options.rank = env.rank;
  backend_options.world_size = env.world_size;
  backend_options.local_rank = env.local_rank;
  if (env.rank == 0 || env.world_size == 1) {
    ASSIGN_OR_RETURN(backend_options.nccl_id, NewNcclId());
    if (env.world_size > 1) {
      RETURN_IF_ERROR(PublishNcclId(options.id_file, backend_options.nccl_id));
    }
  } else {
    ASSIGN_OR_RETURN(backend_options.nccl_id,
                     WaitForNcclId(options.id_file, kNcclIdBytes, options.id_timeout));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, NewNcclBackend(backend_options));
  RETURN_IF_ERROR(CheckSupported(*backend, options.sweep));
  std::unique_ptr<TablePrinter> printer;
  if (env.rank == 0) printer = std::make_unique<TablePrinter>(std::cout, "nccl");
  return RunSweep(*backend, options.sweep, printer.get());
}

}  // namespace

absl::StatusOr<int> RunNcclLauncher(const LaunchOptions& requested,
                                    const std::vector<std::string>& argv,
                                    const EnvMap& parent_env,
                                    const std::string& id_file) {
  LaunchOptions launch = WithDefaultEndpoint(requested);
  // Nobody listens on MASTER_PORT (there is no store); the ranks are told one
  // because torchrun's contract has it.
  if (launch.master_port == 0) launch.master_port = kDefaultMasterPort;
  std::string path = id_file;
  std::string folder;
  if (path.empty()) {
    if (launch.nnodes > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--nnodes=", launch.nnodes,
          " needs --nccl_id_file=PATH on a filesystem every node sees (rank 0 "
          "publishes NCCL's id there)"));
    }
    char pattern[] = "/tmp/comm_bench_nccl.XXXXXX";
    if (::mkdtemp(pattern) == nullptr) {
      return absl::InternalError(absl::StrCat("mkdtemp ", pattern, " failed"));
    }
    folder = pattern;
    path = folder + "/nccl_id";
  }
  std::cerr << "launch: node " << launch.node_rank << " of " << launch.nnodes
            << " starts " << launch.nproc << " of " << launch.world_size()
            << " ranks; NCCL id through " << path << std::endl;
  EnvMap extra = {{kNcclIdFileEnv, path}};
  absl::StatusOr<int> code =
      SuperviseLocalRanks(launch, "/proc/self/exe", argv, parent_env, extra);
  if (!folder.empty()) {
    std::remove(path.c_str());
    ::rmdir(folder.c_str());
  }
  return code;
}

int RunNcclWorker(const NcclWorkerOptions& options) {
  absl::StatusOr<CommBenchResult> result = Run(options);
  if (!result.ok()) return ReportAndExitCode("comm_bench_nccl", result.status());
  if (options.rank_env.rank != 0) return VerdictExitCode(*result);

  RunContext context = options.context;
  FillCudaInfo(&context);
  context.set_world_size(options.rank_env.world_size);
  context.set_backend("nccl");
  FinishRunContext(&context);
  *result->mutable_context() = context;
  *result->mutable_options() = OptionsForResult(
      options.sweep, options.flags, options.rank_env.world_size, "nccl");
  const OutputPaths paths = ResolveOutputPaths(options.flags, "comm_bench_nccl");
  absl::Status written = WriteOutputs(*result, paths);
  if (!written.ok()) return ReportAndExitCode("comm_bench_nccl", written);
  std::cout << "# result: " << paths.json << "\n# verdict: " << result->verdict()
            << std::endl;
  return VerdictExitCode(*result);
}

}  // namespace mtb::comm_bench
