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
#ifndef MTB_TRAINER_RUN_PREEMPTION_H_
#define MTB_TRAINER_RUN_PREEMPTION_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace mtb {

// Note [a save that cannot fit]: a notice is a promise to save, and the
// sender's SIGKILL comes after its grace. When the notice comes, the handler
// compares what finishing the step and saving need, twice (for noise) this
// step (at least the last one, or as long as it has run so far) plus the
// last save, with the grace: `kill_grace` (--kill_grace: our launcher's
// least grace; set it to a scheduler's when it sends SIGTERM itself), or
// with our launcher's heartbeat (`launcher_sizes_grace`: it grants twice the
// last step and save the ranks reported, rounded up to a second,
// common/launch/supervisor.cc) the larger of the two. When they do not fit,
// the rank says so ("a save cannot fit in 2s ...: not saving"), announces no
// checkpoint and lets the SIGTERM take its previous course at once (the
// flight recorder dumps, the rank dies of SIGTERM, as without
// --checkpoint_dir) rather than promise a save its SIGKILL would cut short.
// The first step (start-up) and a save not yet timed count only for the time
// they have run. Call before InstallPreemptionHandler; default 5s, false.
void SetPreemptionGrace(absl::Duration kill_grace, bool launcher_sizes_grace);

// Where the rank is (the trainer's phase observer, main thread): a new step
// ends the last one, whose time (from its start to the next's) counts once
// it is not the first this process ran; time in phases named
// "checkpoint..." is the step's save.
void NotePreemptionPhase(int64_t step, absl::string_view phase, absl::Time now = absl::Now());

// Installs the process's SIGTERM handler (idempotent); `rank` labels the
// line the handler writes on stderr when the notice comes. A process started
// with SIGTERM ignored (nohup) keeps ignoring it.
void InstallPreemptionHandler(int rank);

// Whether a notice has come, and when the first did (absl::InfinitePast()
// before). Async-signal-safe to set, safe to read from any thread.
bool PreemptionNoticeReceived();
absl::Time PreemptionNoticeTime();

}  // namespace mtb

#endif  // MTB_TRAINER_RUN_PREEMPTION_H_
