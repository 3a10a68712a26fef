// A preemption notice: SIGTERM from a scheduler (forwarded by our launcher,
// or sent to every process of the job) means "stop soon". A trainer that
// saves checkpoints treats it as a request to stop cleanly: every rank
// finishes the step it is in, the ranks agree to stop after that step (the
// notice rides on the step's loss and gradient-norm gather, so every rank
// stops after the same step), they save a checkpoint of it and exit
// kExitPreempted (4), which launchers neither restart nor call a failure
// (docs/faults.md, "Preemption"). Without --checkpoint_dir there is nothing
// to save, and SIGTERM ends a rank at once as before.
//
// Note [SIGTERM has two listeners]: the flight recorder dumps on SIGTERM too
// (common/collective/flight_dumps.h), then lets the signal kill the process.
// The notice handler replaces that disposition: it records the notice, asks
// the flight recorder's dumper thread for its dumps
// (RequestFlightRecorderDumps: one write(2)) and lets the process live. So
// install it after the communicator exists (registering its recorder is what
// installs the flight recorder's handler).
#ifndef MTB_TRAINER_PREEMPTION_H_
#define MTB_TRAINER_PREEMPTION_H_

#include "absl/time/time.h"

namespace mtb {

// Installs the process's SIGTERM handler (idempotent); `rank` labels the
// line the handler writes on stderr when the notice comes. A process started
// with SIGTERM ignored (nohup) keeps ignoring it.
void InstallPreemptionHandler(int rank);

// Whether a notice has come, and when the first did (absl::InfinitePast()
// before). Async-signal-safe to set, safe to read from any thread.
bool PreemptionNoticeReceived();
absl::Time PreemptionNoticeTime();

}  // namespace mtb

#endif  // MTB_TRAINER_PREEMPTION_H_
