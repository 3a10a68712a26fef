// From "who am I" (RankEnv, torchrun's variables) to "how do I join"
// (collective::RendezvousOptions): the step between LaunchOrBecomeWorker and
// collective::Rendezvous in a worker's main.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<collective::Communicator> comm,
//                    collective::Rendezvous(RendezvousOptionsFor(
//                        launch->rank_env, TimeoutOptionsFromFlags())));
#ifndef MTB_COMMON_LAUNCH_RENDEZVOUS_ENV_H_
#define MTB_COMMON_LAUNCH_RENDEZVOUS_ENV_H_

#include <string>

#include "absl/time/time.h"
#include "common/collective/rendezvous.h"
#include "common/launch/rank_env.h"
#include "common/launch/timeouts.h"

namespace mtb {

// rank, world size and MASTER_ADDR:MASTER_PORT from `rank_env`; is_server
// when this rank must host the store itself (RankEnv::HostsStore: ranks
// started by hand or by another launcher, rank 0); the group name carries the
// restart count ("attempt_<n>/world", as torchrun's per-attempt store
// prefix), so a relaunched group on the launcher's long-lived store never
// reads the previous attempt's keys. Gloo binds as collective::RendezvousOptions
// documents (GLOO_SOCKET_IFNAME, loopback, host name).
// The timeouts are common/launch/timeouts.h's vocabulary. Our launcher's
// extras: the flight recorder dumps to MTB_LOG_DIR (a tool may choose a
// folder when it is empty: beside its result), heartbeats go to
// MTB_HEARTBEAT_FD, and TORCHELASTIC_RUN_ID names the dumps.
collective::RendezvousOptions RendezvousOptionsFor(
    const RankEnv& rank_env, const TimeoutOptions& timeouts);

}  // namespace mtb

#endif  // MTB_COMMON_LAUNCH_RENDEZVOUS_ENV_H_
