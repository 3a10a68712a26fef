// Starting and supervising this node's ranks, without hosting a store: the
// part of the launcher (launch.h) that needs no LibTorch. RunLauncher hosts
// the TCPStore and then calls it; binaries that must not link LibTorch
// (comm_bench_nccl, which exchanges NCCL's id another way) call it directly.
//
// Restarts (--max_restarts): every attempt is one supervision of this node's
// ranks; when it ends with a failure the group restarts (every rank, a new
// attempt number, the tool's restart arguments) unless the failure would
// only happen again, a signal was forwarded, or the budget is spent
// (DecideRestart). Across nodes the launchers agree through a
// GroupCoordinator (launch.cc implements one over the store): node 0's
// launcher decides for all, the others follow.
#ifndef MTB_COMMON_LAUNCH_LOCAL_RANKS_H_
#define MTB_COMMON_LAUNCH_LOCAL_RANKS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/launch/launch_options.h"
#include "common/launch/rank_env.h"
#include "common/launch/supervisor.h"
#include "common/launch/timeouts.h"

namespace mtb {

// The heartbeat's timeouts for `options` (which must have heartbeat_on()):
// a fixed --heartbeat_timeout, or automatically the larger of the floor and
// 10x the slowest step, capped at 80% of --collective_timeout; the first
// step's allowance is twice the floor (or the fixed timeout, when larger),
// capped at 80% of --first_step_timeout. Under the caps the launcher names
// the rank before the waiting ranks' own timeout ends the run.
HeartbeatPolicy HeartbeatPolicyFor(const LaunchOptions& options, const TimeoutOptions& timeouts);

// How one node's attempt ended.
struct NodeOutcome {
  int node = 0;
  int exit_code = 0;  // the launcher's code for this node (0, 1, 128+N)
  // False when a restart could not help: a rank exited 2 or 3, or the
  // launcher was sent a signal; then why ("exit code 3 is a deterministic
  // failure (it would happen again)").
  bool restartable = true;
  std::string not_restartable_why;
  // What ended it, for messages: "rank 3 (pid 77) exited with code 5".
  std::string what;
};

NodeOutcome OutcomeOf(const SupervisionResult& result, int node);

// What every node does after an attempt.
struct RestartDecision {
  bool restart = false;
  // When not restarting: why, for one line ("" when every node succeeded).
  std::string reason;
};

// Restart iff some node failed, every failure is restartable and `attempt`
// (0-based) < max_restarts.
RestartDecision DecideRestart(const std::vector<NodeOutcome>& outcomes,
                              int attempt, int max_restarts);

// How the launchers of a group spanning nodes agree (nullptr on one node).
class GroupCoordinator {
 public:
  virtual ~GroupCoordinator() = default;
  // During `attempt`, asked about every 250 ms: another node's teardown
  // (its reason), so this node tears its ranks down too.
  virtual std::optional<std::string> OtherNodeStopped(int attempt) = 0;
  // This node's group began its teardown on its own: tell the others.
  virtual void Stopping(int attempt, const std::string& what) = 0;
  // This node's group has ended: report it and return what every node does
  // next (node 0 decides from every node's outcome, the others wait for it).
  virtual absl::StatusOr<RestartDecision> Decide(int attempt,
                                                 const NodeOutcome& outcome) = 0;
};

// Starts options.nproc copies of `executable` with `argv`, each with
// ChildEnvironment(options, local_rank, attempt, parent_env) plus
// MTB_LOG_DIR (the resolved --log_dir), from the first restart on
// MTB_RESTART_HISTORY (what ended each earlier attempt, NodeOutcome::what,
// one line each) and `extra_env` (which wins on a clash), supervises them (supervisor.h) with --heartbeat_timeout, restarts
// as above, and returns the launcher's exit code (docs/launch.md), after
// printing the failure summary when there is one. `options` must have its
// endpoint resolved (WithDefaultEndpoint, and a master_port != 0).
// kInvalidArgument for a --log_dir that cannot be created, or for restarts
// across nodes without a coordinator.
absl::StatusOr<int> SuperviseLocalRanks(const LaunchOptions& options,
                                        const std::string& executable,
                                        const std::vector<std::string>& argv,
                                        const EnvMap& parent_env,
                                        const EnvMap& extra_env = {},
                                        GroupCoordinator* coordinator = nullptr);

}  // namespace mtb

#endif  // MTB_COMMON_LAUNCH_LOCAL_RANKS_H_
