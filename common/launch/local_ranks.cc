#include "common/launch/local_ranks.h"

#include <algorithm>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/base/flags.h"
#include "common/base/status.h"
#include "common/results/atomic_file.h"
#include "common/results/output_path.h"

namespace mtb {
namespace {

void PrintLine(const std::string& line) { std::cerr << line << std::endl; }

std::vector<std::string> EnvLines(const EnvMap& env) {
  std::vector<std::string> lines;
  lines.reserve(env.size());
  for (const auto& [name, value] : env) lines.push_back(name + "=" + value);
  return lines;
}

}  // namespace

NodeOutcome OutcomeOf(const SupervisionResult& result, int node) {
  NodeOutcome outcome;
  outcome.node = node;
  outcome.exit_code = result.exit_code;
  if (result.exit_code == 0) return outcome;
  if (!result.external_stop.empty()) {
    outcome.what = result.external_stop;  // another node's failure decides
  } else if (result.failure < 0) {
    outcome.restartable = false;  // a signal sent to the launcher
    outcome.what = absl::StrCat("the launcher received ",
                                SignalName(result.forwarded_signal));
    outcome.not_restartable_why = outcome.what;
  } else {
    const ChildEnd& failed = result.ends[result.failure];
    outcome.restartable = failed.signaled || IsRestartable(failed.exit_code);
    if (!failed.signaled && failed.exit_code == kExitPreempted) {
      outcome.not_restartable_why = absl::StrCat(
          "exit code ", kExitPreempted,
          ": preempted (the ranks stopped on a SIGTERM notice after saving "
          "their state; resume the job)");
    } else if (!outcome.restartable) {
      outcome.not_restartable_why =
          absl::StrCat("exit code ", failed.exit_code,
                       " is a deterministic failure (it would happen again)");
    }
    outcome.what = !result.stall.empty()
                       ? absl::StrCat("heartbeat: ", result.stall)
                       : absl::StrCat("rank ", failed.rank, " (pid ", failed.pid,
                                      ") ", failed.Describe());
  }
  return outcome;
}

HeartbeatPolicy HeartbeatPolicyFor(const LaunchOptions& options, const TimeoutOptions& timeouts) {
  // The caps leave the waiting ranks' own timeout a fifth of its length to
  // spare: the launcher must speak first.
  constexpr double kCapFraction = 0.8;
  HeartbeatPolicy policy;
  policy.floor = options.heartbeat_floor;
  policy.cap = kCapFraction * timeouts.collective_timeout;
  if (!options.heartbeat_auto) policy.fixed = options.heartbeat_timeout;
  policy.first_step = std::min(kCapFraction * timeouts.first_step_timeout,
                               std::max(2 * options.heartbeat_floor, policy.fixed));
  return policy;
}

RestartDecision DecideRestart(const std::vector<NodeOutcome>& outcomes,
                              int attempt, int max_restarts) {
  RestartDecision decision;
  bool failed = false;
  for (const NodeOutcome& outcome : outcomes) {
    if (outcome.exit_code == 0) continue;
    failed = true;
    if (!outcome.restartable) {
      decision.reason = absl::StrCat(
          "not restarting: ",
          outcomes.size() > 1 ? absl::StrCat("node ", outcome.node, ": ") : "",
          outcome.not_restartable_why);
      return decision;
    }
  }
  if (!failed) return decision;
  if (attempt >= max_restarts) {
    decision.reason = absl::StrCat("giving up after ", attempt,
                                   " restart(s) (--max_restarts=", max_restarts, ")");
    return decision;
  }
  decision.restart = true;
  return decision;
}

absl::StatusOr<int> SuperviseLocalRanks(const LaunchOptions& options,
                                        const std::string& executable,
                                        const std::vector<std::string>& argv,
                                        const EnvMap& parent_env,
                                        const EnvMap& extra_env,
                                        GroupCoordinator* coordinator) {
  if (coordinator == nullptr && options.nnodes > 1 && options.max_restarts > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_restarts=", options.max_restarts, " with --nnodes=", options.nnodes,
        ": restarting across nodes needs the launchers' store, which this "
        "tool does not host"));
  }
  SupervisorOptions supervision;
  supervision.kill_grace = options.kill_grace;
  if (options.heartbeat_on()) {
    const TimeoutOptions timeouts = TimeoutOptionsFromFlags();
    supervision.heartbeat = HeartbeatPolicyFor(options, timeouts);
    supervision.wait_progress_every = timeouts.wait_progress_every;
    supervision.heartbeat_tears_down = !options.heartbeat_never_stops;
    PrintLine(
        absl::StrCat("launch: heartbeat on: a group that makes no progress while a rank waits in a "
                     "collective is stopped, naming the rank it waits for, after ",
                     supervision.heartbeat->Describe(), "; during the first step after ",
                     absl::FormatDuration(supervision.heartbeat->first_step),
                     "; who waits for whom is printed every ",
                     absl::FormatDuration(timeouts.wait_progress_every),
                     " (--heartbeat_timeout=0 turns it off)"));
  }
  supervision.children_are_whole_group = options.nnodes == 1;
  if (!options.log_dir.empty()) {
    supervision.log_dir = ResolveUserPath(options.log_dir);
    absl::Status created = CreateDirectories(supervision.log_dir);
    if (!created.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--log_dir=", options.log_dir, ": ", created.message()));
    }
  }
  if (SetsOmpNumThreads(options, parent_env)) {
    PrintLine(absl::StrCat(
        "launch: OMP_NUM_THREADS is not set; setting it to 1 for each of the ",
        options.nproc,
        " ranks so they do not overload this host (set it to tune)"));
  }

  // How each attempt so far ended, told to the next one's ranks
  // (MTB_RESTART_HISTORY): a tool's result can then say why it restarted.
  std::vector<std::string> earlier_attempts;
  for (int attempt = 0;; ++attempt) {
    std::vector<ChildSpec> children;
    for (int local_rank = 0; local_rank < options.nproc; ++local_rank) {
      ChildSpec child;
      child.rank = options.rank_of(local_rank);
      child.executable = executable;
      child.argv = argv;
      if (attempt > 0) {
        child.argv.insert(child.argv.end(), options.restart_args.begin(),
                          options.restart_args.end());
      }
      EnvMap env = ChildEnvironment(options, local_rank, attempt, parent_env);
      if (!supervision.log_dir.empty()) env["MTB_LOG_DIR"] = supervision.log_dir;
      if (!earlier_attempts.empty()) {
        env["MTB_RESTART_HISTORY"] = absl::StrJoin(earlier_attempts, "\n");
      }
      for (const auto& [name, value] : extra_env) env[name] = value;
      child.env = EnvLines(env);
      children.push_back(std::move(child));
    }
    if (coordinator != nullptr) {
      supervision.external_stop = [coordinator, attempt] {
        return coordinator->OtherNodeStopped(attempt);
      };
      supervision.on_teardown = [coordinator, attempt](const ChildEnd*,
                                                       const std::string& what) {
        coordinator->Stopping(attempt, what);
      };
    }
    ASSIGN_OR_RETURN(const SupervisionResult result,
                     Supervise(children, supervision));
    if (!result.summary.empty()) PrintLine(result.summary);
    const NodeOutcome outcome = OutcomeOf(result, options.node_rank);
    RestartDecision decision;
    if (coordinator != nullptr) {
      ASSIGN_OR_RETURN(decision, coordinator->Decide(attempt, outcome));
    } else {
      decision = DecideRestart({outcome}, attempt, options.max_restarts);
    }
    if (!decision.restart) {
      if (!decision.reason.empty() && options.max_restarts > 0) {
        PrintLine(absl::StrCat("launch: ", decision.reason));
      }
      return result.exit_code;
    }
    earlier_attempts.push_back(absl::StrReplaceAll(outcome.what, {{"\n", " "}}));
    PrintLine(absl::StrCat(
        "launch: restarting all ", options.world_size(), " ranks",
        options.nnodes > 1 ? absl::StrCat(" on ", options.nnodes, " nodes") : "",
        " (restart ", attempt + 1, " of ", options.max_restarts, ")",
        options.restart_args.empty()
            ? ""
            : absl::StrCat(" with ", absl::StrJoin(options.restart_args, " ")),
        options.nnodes > 1 && options.node_rank != 0 ? ", as node 0 decided" : ""));
  }
}

}  // namespace mtb
