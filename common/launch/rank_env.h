// The rank environment: which rank this process is and where the group meets.
//
// Our launcher (common/launch), torchrun, or a person by hand describes a rank
// through torchrun's environment variables:
//
//   RANK, WORLD_SIZE              required; 0 <= RANK < WORLD_SIZE
//   MASTER_ADDR, MASTER_PORT      required; where the c10d TCPStore listens
//   LOCAL_RANK, LOCAL_WORLD_SIZE  this node's share (default RANK, WORLD_SIZE)
//   GROUP_RANK                    the node's rank (default 0)
//   TORCHELASTIC_RESTART_COUNT    how often the group was restarted (default 0)
//   TORCHELASTIC_USE_AGENT_STORE  "True" when the launcher hosts the TCPStore
//   TORCHELASTIC_RUN_ID           the job's id (default "none")
//   TORCHELASTIC_MAX_RESTARTS     the launcher's --max_restarts (default 0)
//
// and our launcher adds (docs/launch.md), all optional:
//
//   MTB_LOG_DIR                   the launcher's --log_dir (flight recorder
//                                 dumps go there)
//   MTB_HEARTBEAT_FD              a pipe to the launcher for heartbeats
//   MTB_HEARTBEAT_INTERVAL_MS     how often to send one
//   MTB_RESTART_HISTORY           how each earlier attempt of the job ended,
//                                 as the launcher saw it: one line per
//                                 attempt, attempt 0 first (--max_restarts)
//
// Under srun or mpirun, Slurm's and Open MPI's / PMI's variables stand in for
// torchrun's (common/launch/launcher_env.h has the precedence and the rules).
//
// The defaults are what `torch.distributed`'s env:// init needs by hand: RANK,
// WORLD_SIZE, MASTER_ADDR and MASTER_PORT. docs/launch.md is the contract;
// common/launch/rendezvous_env.h turns a RankEnv into collective::RendezvousOptions.
#ifndef MTB_COMMON_LAUNCH_RANK_ENV_H_
#define MTB_COMMON_LAUNCH_RANK_ENV_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/launch/launcher_env.h"

namespace mtb {

struct RankEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int group_rank = 0;  // the node's rank (torchrun's GROUP_RANK, --node_rank)
  std::string master_addr;
  int master_port = 0;
  int restart_count = 0;
  // TORCHELASTIC_MAX_RESTARTS: how many restarts the launcher allows.
  int max_restarts = 0;
  // True when the process that started the ranks hosts the TCPStore on
  // MASTER_ADDR:MASTER_PORT (our launcher, torchrun's agent): every rank,
  // rank 0 included, connects as a client. False when nobody hosts it for us
  // (ranks started by hand or by another launcher): rank 0 hosts it.
  bool agent_store = false;
  std::string run_id = "none";
  // Whose variables described this rank: "torchrun" (also our launcher and
  // by hand), "openmpi", "pmi" or "slurm" (DetectedLauncher).
  std::string launcher = "torchrun";
  // Our launcher's extras: empty / -1 when absent.
  std::string log_dir;
  int heartbeat_fd = -1;
  int heartbeat_interval_ms = 0;
  // MTB_RESTART_HISTORY, one entry per earlier attempt (attempt 0 first):
  // the launcher's line for how it ended, e.g. "rank 1 (pid 77) was killed
  // by SIGKILL (signal 9) that the launcher did not send (...)".
  std::vector<std::string> earlier_attempts;

  // Whether this rank must host the TCPStore server itself.
  bool HostsStore() const { return !agent_store && rank == 0; }
};

// The calling process's environment.
EnvMap ProcessEnvironment();

// True when `env` describes a rank (RANK or WORLD_SIZE is set, or Slurm's or
// MPI's rank variables are: HasLauncherRankEnv): the binary is a worker, not
// a launcher.
bool HasRankEnv(const EnvMap& env);

// Reads and validates the variables above. Errors are kInvalidArgument with one
// line naming the variable, its value and the rule, e.g.
// "RANK=5 must be < WORLD_SIZE=2", "MASTER_PORT='abc' is not a port number
// (1-65535)".
absl::StatusOr<RankEnv> ParseRankEnv(const EnvMap& env);

// The torchrun variables that describe `rank_env` (the inverse of
// ParseRankEnv): RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
// ROLE_RANK, ROLE_WORLD_SIZE, ROLE_NAME, MASTER_ADDR, MASTER_PORT,
// TORCHELASTIC_RESTART_COUNT, TORCHELASTIC_USE_AGENT_STORE. `group_world_size`
// is the number of nodes (GROUP_WORLD_SIZE).
EnvMap TorchrunVariables(const RankEnv& rank_env, int group_world_size);

}  // namespace mtb

#endif  // MTB_COMMON_LAUNCH_RANK_ENV_H_
