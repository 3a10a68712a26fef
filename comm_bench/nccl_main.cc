// comm_bench_nccl: comm_bench over NCCL's C API on CUDA buffers, one process
// per GPU, no LibTorch (docs/comm_bench.md). Built with --config=cuda; copied
// alone to GPU machines (static Abseil, glog, protobuf, libstdc++).
//
//   comm_bench_nccl --nproc=8 --ops=all_reduce --minbytes=8 --maxbytes=1G
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "comm_bench/nccl_backend.h"
#include "comm_bench/nccl_bootstrap.h"
#include "comm_bench/nccl_worker.h"
#include "comm_bench/options.h"
#include "common/base/flags.h"
#include "common/launch/launch_options.h"
#include "common/base/logging.h"
#include "common/launch/rank_env.h"
#include "common/results/run_context.h"

ABSL_FLAG(std::string, nccl_id_file, "",
          "Where rank 0 publishes NCCL's unique id for the other ranks; needed "
          "across nodes (a shared filesystem, a new file per run). Default: a "
          "private temporary file made by the launcher.");

namespace {

constexpr char kUsage[] =
    "nccl-tests-compatible sweep of NCCL collectives, one process per GPU.\n"
    "  comm_bench_nccl --nproc=<GPUs> --ops=all_reduce --minbytes=1K "
    "--maxbytes=64M [--dtype=bfloat16] [--out=PATH]";

}  // namespace

int main(int argc, char** argv) {
  using namespace mtb::comm_bench;
  mtb::InitLogging(argv[0]);
  mtb::ParseCommandLineOrExit(argc, argv, kUsage);
  NcclWorkerOptions worker;
  worker.context = mtb::NewRunContext("comm_bench_nccl", argc, argv);
  worker.flags = ReadFlags();
  if (!worker.flags.trace_dir.empty() || !worker.flags.trace_steps.empty()) {
    return mtb::ReportAndExitCode(
        "comm_bench_nccl",
        absl::InvalidArgumentError(
            "--trace_dir/--trace_steps are not supported by comm_bench_nccl "
            "yet (only the Gloo comm_bench writes traces)"));
  }
  if (!worker.flags.fault.empty()) {
    return mtb::ReportAndExitCode(
        "comm_bench_nccl",
        absl::InvalidArgumentError(
            "--fault is not supported by comm_bench_nccl yet (only the Gloo "
            "comm_bench injects faults)"));
  }

  // Every flag is checked before the launcher starts a rank (exit 2).
  const mtb::LaunchDefaults launch_defaults{/*nproc=*/1};
  absl::StatusOr<int> world_size = mtb::PlannedWorldSize(launch_defaults);
  if (!world_size.ok()) return mtb::ReportAndExitCode("comm_bench_nccl", world_size.status());
  absl::StatusOr<SweepOptions> sweep = ResolveOptions(worker.flags, *world_size);
  if (!sweep.ok()) return mtb::ReportAndExitCode("comm_bench_nccl", sweep.status());
  absl::Status supported = CheckSupported(NcclSupports, *sweep);
  if (!supported.ok()) return mtb::ReportAndExitCode("comm_bench_nccl", supported);
  worker.sweep = *std::move(sweep);

  const mtb::EnvMap env = mtb::ProcessEnvironment();
  if (!mtb::HasRankEnv(env)) {
    absl::StatusOr<int> code = RunNcclLauncher(
        mtb::LaunchOptionsFromFlags(launch_defaults),
        std::vector<std::string>(argv, argv + argc), env,
        absl::GetFlag(FLAGS_nccl_id_file));
    return code.ok() ? *code : mtb::ReportAndExitCode("comm_bench_nccl", code.status());
  }
  absl::StatusOr<mtb::RankEnv> rank_env = mtb::ParseRankEnv(env);
  if (!rank_env.ok()) return mtb::ReportAndExitCode("comm_bench_nccl", rank_env.status());
  mtb::SetProcessLogRank(rank_env->rank);
  worker.rank_env = *rank_env;
  worker.id_file = absl::GetFlag(FLAGS_nccl_id_file);
  if (worker.id_file.empty()) {
    auto found = env.find(kNcclIdFileEnv);
    if (found != env.end()) worker.id_file = found->second;
  }
  if (worker.id_file.empty() && rank_env->world_size > 1) {
    return mtb::ReportAndExitCode(
        "comm_bench_nccl",
        absl::InvalidArgumentError(
            "WORLD_SIZE > 1 without our launcher needs --nccl_id_file=PATH "
            "(a new file on a filesystem every rank sees)"));
  }
  return RunNcclWorker(worker);
}
