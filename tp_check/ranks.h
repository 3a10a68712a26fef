// How tp_check becomes one rank of a group: in this process for --nproc=1,
// else through common/launch (launcher spawns --nproc ranks; a worker joins
// the group its RANK/WORLD_SIZE/MASTER_* variables describe).
#ifndef MTB_TP_CHECK_RANKS_H_
#define MTB_TP_CHECK_RANKS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/collective/communicator.h"
#include "common/launch/rank_env.h"
#include "common/launch/timeouts.h"
#include "tp_check/options.h"

namespace mtb::tp_check {

// The world size this command will run with, known before anything starts,
// and how the user set it: "WORLD_SIZE=<n>" in a worker, "--nproc=<n>" for
// one node, "world size <n> (--nnodes=<a> x --nproc=<b>)" otherwise. Errors are
// invalid rank variables (kInvalidArgument).
absl::StatusOr<World> ResolveWorld(const EnvMap& env);

// True when no rank variables are set and the launch flags ask for one rank
// on one node: the checks run in this process (world size 1).
bool RunsInProcess(const EnvMap& env);

// A world of one: this process is rank 0 over an in-process store.
absl::StatusOr<std::unique_ptr<collective::Communicator>> SingleRankCommunicator(
    absl::Duration timeout);

// Joins the group `rank_env` describes (common/launch/rendezvous_env.h: the
// TCPStore its launcher hosts, or hosted by rank 0 when nobody does), waiting
// with `timeouts` (common/launch/timeouts.h; the caller tightens to the
// steady-state timeout after the first check). Collective: every rank
// calls it.
absl::StatusOr<std::unique_ptr<collective::Communicator>> JoinGroup(
    const RankEnv& rank_env, const TimeoutOptions& timeouts);

}  // namespace mtb::tp_check

#endif  // MTB_TP_CHECK_RANKS_H_
