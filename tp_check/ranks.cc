#include "tp_check/ranks.h"

#include "absl/flags/flag.h"
#include "common/collective/rendezvous.h"
#include "common/collective/transport_flag.h"
#include "common/collective/store.h"
#include "common/launch/launch_options.h"
#include "common/launch/rendezvous_env.h"
#include "common/base/status.h"

namespace mtb::tp_check {

absl::StatusOr<World> ResolveWorld(const EnvMap& env) {
  ASSIGN_OR_RETURN(const PlannedWorld planned, PlanWorld(env));
  return World{planned.world_size, planned.label};
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
  collective::RendezvousOptions options = RendezvousOptionsFor(rank_env, timeouts);
  options.transport = absl::GetFlag(FLAGS_transport);
  return collective::Rendezvous(options);
}

}  // namespace mtb::tp_check
