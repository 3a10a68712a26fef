// The `--fault=` grammar shared by the trainer, comm_bench and moe_comm
// (docs/faults.md): faults separated by ';', each KIND:key=value,...
//
//   kill:rank=R,step=S,phase=P      SIGKILL rank R at step S in phase P
//   nan:rank=R,step=S               rank R's loss becomes NaN at step S
//   hang:rank=R,step=S[,phase=P]    rank R stops making progress
//   slow:rank=R,ms=M[,every=K]      rank R sleeps M ms every K-th step (1)
//   exit:rank=R,step=S,code=C       rank R exits with code C at step S
//   corrupt:rank=R,step=S           once the checkpoint of step S is
//                                   published, rank R flips a byte of its
//                                   shard file (trainer only)
//
// In comm_bench and moe_comm `step` is the sweep point's index and `phase`
// the op's name; each tool's FaultGrammar says which phases and kinds it has.
// FaultInjector (fault_injector.h) acts on them.
#ifndef MTB_COMMON_FAULTS_FAULT_SPEC_H_
#define MTB_COMMON_FAULTS_FAULT_SPEC_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace mtb {

// What a rank prints, after "--fault=<the fault>", just before a kill fault
// SIGKILLs it (fault_injector.cc); the launcher recognises it so that it does
// not blame the kernel's OOM killer for a SIGKILL the rank sent itself.
inline constexpr char kKillAnnouncement[] = ": killing this rank";

enum class FaultKind { kKill, kNan, kHang, kSlow, kExit, kCorrupt };

struct Fault {
  FaultKind kind = FaultKind::kKill;
  int rank = 0;
  int64_t step = -1;   // -1: any step (slow)
  std::string phase;   // "": any phase
  int64_t ms = 0;      // slow
  int64_t every = 1;   // slow
  int code = 0;        // exit
};

// What one tool accepts.
struct FaultGrammar {
  // The phases a tool can fault in, for messages and validation.
  std::vector<std::string> phases;
  // The trainer's default phase when a hang names none.
  std::string default_phase;
  // The tool, for messages ("comm_bench").
  std::string tool = "trainer";
  // The kinds the tool acts on (empty: every kind); another kind is refused
  // naming the tool and its note here, if any.
  std::vector<FaultKind> kinds;
  std::map<FaultKind, std::string> kind_notes;
  // What `step` counts, for messages ("step", "sweep point").
  std::string step_name = "step";
};

// The trainer's phases: data, forward, backward, optimizer, checkpoint_write,
// checkpoint_before_ready, checkpoint_before_latest; every kind.
FaultGrammar TrainerFaultGrammar();

// A benchmark's grammar (comm_bench, moe_comm): `phases` are its op names,
// `step_name` what a step is ("sweep point", "configuration"); kill, hang,
// slow and exit (nan has no loss to act on there, corrupt no checkpoint).
FaultGrammar SweepFaultGrammar(std::string tool, std::vector<std::string> phases,
                               std::string step_name);

// Parses `spec` (empty or blank: no faults). kInvalidArgument, one line
// naming the flag and the bad part: "--fault=kill:rank=1,stp=3: 'stp' is not
// a key of kill (rank, step, phase)"; a spec of separators only (";") names
// no fault and is refused too.
absl::StatusOr<std::vector<Fault>> ParseFaults(absl::string_view spec,
                                               const FaultGrammar& grammar);

// The rules that need the run's size: rank < world_size, 1 <= step <= steps.
absl::Status ValidateFaults(const std::vector<Fault>& faults, int world_size,
                            int64_t steps);

// The same for a run whose steps are known before it starts.
struct FaultBounds {
  int world_size = 1;
  int64_t steps = 0;
  // When not empty (one per step, step s at s - 1): the only phase step s
  // has (comm_bench: each sweep point runs one op), so a fault naming
  // another phase at that step would never fire: refused, listing the plan.
  std::vector<std::string> phase_of_step;
  std::string step_name = "step";
  // The run's timeouts (comm_bench, moe_comm: their --first_step_timeout and
  // --collective_timeout): a slow fault is checked against them as the
  // trainer's are (ValidateSlowFaults). Infinite: not checked.
  absl::Duration first_step_timeout = absl::InfiniteDuration();
  absl::Duration collective_timeout = absl::InfiniteDuration();
};
absl::Status ValidateFaults(const std::vector<Fault>& faults,
                            const FaultBounds& bounds);

// A slow fault stays slow, never a hang: one that fires on a step after the
// first (steps s in [1, steps] with s % every == 0) must sleep less than
// --collective_timeout, one that fires on the first step only less than
// --first_step_timeout, or the other ranks' collectives would time out
// waiting for it; one that fires on no step is refused too.
// kInvalidArgument, one line naming the fault and the flag.
// `step_name`: what a step is ("step": the trainer's --steps; "sweep
// point", "configuration": a benchmark's, counted by the run).
absl::Status ValidateSlowFaults(const std::vector<Fault>& faults, int64_t steps,
                                absl::Duration first_step_timeout,
                                absl::Duration collective_timeout,
                                absl::string_view step_name = "step");

// The fault of `kind` that fires on `rank` at `step` in `phase` (phase ""
// of a fault matches every phase), or nullptr.
const Fault* FindFault(const std::vector<Fault>& faults, FaultKind kind,
                       int rank, int64_t step, absl::string_view phase);

// "kill:rank=1,step=3,phase=backward" (the canonical spelling).
std::string FaultToString(const Fault& fault);

}  // namespace mtb

#endif  // MTB_COMMON_FAULTS_FAULT_SPEC_H_
