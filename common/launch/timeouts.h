// One timeout vocabulary for every multi-rank tool (torchtitan's pattern:
// generous while ranks start and the first step runs, tight afterwards):
//
//   --connect_timeout      reaching the store and waiting for every peer to
//                          join the group
//   --first_step_timeout   per collective, until the first step (trainer),
//                          sweep point (comm_bench) or check (tp_check)
//                          completes: lazy initialisation and first-touch
//                          costs land there
//   --collective_timeout   per collective afterwards (steady state), set
//                          through Communicator::SetTimeout
//   --wait_progress_every  while waiting for peers, how often a rank prints
//                          who has joined and who is missing; with the
//                          heartbeat, how often the launcher says who waits
//                          for whom in a collective (group, sequence
//                          number, step, phase)
//
// and the launcher's two (common/launch/launch_options.h):
//
//   --heartbeat_timeout    no progress this long while a rank waits in a
//                          collective: the launcher names the rank the group
//                          waits for and tears it down (auto by default,
//                          sized from the job; 0: off); it must end a hang
//                          before --collective_timeout does
//   --kill_grace           SIGTERM -> SIGKILL at a teardown (the ranks dump
//                          their flight recorders in it)
//
// The flags are defined once here; a binary that links this library has
// them. Every tool validates them before any rank starts.
#ifndef MTB_COMMON_LAUNCH_TIMEOUTS_H_
#define MTB_COMMON_LAUNCH_TIMEOUTS_H_

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace mtb {

struct TimeoutOptions {
  absl::Duration connect_timeout = absl::Minutes(5);
  absl::Duration first_step_timeout = absl::Minutes(10);
  absl::Duration collective_timeout = absl::Minutes(5);
  absl::Duration wait_progress_every = absl::Seconds(10);
};

// The four flags' values.
TimeoutOptions TimeoutOptionsFromFlags();

// kInvalidArgument naming the flag, its value and the rule: every value
// positive; --connect_timeout >= 2s (c10d retries the store about once a
// second); --first_step_timeout >= --collective_timeout (the first step is
// the steady state plus start-up).
absl::Status ValidateTimeoutOptions(const TimeoutOptions& options);

// The launcher's --heartbeat_timeout against them: 0 (off), or below
// --collective_timeout, so that in a hang the launcher names the rank the
// others wait for before their collective timeout ends the run with a
// message that cannot (they only know what they wait in).
absl::Status ValidateHeartbeatTimeout(absl::Duration heartbeat_timeout,
                                      const TimeoutOptions& options);

}  // namespace mtb

#endif  // MTB_COMMON_LAUNCH_TIMEOUTS_H_
