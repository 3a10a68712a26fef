#include "common/launch/launch.h"

#include <iostream>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/results/atomic_file.h"
#include "common/base/flags.h"
#include "common/launch/store_host.h"
#include "common/launch/local_ranks.h"
#include "common/base/logging.h"
#include "common/results/output_path.h"
#include "common/base/status.h"

namespace mtb {
namespace {

// How long node 0's launcher waits to reach its own store at --master_addr.
constexpr absl::Duration kStoreConnectTimeout = absl::Seconds(30);

void PrintLine(const std::string& line) { std::cerr << line << std::endl; }

std::string RankRange(int first, int count) {
  return count == 1 ? absl::StrCat("rank ", first)
                    : absl::StrCat("ranks ", first, "-", first + count - 1);
}

}  // namespace

absl::StatusOr<int> RunLauncher(const LaunchOptions& requested,
                                const std::string& executable,
                                const std::vector<std::string>& argv,
                                const EnvMap& parent_env) {
  LaunchOptions options = WithDefaultEndpoint(requested);
  if (!options.log_dir.empty()) {
    // Checked before the store starts; SuperviseLocalRanks creates it.
    absl::Status created = CreateDirectories(ResolveUserPath(options.log_dir));
    if (!created.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--log_dir=", options.log_dir, ": ", created.message()));
    }
  }

  // Node 0 hosts the store for the whole group, before any rank exists; it
  // lives until every local rank has ended.
  std::unique_ptr<HostedStore> store;
  if (options.node_rank == 0) {
    ASSIGN_OR_RETURN(
        store, HostedStore::Start(options.master_addr, options.master_port,
                                  kStoreConnectTimeout));
    options.master_port = store->port();
  }

  PrintLine(absl::StrCat(
      "launch: node ", options.node_rank, " of ", options.nnodes, " starts ",
      RankRange(options.rank_of(0), options.nproc), " of ",
      options.world_size(), "; TCPStore at ", options.master_addr, ":",
      options.master_port,
      options.node_rank == 0 ? " (hosted here)" : " (hosted by node 0)"));
  return SuperviseLocalRanks(options, executable, argv, parent_env);
}

absl::StatusOr<LaunchDecision> LaunchOrBecomeWorker(
    int argc, char** argv, const LaunchDefaults& defaults) {
  const EnvMap env = ProcessEnvironment();
  const LaunchOptions options = LaunchOptionsFromFlags(defaults);
  LaunchDecision decision;
  if (HasRankEnv(env)) {
    ASSIGN_OR_RETURN(decision.rank_env, ParseRankEnv(env));
    // Our own ranks carry --nproc in their argv, equal to LOCAL_WORLD_SIZE.
    if (FlagWasSet("nproc") &&
        options.nproc != decision.rank_env.local_world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--nproc=", options.nproc, " conflicts with LOCAL_WORLD_SIZE=",
          decision.rank_env.local_world_size,
          ": RANK/WORLD_SIZE are set, so this process is one rank; unset "
          "them to launch"));
    }
    decision.role = LaunchDecision::Role::kWorker;
    SetProcessLogRank(decision.rank_env.rank);
    return decision;
  }
  RETURN_IF_ERROR(ValidateLaunchOptions(options));
  ASSIGN_OR_RETURN(
      decision.exit_code,
      RunLauncher(options, "/proc/self/exe",
                  std::vector<std::string>(argv, argv + argc), env));
  decision.role = LaunchDecision::Role::kLauncher;
  return decision;
}

}  // namespace mtb
