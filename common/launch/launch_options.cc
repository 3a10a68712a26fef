#include "common/launch/launch_options.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <algorithm>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/base/flags.h"
#include "common/base/status.h"

ABSL_FLAG(int, nproc, 1,
          "ranks to start on this node (alias --nproc_per_node); the world "
          "size is --nnodes x --nproc. Some tools default to more (trainer: "
          "2). Ignored when RANK/WORLD_SIZE are set: the process is then one "
          "rank (docs/launch.md)");
ABSL_FLAG(int, nnodes, 1,
          "nodes in the group; each runs one launcher with the same flags "
          "and its own --node_rank");
ABSL_FLAG(int, node_rank, 0, "this node's rank, 0 .. --nnodes-1");
ABSL_FLAG(std::string, master_addr, "",
          "address of node 0, where its launcher hosts the c10d TCPStore "
          "(default 127.0.0.1 on one node; required with --nnodes > 1)");
ABSL_FLAG(int, master_port, 0,
          "TCPStore port on --master_addr (default: a free port on one "
          "node, 29500 across nodes)");
ABSL_FLAG(bool, standalone, false,
          "one node on 127.0.0.1 and a free port (the default for one node; "
          "rejects --nnodes, --master_addr and --master_port)");
ABSL_FLAG(std::string, log_dir, "",
          "also write rank N's output to <log_dir>/rank_N.log (created if "
          "missing)");
ABSL_FLAG(int, max_restarts, 0,
          "after a rank fails, restart the whole group up to this many times "
          "(torchrun's --max-restarts; exit codes 2 and 3 are never "
          "restarted); across nodes, node 0's launcher decides");
ABSL_FLAG(std::string, heartbeat_timeout, "auto",
          "when no rank makes progress for this long while one waits in a "
          "collective, tear the group down naming the rank it waits for (each "
          "rank reports its step, phase and collective). auto: the larger of "
          "60s and 10x the slowest step, below --collective_timeout, and the "
          "first step gets its own allowance (printed at start); a duration "
          "< --collective_timeout; 0: off (docs/faults.md, \"Hangs\")");
ABSL_FLAG(absl::Duration, test_only_heartbeat_floor, absl::Seconds(60),
          "tests only: the automatic heartbeat timeout's floor, so that a "
          "test names a hang within seconds");
ABSL_FLAG(bool, test_only_heartbeat_never_stops, false,
          "tests only: the heartbeat watch reports who waits for whom but never "
          "stops the group, so a waiting rank's own collective timeout ends a "
          "hang and the launcher's last line must still name the rank waited for");
ABSL_FLAG(absl::Duration, kill_grace, absl::Seconds(5),
          "after a rank fails (or the launcher is interrupted), how long the "
          "other ranks get between SIGTERM and SIGKILL");

namespace mtb {
namespace {

// Registered at start-up so that ParseCommandLine knows the alias.
const bool kNprocAliasRegistered = [] {
  RegisterFlagAlias("nproc_per_node", "nproc");
  return true;
}();

absl::Status Invalid(const std::string& message) {
  return absl::InvalidArgumentError(message);
}

}  // namespace

LaunchOptions LaunchOptionsFromFlags(const LaunchDefaults& defaults) {
  (void)kNprocAliasRegistered;
  LaunchOptions options;
  options.nproc =
      FlagWasSet("nproc") ? absl::GetFlag(FLAGS_nproc) : defaults.nproc;
  options.nnodes = absl::GetFlag(FLAGS_nnodes);
  options.node_rank = absl::GetFlag(FLAGS_node_rank);
  options.master_addr = absl::GetFlag(FLAGS_master_addr);
  options.master_port = absl::GetFlag(FLAGS_master_port);
  options.standalone = absl::GetFlag(FLAGS_standalone);
  options.log_dir = absl::GetFlag(FLAGS_log_dir);
  options.kill_grace = absl::GetFlag(FLAGS_kill_grace);
  options.max_restarts = absl::GetFlag(FLAGS_max_restarts);
  options.restart_args = defaults.restart_args;
  const std::string heartbeat = absl::GetFlag(FLAGS_heartbeat_timeout);
  options.heartbeat_auto = heartbeat == "auto";
  if (!options.heartbeat_auto && !absl::ParseDuration(heartbeat, &options.heartbeat_timeout)) {
    // ValidateLaunchOptions refuses it, naming the value.
    options.heartbeat_text = heartbeat;
    options.heartbeat_timeout = -absl::InfiniteDuration();
  }
  options.heartbeat_floor = absl::GetFlag(FLAGS_test_only_heartbeat_floor);
  options.heartbeat_never_stops = absl::GetFlag(FLAGS_test_only_heartbeat_never_stops);
  options.reports_heartbeats = defaults.reports_heartbeats;
  return options;
}

absl::Status ValidateLaunchOptions(const LaunchOptions& options) {
  if (options.nproc < 1) {
    return Invalid(absl::StrCat("--nproc=", options.nproc, " must be >= 1"));
  }
  if (options.nnodes < 1) {
    return Invalid(absl::StrCat("--nnodes=", options.nnodes, " must be >= 1"));
  }
  if (options.node_rank < 0) {
    return Invalid(
        absl::StrCat("--node_rank=", options.node_rank, " must be >= 0"));
  }
  if (options.node_rank >= options.nnodes) {
    return Invalid(absl::StrCat("--node_rank=", options.node_rank,
                                " must be < --nnodes=", options.nnodes));
  }
  if (options.master_port < 0 || options.master_port > 65535) {
    return Invalid(absl::StrCat("--master_port=", options.master_port,
                                " is not a port number (1-65535)"));
  }
  if (options.standalone) {
    if (options.nnodes > 1) {
      return Invalid(absl::StrCat(
          "--standalone runs one node; it cannot be combined with --nnodes=",
          options.nnodes));
    }
    if (!options.master_addr.empty()) {
      return Invalid(
          absl::StrCat("--standalone listens on 127.0.0.1; drop --master_addr=",
                       options.master_addr));
    }
    if (options.master_port != 0) {
      return Invalid(
          absl::StrCat("--standalone picks a free port; drop "
                       "--master_port=",
                       options.master_port));
    }
  }
  if (options.nnodes > 1 && options.master_addr.empty()) {
    return Invalid(absl::StrCat(
        "--nnodes=", options.nnodes,
        " needs --master_addr (the address of node 0, where its launcher "
        "hosts the TCPStore; every node must reach it)"));
  }
  if (options.max_restarts < 0) {
    return Invalid(absl::StrCat("--max_restarts=", options.max_restarts,
                                " must be >= 0"));
  }
  if (options.heartbeat_timeout == -absl::InfiniteDuration()) {
    return Invalid(absl::StrCat("--heartbeat_timeout=", options.heartbeat_text,
                                " is neither auto nor a duration (e.g. 90s, 0 for off)"));
  }
  if (options.heartbeat_timeout < absl::ZeroDuration()) {
    return Invalid(absl::StrCat(
        "--heartbeat_timeout=", absl::FormatDuration(options.heartbeat_timeout),
        " must be >= 0 (0: off)"));
  }
  if (options.heartbeat_floor < kMinHeartbeatTimeout) {
    return Invalid(
        absl::StrCat("--test_only_heartbeat_floor=", absl::FormatDuration(options.heartbeat_floor),
                     " must be at least ", absl::FormatDuration(kMinHeartbeatTimeout)));
  }
  if (options.heartbeat_timeout > absl::ZeroDuration()) {
    if (!options.reports_heartbeats) {
      return Invalid(absl::StrCat(
          "--heartbeat_timeout=", absl::FormatDuration(options.heartbeat_timeout),
          ": this tool's ranks do not report heartbeats (the trainer, "
          "comm_bench and moe_comm do); leave it unset"));
    }
    if (options.heartbeat_timeout < kMinHeartbeatTimeout) {
      return Invalid(absl::StrCat(
          "--heartbeat_timeout=", absl::FormatDuration(options.heartbeat_timeout),
          " must be at least ", absl::FormatDuration(kMinHeartbeatTimeout),
          " (ranks report 4 times per timeout; the launcher looks twice a "
          "second)"));
    }
  }
  if (options.kill_grace < absl::ZeroDuration()) {
    return Invalid(
        absl::StrCat("--kill_grace=", absl::FormatDuration(options.kill_grace),
                     " must be >= 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckAddressResolves(absl::string_view what, const std::string& address) {
  addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int error = ::getaddrinfo(address.c_str(), nullptr, &hints, &found);
  if (found != nullptr) ::freeaddrinfo(found);
  if (error == 0) return absl::OkStatus();
  return Invalid(absl::StrCat(what, "=", address, " does not resolve (", ::gai_strerror(error),
                              "): give node 0's IP address or a name every node resolves"));
}

absl::Duration HeartbeatInterval(const LaunchOptions& options) {
  if (!options.heartbeat_auto) return options.heartbeat_timeout / 4;
  return std::min(options.heartbeat_floor / 4, absl::Seconds(1));
}

bool IsRestartable(int exit_code) {
  return exit_code != kExitUsage && exit_code != kExitDeterministicFailure &&
         exit_code != kExitPreempted;
}

LaunchOptions WithDefaultEndpoint(LaunchOptions options) {
  if (options.master_addr.empty()) options.master_addr = "127.0.0.1";
  if (options.master_port == 0 && options.nnodes > 1) {
    options.master_port = kDefaultMasterPort;
  }
  return options;
}

EnvMap WithEndpointFlags(EnvMap env) {
  if (FlagWasSet("master_addr") && env.count("MASTER_ADDR") == 0) {
    env["MASTER_ADDR"] = absl::GetFlag(FLAGS_master_addr);
  }
  if (FlagWasSet("master_port") && env.count("MASTER_PORT") == 0) {
    env["MASTER_PORT"] = absl::StrCat(absl::GetFlag(FLAGS_master_port));
  }
  return env;
}

absl::StatusOr<PlannedWorld> PlanWorld(const EnvMap& env,
                                       const LaunchDefaults& defaults) {
  if (HasRankEnv(env)) {
    absl::StatusOr<RankEnv> rank_env = ParseRankEnv(WithEndpointFlags(env));
    if (!rank_env.ok()) return rank_env.status();
    return PlannedWorld{rank_env->world_size, rank_env->local_world_size,
                        absl::StrCat("WORLD_SIZE=", rank_env->world_size)};
  }
  const LaunchOptions options = LaunchOptionsFromFlags(defaults);
  absl::Status valid = ValidateLaunchOptions(options);
  if (!valid.ok()) return valid;
  if (options.nnodes == 1) {
    return PlannedWorld{options.world_size(), options.nproc,
                        absl::StrCat("--nproc=", options.nproc)};
  }
  return PlannedWorld{
      options.world_size(), options.nproc,
      absl::StrCat("world size ", options.world_size(), " (--nnodes=",
                   options.nnodes, " x --nproc=", options.nproc, ")")};
}

absl::StatusOr<int> PlannedWorldSize(const LaunchDefaults& defaults) {
  absl::StatusOr<PlannedWorld> world =
      PlanWorld(ProcessEnvironment(), defaults);
  if (!world.ok()) return world.status();
  return world->world_size;
}

bool SetsOmpNumThreads(const LaunchOptions& options, const EnvMap& parent) {
  return options.nproc > 1 && parent.count("OMP_NUM_THREADS") == 0;
}

EnvMap ChildEnvironment(const LaunchOptions& options, int local_rank,
                        int restart_count, const EnvMap& parent) {
  RankEnv rank_env;
  rank_env.rank = options.rank_of(local_rank);
  rank_env.local_rank = local_rank;
  rank_env.world_size = options.world_size();
  rank_env.local_world_size = options.nproc;
  rank_env.group_rank = options.node_rank;
  rank_env.master_addr = options.master_addr;
  rank_env.master_port = options.master_port;
  rank_env.restart_count = restart_count;
  rank_env.agent_store = true;

  EnvMap env = parent;
  for (auto& [name, value] : TorchrunVariables(rank_env, options.nnodes)) {
    env[name] = value;
  }
  env["TORCHELASTIC_MAX_RESTARTS"] = absl::StrCat(options.max_restarts);
  env["TORCHELASTIC_RUN_ID"] = options.run_id;
  // Our launcher's extras (rank_env.h), never inherited from a parent.
  env.erase("MTB_HEARTBEAT_FD");
  env.erase("MTB_HEARTBEAT_INTERVAL_MS");
  env.erase("MTB_LOG_DIR");
  env.erase("MTB_RESTART_HISTORY");
  if (options.heartbeat_on()) {
    env["MTB_HEARTBEAT_FD"] = absl::StrCat(kHeartbeatFd);
    env["MTB_HEARTBEAT_INTERVAL_MS"] =
        absl::StrCat(absl::ToInt64Milliseconds(HeartbeatInterval(options)));
  }
  if (SetsOmpNumThreads(options, parent)) env["OMP_NUM_THREADS"] = "1";
  env.emplace("NCCL_ASYNC_ERROR_HANDLING", "1");
  return env;
}

}  // namespace mtb
