// The launch flags every multi-rank binary accepts, their rules, and the
// environment the launcher gives each rank (docs/launch.md).
//
//   --nproc (alias --nproc_per_node)  ranks on this node
//   --nnodes, --node_rank            nodes in the group, and which one this is
//   --master_addr, --master_port     where node 0's launcher hosts the TCPStore
//   --standalone                     one node, on a free port of 127.0.0.1
//   --log_dir                        also keep rank N's output in rank_N.log
//                                    (and the ranks' flight recorder dumps)
//   --kill_grace                     SIGTERM -> SIGKILL delay on teardown
//   --max_restarts                   restart the whole group after a failure
//   --heartbeat_timeout              name the rank a stalled group waits for
#ifndef MTB_COMMON_LAUNCH_LAUNCH_OPTIONS_H_
#define MTB_COMMON_LAUNCH_LAUNCH_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/base/flags.h"
#include "common/launch/rank_env.h"
#include "common/launch/spawn.h"

namespace mtb {

// torchrun's default port when the ranks span nodes and --master_port is not
// given.
inline constexpr int kDefaultMasterPort = 29500;

struct LaunchOptions {
  int nproc = 1;
  int nnodes = 1;
  int node_rank = 0;
  // Empty: 127.0.0.1 (one node only).
  std::string master_addr;
  // 0: a free port picked by the TCPStore server (one node), or
  // kDefaultMasterPort (several nodes).
  int master_port = 0;
  bool standalone = false;
  std::string log_dir;  // empty: no log files
  absl::Duration kill_grace = absl::Seconds(5);
  // --max_restarts: after a rank fails, the whole group is torn down and
  // started again, up to this many times (torchrun's --max-restarts); told to
  // the ranks as TORCHELASTIC_MAX_RESTARTS, the attempt as
  // TORCHELASTIC_RESTART_COUNT. One node only for now.
  int max_restarts = 0;
  // Appended to every rank's argv from the first restart on (the trainer's
  // "--resume=latest"); the tool sets it (LaunchDefaults), not a flag.
  std::vector<std::string> restart_args;
  // --heartbeat_timeout: each rank reports where it is on a pipe; a group
  // with no progress this long while a rank waits in a collective is torn
  // down naming the rank it waits for (common/launch/heartbeat_watch.h).
  // "auto" (the default, heartbeat_auto): sized from the job
  // (HeartbeatPolicyFor); a duration: that; zero: off.
  bool heartbeat_auto = true;
  absl::Duration heartbeat_timeout = absl::ZeroDuration();
  // The flag's text when it is neither "auto" nor a duration
  // (heartbeat_timeout is then -infinity and ValidateLaunchOptions refuses
  // it).
  std::string heartbeat_text;
  // The automatic timeout's floor (60 s; tests shrink it with
  // --test_only_heartbeat_floor so a hang is named within seconds).
  absl::Duration heartbeat_floor = absl::Seconds(60);
  // --test_only_heartbeat_never_stops (SupervisorOptions::heartbeat_tears_down).
  bool heartbeat_never_stops = false;
  // The tool sends heartbeats (LaunchDefaults); --heartbeat_timeout is
  // refused otherwise.
  bool reports_heartbeats = false;
  // The job's id, told to the ranks as TORCHELASTIC_RUN_ID (it names their
  // flight recorder dumps): node 0's launcher makes one, the others read it
  // from the store. "none" until then.
  std::string run_id = "none";

  int world_size() const { return nnodes * nproc; }
  // Ranks report heartbeats and the launcher watches them.
  bool heartbeat_on() const {
    return reports_heartbeats && (heartbeat_auto || heartbeat_timeout > absl::ZeroDuration());
  }
  // The global rank of this node's `local_rank`.
  int rank_of(int local_rank) const { return node_rank * nproc + local_rank; }
};

// A tool's own defaults for launch flags the user did not give.
struct LaunchDefaults {
  int nproc = 1;  // the trainer uses 2
  // LaunchOptions::restart_args.
  std::vector<std::string> restart_args;
  // LaunchOptions::reports_heartbeats.
  bool reports_heartbeats = false;
};

// The shortest --heartbeat_timeout (other than 0, off).
inline constexpr absl::Duration kMinHeartbeatTimeout = absl::Seconds(1);

// How often a rank sends a heartbeat: a quarter of the fixed timeout, or of
// the automatic one's floor, at most 1 s (the launcher's waiting reports
// read them).
absl::Duration HeartbeatInterval(const LaunchOptions& options);

// Rank exit codes the launcher never restarts: a usage error (kExitUsage, 2),
// a deterministic failure (kExitDeterministicFailure, 3: a non-finite loss, a
// bad configuration) that would only happen again, and a rank that stopped on
// a preemption notice after saving its state (kExitPreempted, 4)
// (common/base/flags.h).
bool IsRestartable(int exit_code);

// The launch flags as parsed by ParseCommandLine (common/base/flags.h), with
// `defaults` for those not on the command line.
LaunchOptions LaunchOptionsFromFlags(const LaunchDefaults& defaults = {});

// Checks every rule before anything starts. Errors are kInvalidArgument with
// one line naming the flag, its value and the rule, e.g. "--nproc=0 must be
// >= 1", "--nnodes=2 needs --master_addr (...)". No lookups: the launcher
// checks that --master_addr resolves (CheckAddressResolves) before it starts.
absl::Status ValidateLaunchOptions(const LaunchOptions& options);

// kInvalidArgument "<what>=<address> does not resolve (<resolver's reason>)
// ..." when the resolver cannot turn `address` into an IP address (a typo,
// a name only other hosts know): said at once, rather than retried for the
// whole --connect_timeout. `what` names its source: "--master_addr",
// "MASTER_ADDR".
absl::Status CheckAddressResolves(absl::string_view what, const std::string& address);

// `options` with the defaults filled in: master_addr 127.0.0.1 on one node,
// master_port kDefaultMasterPort across nodes. A single node's port stays 0
// until the store server has bound one.
LaunchOptions WithDefaultEndpoint(LaunchOptions options);

// The environment of this node's `local_rank`: `parent` (the launcher's own
// environment) plus the torchrun variables (TorchrunVariables with the agent
// store on, TORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_RUN_ID=options.run_id),
// with a heartbeat timeout MTB_HEARTBEAT_FD and MTB_HEARTBEAT_INTERVAL_MS
// (MTB_LOG_DIR and MTB_RESTART_HISTORY are the caller's: it resolves
// --log_dir and knows how earlier attempts ended), and
// OMP_NUM_THREADS=1 and NCCL_ASYNC_ERROR_HANDLING=1 unless `parent` sets them
// (OMP_NUM_THREADS only with more than one rank per node, as torchrun).
// `options` must have its endpoint resolved (master_port != 0).
EnvMap ChildEnvironment(const LaunchOptions& options, int local_rank,
                        int restart_count, const EnvMap& parent);

// The world this process will be part of, known before anything starts, so a
// tool can check its own flags against it (e.g. "--root=3 must be a rank in
// [0, 1]") before the launcher starts a rank. Every tool asks here, so that
// the launcher and the tools never disagree on the number.
struct PlannedWorld {
  int world_size = 1;
  // Ranks on this host: LOCAL_WORLD_SIZE in a worker, --nproc otherwise.
  int ranks_per_host = 1;
  // How the user set it, for messages: "WORLD_SIZE=4" in a worker,
  // "--nproc=2" on one node, "world size 6 (--nnodes=2 x --nproc=3)".
  std::string label;
};

// `env` plus MASTER_ADDR / MASTER_PORT from --master_addr / --master_port
// where a flag was given and its variable is not set: how a rank started by
// srun or mpirun takes the store's endpoint from its command line
// (docs/launch.md, "Slurm and MPI").
EnvMap WithEndpointFlags(EnvMap env);

// From `env` when it holds the rank variables (a worker; ParseRankEnv's
// errors otherwise), else from the launch flags (--nnodes x --nproc) after
// ValidateLaunchOptions (its errors otherwise).
absl::StatusOr<PlannedWorld> PlanWorld(const EnvMap& env,
                                       const LaunchDefaults& defaults = {});

// PlanWorld(ProcessEnvironment(), defaults).world_size.
absl::StatusOr<int> PlannedWorldSize(const LaunchDefaults& defaults = {});

// True when ChildEnvironment sets OMP_NUM_THREADS for `parent`: the launcher
// then prints one line saying so.
bool SetsOmpNumThreads(const LaunchOptions& options, const EnvMap& parent);

}  // namespace mtb

#endif  // MTB_COMMON_LAUNCH_LAUNCH_OPTIONS_H_
