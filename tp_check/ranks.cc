#include "tp_check/ranks.h"

#include "absl/strings/str_cat.h"
#include "common/collective/rendezvous.h"
#include "common/collective/store.h"
#include "common/launch/launch_options.h"
#include "common/launch/rendezvous_env.h"
#include "common/base/status.h"

namespace mtb::tp_check {

absl::StatusOr<World> ResolveWorld(const EnvMap& env) {
  if (HasRankEnv(env)) {
    ASSIGN_OR_RETURN(const RankEnv rank_env, ParseRankEnv(env));
    return World{rank_env.world_size,
                 absl::StrCat("WORLD_SIZE=", rank_env.world_size)};
  }
  const LaunchOptions launch = LaunchOptionsFromFlags();
  RETURN_IF_ERROR(ValidateLaunchOptions(launch));
  if (launch.nnodes == 1) return NprocWorld(launch.nproc);
  return World{launch.world_size(),
               absl::StrCat("world size ", launch.world_size(), " (--nnodes=",
                            launch.nnodes, " x --nproc=", launch.nproc, ")")};
}

bool RunsInProcess(const EnvMap& env) {
  const LaunchOptions launch = LaunchOptionsFromFlags();
  return !HasRankEnv(env) && launch.nproc == 1 && launch.nnodes == 1;
}

absl::StatusOr<std::unique_ptr<collective::Communicator>> SingleRankCommunicator(
    absl::Duration timeout) {
  collective::CommunicatorOptions options;
  options.rank = 0;
  options.world_size = 1;
  options.timeout = timeout;
  options.gloo_hostname = "127.0.0.1";
  return collective::Communicator::Create(collective::Store::InProcess(timeout), options);
}

absl::StatusOr<std::unique_ptr<collective::Communicator>> JoinGroup(
    const RankEnv& rank_env, const TimeoutOptions& timeouts) {
  return collective::Rendezvous(RendezvousOptionsFor(rank_env, timeouts));
}

}  // namespace mtb::tp_check
