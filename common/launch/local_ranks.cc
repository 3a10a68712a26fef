#include "common/launch/local_ranks.h"

#include <iostream>

#include "absl/strings/str_cat.h"
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

  const int restart_count = 0;
  std::vector<ChildSpec> children;
  for (int local_rank = 0; local_rank < options.nproc; ++local_rank) {
    ChildSpec child;
    child.rank = options.rank_of(local_rank);
    child.executable = executable;
    child.argv = argv;
    EnvMap env = ChildEnvironment(options, local_rank, restart_count, parent_env);
    for (const auto& [name, value] : extra_env) env[name] = value;
    child.env = EnvLines(env);
    children.push_back(std::move(child));
  }
  ASSIGN_OR_RETURN(const SupervisionResult result,
                   Supervise(children, supervision));
  if (!result.summary.empty()) PrintLine(result.summary);
  return result.exit_code;
}

}  // namespace mtb
