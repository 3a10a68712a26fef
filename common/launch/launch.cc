#include "common/launch/launch.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/base/flags.h"
#include "common/base/logging.h"
#include "common/base/status.h"
#include "common/collective/rendezvous.h"
#include "common/collective/store.h"
#include "common/launch/local_ranks.h"
#include "common/launch/store_host.h"
#include "common/launch/timeouts.h"
#include "common/results/atomic_file.h"
#include "common/results/output_path.h"

namespace mtb {
namespace {

// How long node 0's launcher waits to reach its own store at --master_addr
// (or --connect_timeout, when shorter).
constexpr absl::Duration kStoreConnectTimeout = absl::Seconds(30);

void PrintLine(const std::string& line) { std::cerr << line << std::endl; }

std::string RankRange(int first, int count) {
  return count == 1 ? absl::StrCat("rank ", first)
                    : absl::StrCat("ranks ", first, "-", first + count - 1);
}

// "20261203T114636_4242": when and where this job's launcher started.
std::string NewRunId() {
  return absl::StrCat(absl::FormatTime("%Y%m%dT%H%M%S", absl::Now(), absl::UTCTimeZone()),
                      "_", ::getpid());
}

// Vocabulary: the launchers of a group spanning nodes meet on node 0's store
// under "launch/". Each attempt a has its keys:
//   attempt_<a>/stop      the first node whose group began a teardown on its
//                         own says why; every other node tears down too
//   attempt_<a>/node_<k>  node k's outcome once its group has ended:
//                         "<exit code> <restartable 0|1> <what>"
//   attempt_<a>/decision  node 0's: "restart" or "stop <why>"
//   attempt_<a>/ack_<k>   node k has read the decision (node 0 keeps the
//                         store up until every node has)
// and "run_id" is node 0's job id.
class StoreCoordinator : public GroupCoordinator {
 public:
  StoreCoordinator(collective::Store store, const LaunchOptions& options,
                   absl::Duration wait)
      : store_(std::move(store)), options_(options), wait_(wait) {}

  std::optional<std::string> OtherNodeStopped(int attempt) override {
    const std::string key = Key(attempt, "stop");
    absl::StatusOr<bool> set = store_.Check(key);
    if (!set.ok()) {
      return absl::StrCat("lost node 0's store (", set.status().message(), ")");
    }
    if (!*set) return std::nullopt;
    absl::StatusOr<std::string> why = store_.Get(key, wait_);
    return why.ok() ? *why : std::string("another node stopped");
  }

  void Stopping(int attempt, const std::string& what) override {
    (void)store_.Set(Key(attempt, "stop"),
                     absl::StrCat("node ", options_.node_rank, " stopped: ", what));
  }

  absl::StatusOr<RestartDecision> Decide(int attempt,
                                         const NodeOutcome& outcome) override {
    RETURN_IF_ERROR(store_.Set(
        Key(attempt, absl::StrCat("node_", options_.node_rank)),
        absl::StrCat(outcome.exit_code, " ", outcome.restartable ? 1 : 0, " ",
                     outcome.restartable ? outcome.what : outcome.not_restartable_why)));
    if (options_.node_rank != 0) {
      ASSIGN_OR_RETURN(const std::string decision,
                       Wait(Key(attempt, "decision"), "node 0's decision"));
      RETURN_IF_ERROR(store_.Set(Key(attempt, absl::StrCat("ack_", options_.node_rank)), "1"));
      RestartDecision followed;
      followed.restart = decision == "restart";
      if (!followed.restart && decision.size() > 5) followed.reason = decision.substr(5);
      return followed;
    }
    std::vector<NodeOutcome> outcomes;
    for (int node = 0; node < options_.nnodes; ++node) {
      ASSIGN_OR_RETURN(const std::string text,
                       Wait(Key(attempt, absl::StrCat("node_", node)),
                            absl::StrCat("node ", node, "'s outcome")));
      outcomes.push_back(Parse(node, text));
    }
    const RestartDecision decision =
        DecideRestart(outcomes, attempt, options_.max_restarts);
    RETURN_IF_ERROR(store_.Set(Key(attempt, "decision"),
                               decision.restart ? "restart"
                                                : absl::StrCat("stop ", decision.reason)));
    for (int node = 1; node < options_.nnodes; ++node) {
      RETURN_IF_ERROR(Wait(Key(attempt, absl::StrCat("ack_", node)),
                           absl::StrCat("node ", node, " to read the decision"))
                          .status());
    }
    return decision;
  }

 private:
  static std::string Key(int attempt, absl::string_view what) {
    return absl::StrCat("attempt_", attempt, "/", what);
  }

  absl::StatusOr<std::string> Wait(const std::string& key, absl::string_view what) {
    absl::StatusOr<std::string> value = store_.Get(key, wait_);
    if (!value.ok()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "launch: node ", options_.node_rank, " waited ",
          absl::FormatDuration(wait_), " for ", what, ": ", value.status().message()));
    }
    return value;
  }

  static NodeOutcome Parse(int node, const std::string& text) {
    NodeOutcome outcome;
    outcome.node = node;
    const std::vector<std::string> parts = absl::StrSplit(text, absl::MaxSplits(' ', 2));
    if (parts.size() >= 2) {
      (void)absl::SimpleAtoi(parts[0], &outcome.exit_code);
      outcome.restartable = parts[1] == "1";
    }
    const std::string what = parts.size() == 3 ? parts[2] : text;
    (outcome.restartable ? outcome.what : outcome.not_restartable_why) = what;
    return outcome;
  }

  collective::Store store_;
  const LaunchOptions options_;
  const absl::Duration wait_;
};

// A client of node 0's store under "launch/" for this launcher.
absl::StatusOr<collective::Store> LauncherStore(const LaunchOptions& options,
                                                absl::Duration connect_timeout) {
  collective::RendezvousOptions client;
  client.rank = options.node_rank;
  client.world_size = options.nnodes;
  client.master_addr = options.master_addr;
  client.master_port = options.master_port;
  client.connect_timeout = connect_timeout;
  absl::StatusOr<collective::Store> store = collective::ConnectStore(client);
  if (!store.ok()) {
    return Annotate(store.status(),
                    absl::StrCat("launch: node ", options.node_rank,
                                 "'s launcher joining the others"));
  }
  return store->WithPrefix("launch");
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
        store, HostedStore::Start(
                   options.master_addr, options.master_port,
                   std::min(kStoreConnectTimeout, TimeoutOptionsFromFlags().connect_timeout)));
    options.master_port = store->port();
  }

  // Across nodes the launchers agree on the job's id and on restarts
  // through node 0's store (StoreCoordinator).
  std::unique_ptr<StoreCoordinator> coordinator;
  if (options.nnodes > 1) {
    const TimeoutOptions timeouts = TimeoutOptionsFromFlags();
    ASSIGN_OR_RETURN(collective::Store launch_store,
                     LauncherStore(options, timeouts.connect_timeout));
    if (options.node_rank == 0) {
      options.run_id = NewRunId();
      RETURN_IF_ERROR(launch_store.Set("run_id", options.run_id));
    } else {
      ASSIGN_OR_RETURN(options.run_id,
                       launch_store.Get("run_id", timeouts.connect_timeout));
    }
    // A node's ranks end within the kill grace of a teardown; the others'
    // outcome may take a first step's time (a group that ends in success
    // ends together).
    coordinator = std::make_unique<StoreCoordinator>(
        std::move(launch_store), options,
        timeouts.connect_timeout + timeouts.first_step_timeout + options.kill_grace);
  } else {
    options.run_id = NewRunId();
  }

  PrintLine(absl::StrCat(
      "launch: node ", options.node_rank, " of ", options.nnodes, " starts ",
      RankRange(options.rank_of(0), options.nproc), " of ",
      options.world_size(), "; TCPStore at ", options.master_addr, ":",
      options.master_port,
      options.node_rank == 0 ? " (hosted here)" : " (hosted by node 0)"));
  return SuperviseLocalRanks(options, executable, argv, parent_env, {},
                             coordinator.get());
}

absl::StatusOr<LaunchDecision> LaunchOrBecomeWorker(
    int argc, char** argv, const LaunchDefaults& defaults) {
  const EnvMap env = ProcessEnvironment();
  const LaunchOptions options = LaunchOptionsFromFlags(defaults);
  LaunchDecision decision;
  if (HasRankEnv(env)) {
    ASSIGN_OR_RETURN(decision.rank_env, ParseRankEnv(WithEndpointFlags(env)));
    RETURN_IF_ERROR(CheckAddressResolves("MASTER_ADDR", decision.rank_env.master_addr));
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
  if (!options.master_addr.empty()) {
    RETURN_IF_ERROR(CheckAddressResolves("--master_addr", options.master_addr));
  }
  RETURN_IF_ERROR(
      ValidateHeartbeatTimeout(options.heartbeat_timeout, TimeoutOptionsFromFlags()));
  ASSIGN_OR_RETURN(
      decision.exit_code,
      RunLauncher(options, "/proc/self/exe",
                  std::vector<std::string>(argv, argv + argc), env));
  decision.role = LaunchDecision::Role::kLauncher;
  return decision;
}

}  // namespace mtb
