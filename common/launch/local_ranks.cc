#include "common/launch/local_ranks.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/results/atomic_file.h"
#include "common/launch/supervisor.h"
#include "common/results/output_path.h"
#include "common/base/status.h"

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

absl::StatusOr<int> SuperviseLocalRanks(const LaunchOptions& options,
                                        const std::string& executable,
                                        const std::vector<std::string>& argv,
                                        const EnvMap& parent_env,
                                        const EnvMap& extra_env) {
  SupervisorOptions supervision;
  supervision.kill_grace = options.kill_grace;
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
      for (const auto& [name, value] : extra_env) env[name] = value;
      child.env = EnvLines(env);
      children.push_back(std::move(child));
    }
    ASSIGN_OR_RETURN(const SupervisionResult result,
                     Supervise(children, supervision));
    if (!result.summary.empty()) PrintLine(result.summary);
    if (result.exit_code == 0 || result.failure < 0) return result.exit_code;
    // A rank failed (not a signal forwarded to us): restart the whole group
    // unless the failure would only happen again, or the budget is spent.
    const ChildEnd& failed = result.ends[result.failure];
    if (!failed.signaled && !IsRestartable(failed.exit_code)) {
      if (options.max_restarts > 0) {
        PrintLine(absl::StrCat("launch: not restarting: exit code ",
                               failed.exit_code,
                               " is a deterministic failure (it would happen "
                               "again)"));
      }
      return result.exit_code;
    }
    if (attempt >= options.max_restarts) {
      if (options.max_restarts > 0) {
        PrintLine(absl::StrCat("launch: giving up after ", attempt,
                               " restart(s) (--max_restarts=",
                               options.max_restarts, ")"));
      }
      return result.exit_code;
    }
    PrintLine(absl::StrCat("launch: restarting all ", options.nproc,
                           " ranks (restart ", attempt + 1, " of ",
                           options.max_restarts, ")",
                           options.restart_args.empty()
                               ? ""
                               : absl::StrCat(" with ",
                                              absl::StrJoin(options.restart_args, " "))));
  }
}

}  // namespace mtb
