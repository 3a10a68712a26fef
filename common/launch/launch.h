// Launcher or worker: the first thing every multi-rank binary's main does.
//
//   int main(int argc, char** argv) {
//     mtb::InitLogging(argv[0]);
//     mtb::ParseCommandLineOrExit(argc, argv, kUsage);
//     // ... validate the tool's own flags here, so a bad flag stops the
//     // launcher before any rank starts (exit 2) ...
//     absl::StatusOr<mtb::LaunchDecision> launch =
//         mtb::LaunchOrBecomeWorker(argc, argv, {/*nproc=*/2});
//     if (!launch.ok()) return mtb::ReportAndExitCode("tool", launch.status());
//     if (launch->is_launcher()) return launch->exit_code;
//     // This process is rank launch->rank_env.rank: rendezvous, work.
//   }
//
// When RANK/WORLD_SIZE are set (by our launcher, torchrun, a Slurm wrapper or
// by hand) the process is a worker: one rank, described by its RankEnv.
// Otherwise it is the launcher: it validates the launch flags
// (launch_options.h), hosts the TCPStore on node 0, starts --nproc copies of
// its own executable with the same argv and the torchrun environment, and
// supervises them (supervisor.h) until all have ended. docs/launch.md has the
// flags, the environment contract and the exit codes.
#ifndef MTB_COMMON_LAUNCH_LAUNCH_H_
#define MTB_COMMON_LAUNCH_LAUNCH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/launch/launch_options.h"
#include "common/launch/rank_env.h"

namespace mtb {

struct LaunchDecision {
  enum class Role { kLauncher, kWorker };
  Role role = Role::kWorker;
  // kLauncher: every rank has ended; main returns this (docs/launch.md):
  // 0 all ranks exited 0, 1 a rank failed, 128+N the launcher got signal N.
  int exit_code = 0;
  // kWorker: who this process is. The log rank is already set to it.
  RankEnv rank_env;

  bool is_launcher() const { return role == Role::kLauncher; }
};

// Decides the role as described above and, as the launcher, runs the whole
// launch. Call after ParseCommandLine. Errors are bad input found before
// anything started (kInvalidArgument: an invalid rank variable or launch flag,
// one line naming it; exit 2) or a launcher that could not start its ranks
// (the store's port is taken, fork failed; exit 1).
absl::StatusOr<LaunchDecision> LaunchOrBecomeWorker(
    int argc, char** argv, const LaunchDefaults& defaults = {});

// The launcher alone: starts options.nproc ranks running `executable` with
// `argv`, each with ChildEnvironment(..., parent_env), and returns the exit
// code above. `options` must pass ValidateLaunchOptions.
absl::StatusOr<int> RunLauncher(const LaunchOptions& options,
                                const std::string& executable,
                                const std::vector<std::string>& argv,
                                const EnvMap& parent_env);

}  // namespace mtb

#endif  // MTB_COMMON_LAUNCH_LAUNCH_H_
