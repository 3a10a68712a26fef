// comm_bench_nccl's two roles without LibTorch (docs/comm_bench.md,
// "launching without LibTorch"): the launcher starts this node's ranks with a
// fresh NCCL id file, and each rank exchanges NCCL's id through it, runs the
// sweep on its GPU and (rank 0) writes the result files.
#ifndef MTB_COMM_BENCH_NCCL_WORKER_H_
#define MTB_COMM_BENCH_NCCL_WORKER_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "comm_bench/harness.h"
#include "comm_bench/options.h"
#include "common/launch/launch_options.h"
#include "common/launch/rank_env.h"
#include "common/results/results.pb.h"

namespace mtb::comm_bench {

// Launcher: starts launch.nproc copies of `argv` (this executable) with their
// rank environment and MTB_NCCL_ID_FILE (`id_file`, or a file in a new
// private folder), supervises them and returns the exit code. Several nodes
// need `id_file` on a filesystem they share (kInvalidArgument otherwise).
absl::StatusOr<int> RunNcclLauncher(const LaunchOptions& launch,
                                    const std::vector<std::string>& argv,
                                    const EnvMap& parent_env,
                                    const std::string& id_file);

struct NcclWorkerOptions {
  RankEnv rank_env;
  SweepOptions sweep;
  FlagValues flags;
  // --nccl_id_file, else MTB_NCCL_ID_FILE; unused at world size 1.
  std::string id_file;
  absl::Duration id_timeout = absl::Minutes(5);
  RunContext context;
};

// One rank; returns its exit code (0 pass, 1 wrong/gate/failure).
int RunNcclWorker(const NcclWorkerOptions& options);

}  // namespace mtb::comm_bench

#endif  // MTB_COMM_BENCH_NCCL_WORKER_H_
