// Starting and supervising this node's ranks, without hosting a store: the
// part of the launcher (launch.h) that needs no LibTorch. RunLauncher hosts
// the TCPStore and then calls it; binaries that must not link LibTorch
// (comm_bench_nccl, which exchanges NCCL's id another way) call it directly.
#ifndef MTB_COMMON_LAUNCH_LOCAL_RANKS_H_
#define MTB_COMMON_LAUNCH_LOCAL_RANKS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/launch/launch_options.h"
#include "common/launch/rank_env.h"

namespace mtb {

// Starts options.nproc copies of `executable` with `argv`, each with
// ChildEnvironment(options, local_rank, 0, parent_env) plus `extra_env`
// (which wins on a clash), supervises them (supervisor.h) and returns the
// launcher's exit code (docs/launch.md), after printing the failure summary
// when there is one. `options` must have its endpoint resolved
// (WithDefaultEndpoint, and a master_port != 0). kInvalidArgument for a
// --log_dir that cannot be created.
absl::StatusOr<int> SuperviseLocalRanks(const LaunchOptions& options,
                                        const std::string& executable,
                                        const std::vector<std::string>& argv,
                                        const EnvMap& parent_env,
                                        const EnvMap& extra_env = {});

}  // namespace mtb

#endif  // MTB_COMMON_LAUNCH_LOCAL_RANKS_H_
