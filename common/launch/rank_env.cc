#include "common/launch/rank_env.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/status.h"
#include "common/launch/launcher_env.h"

extern char** environ;

namespace mtb {
namespace {

std::optional<std::string> Lookup(const EnvMap& env, const std::string& name) {
  auto found = env.find(name);
  if (found == env.end()) return std::nullopt;
  return found->second;
}

// Parses `name`'s value as an integer >= `minimum`; `fallback` when unset.
absl::StatusOr<int> ParseInt(const EnvMap& env, const std::string& name,
                             std::optional<int> fallback, int minimum) {
  std::optional<std::string> value = Lookup(env, name);
  if (!value.has_value()) {
    if (fallback.has_value()) return *fallback;
    return absl::InvalidArgumentError(absl::StrCat(name, " is not set"));
  }
  int parsed = 0;
  if (!absl::SimpleAtoi(*value, &parsed)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "='", *value, "' is not an integer"));
  }
  if (parsed < minimum) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=", parsed, " must be >= ", minimum));
  }
  return parsed;
}

absl::StatusOr<bool> ParseBool(const EnvMap& env, const std::string& name) {
  std::optional<std::string> value = Lookup(env, name);
  if (!value.has_value()) return false;
  const std::string lower = absl::AsciiStrToLower(*value);
  if (lower == "true" || lower == "1") return true;
  if (lower == "false" || lower == "0" || lower.empty()) return false;
  return absl::InvalidArgumentError(absl::StrCat(
      name, "='", *value, "' is not a boolean (True, False, 1 or 0)"));
}

}  // namespace

EnvMap ProcessEnvironment() {
  EnvMap env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string line = *entry;
    const size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    env.emplace(line.substr(0, equals), line.substr(equals + 1));
  }
  return env;
}

bool HasRankEnv(const EnvMap& env) { return HasLauncherRankEnv(env); }

absl::StatusOr<RankEnv> ParseRankEnv(const EnvMap& launcher_env) {
  // Slurm's and MPI's variables become torchrun's (launcher_env.h).
  ASSIGN_OR_RETURN(const EnvMap env, WithLauncherVariables(launcher_env));
  RankEnv rank_env;
  rank_env.launcher = DetectedLauncher(launcher_env);
  const bool has_rank = env.count("RANK") > 0;
  const bool has_world_size = env.count("WORLD_SIZE") > 0;
  if (!has_rank && !has_world_size) {
    return absl::InvalidArgumentError(
        "neither RANK nor WORLD_SIZE is set (launch with --nproc, or set "
        "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT)");
  }
  if (has_rank != has_world_size) {
    const std::string set = has_rank ? "RANK" : "WORLD_SIZE";
    const std::string unset = has_rank ? "WORLD_SIZE" : "RANK";
    return absl::InvalidArgumentError(
        absl::StrCat(set, "=", env.at(set), " is set but ", unset,
                     " is not: set both, or neither to launch with --nproc"));
  }
  ASSIGN_OR_RETURN(rank_env.world_size,
                   ParseInt(env, "WORLD_SIZE", std::nullopt, 1));
  ASSIGN_OR_RETURN(rank_env.rank, ParseInt(env, "RANK", std::nullopt, 0));
  if (rank_env.rank >= rank_env.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RANK=", rank_env.rank, " must be < WORLD_SIZE=", rank_env.world_size));
  }

  ASSIGN_OR_RETURN(rank_env.local_world_size,
                   ParseInt(env, "LOCAL_WORLD_SIZE", rank_env.world_size, 1));
  if (rank_env.local_world_size > rank_env.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("LOCAL_WORLD_SIZE=", rank_env.local_world_size,
                     " must be <= WORLD_SIZE=", rank_env.world_size));
  }
  // By hand (env:// style) LOCAL_RANK may be missing: one node, so it is RANK.
  ASSIGN_OR_RETURN(rank_env.local_rank,
                   ParseInt(env, "LOCAL_RANK", rank_env.rank, 0));
  if (rank_env.local_rank >= rank_env.local_world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LOCAL_RANK=", rank_env.local_rank,
        " must be < LOCAL_WORLD_SIZE=", rank_env.local_world_size));
  }
  ASSIGN_OR_RETURN(rank_env.group_rank, ParseInt(env, "GROUP_RANK", 0, 0));
  if (rank_env.group_rank >= rank_env.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GROUP_RANK=", rank_env.group_rank, " must be < WORLD_SIZE=",
        rank_env.world_size, " (a node runs at least one rank)"));
  }
  ASSIGN_OR_RETURN(rank_env.restart_count,
                   ParseInt(env, "TORCHELASTIC_RESTART_COUNT", 0, 0));
  ASSIGN_OR_RETURN(rank_env.max_restarts,
                   ParseInt(env, "TORCHELASTIC_MAX_RESTARTS", 0, 0));
  ASSIGN_OR_RETURN(rank_env.agent_store,
                   ParseBool(env, "TORCHELASTIC_USE_AGENT_STORE"));
  if (std::optional<std::string> run_id = Lookup(env, "TORCHELASTIC_RUN_ID");
      run_id.has_value() && !run_id->empty()) {
    rank_env.run_id = *run_id;
  }
  rank_env.log_dir = Lookup(env, "MTB_LOG_DIR").value_or("");
  if (std::optional<std::string> history = Lookup(env, "MTB_RESTART_HISTORY");
      history.has_value() && !history->empty()) {
    rank_env.earlier_attempts = absl::StrSplit(*history, '\n');
  }
  // Descriptors 0-2 are the standard streams: a heartbeat pipe is above.
  ASSIGN_OR_RETURN(rank_env.heartbeat_fd, ParseInt(env, "MTB_HEARTBEAT_FD", -1, 3));
  ASSIGN_OR_RETURN(rank_env.heartbeat_interval_ms,
                   ParseInt(env, "MTB_HEARTBEAT_INTERVAL_MS", 1000, 1));

  std::optional<std::string> master_addr = Lookup(env, "MASTER_ADDR");
  if (!master_addr.has_value() || master_addr->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("MASTER_ADDR is not set (RANK=", rank_env.rank,
                     " WORLD_SIZE=", rank_env.world_size,
                     " also need the address of rank 0's host, e.g. "
                     "MASTER_ADDR=127.0.0.1)"));
  }
  if (master_addr->find_first_of(" \t\n") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MASTER_ADDR='", *master_addr, "' is not a host name or address"));
  }
  rank_env.master_addr = *master_addr;

  std::optional<std::string> master_port = Lookup(env, "MASTER_PORT");
  if (!master_port.has_value()) {
    return absl::InvalidArgumentError(
        "MASTER_PORT is not set (the TCPStore's port on MASTER_ADDR, e.g. "
        "MASTER_PORT=29500)");
  }
  if (!absl::SimpleAtoi(*master_port, &rank_env.master_port) ||
      rank_env.master_port < 1 || rank_env.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MASTER_PORT='", *master_port, "' is not a port number (1-65535)"));
  }
  return rank_env;
}

EnvMap TorchrunVariables(const RankEnv& rank_env, int group_world_size) {
  return {
      {"RANK", absl::StrCat(rank_env.rank)},
      {"LOCAL_RANK", absl::StrCat(rank_env.local_rank)},
      {"WORLD_SIZE", absl::StrCat(rank_env.world_size)},
      {"LOCAL_WORLD_SIZE", absl::StrCat(rank_env.local_world_size)},
      {"GROUP_RANK", absl::StrCat(rank_env.group_rank)},
      {"GROUP_WORLD_SIZE", absl::StrCat(group_world_size)},
      // One role ("default") holds every rank, as torchrun does.
      {"ROLE_RANK", absl::StrCat(rank_env.rank)},
      {"ROLE_WORLD_SIZE", absl::StrCat(rank_env.world_size)},
      {"ROLE_NAME", "default"},
      {"MASTER_ADDR", rank_env.master_addr},
      {"MASTER_PORT", absl::StrCat(rank_env.master_port)},
      {"TORCHELASTIC_RESTART_COUNT", absl::StrCat(rank_env.restart_count)},
      {"TORCHELASTIC_USE_AGENT_STORE", rank_env.agent_store ? "True" : "False"},
  };
}

}  // namespace mtb
