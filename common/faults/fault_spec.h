// The `--fault=` grammar shared by the trainer, comm_bench and moe_comm
// (SPEC §6, docs/faults.md): faults separated by ';', each KIND:key=value,...
//
//   kill:rank=R,step=S,phase=P      SIGKILL rank R at step S in phase P
//   nan:rank=R,step=S               rank R's loss becomes NaN at step S
//   hang:rank=R,step=S[,phase=P]    rank R stops making progress
//   slow:rank=R,ms=M[,every=K]      rank R sleeps M ms every K-th step (1)
//   exit:rank=R,step=S,code=C       rank R exits with code C at step S
//
// In comm_bench and moe_comm `step` is the sweep point's index and `phase`
// the op's name; each tool says which phases it has.
#ifndef MTB_COMMON_FAULTS_FAULT_SPEC_H_
#define MTB_COMMON_FAULTS_FAULT_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mtb {

enum class FaultKind { kKill, kNan, kHang, kSlow, kExit };

struct Fault {
  FaultKind kind = FaultKind::kKill;
  int rank = 0;
  int64_t step = -1;   // -1: any step (slow)
  std::string phase;   // "": any phase
  int64_t ms = 0;      // slow
  int64_t every = 1;   // slow
  int code = 0;        // exit
};

// The phases a tool can fault in, for messages and validation.
struct FaultGrammar {
  std::vector<std::string> phases;
  // The trainer's default phase when a hang names none.
  std::string default_phase;
};

// The trainer's phases: data, forward, backward, optimizer, checkpoint_write,
// checkpoint_before_ready, checkpoint_before_latest.
FaultGrammar TrainerFaultGrammar();

// Parses `spec` (empty: no faults). kInvalidArgument, one line naming the
// flag and the bad part: "--fault=kill:rank=1,stp=3: 'stp' is not a key of
// kill (rank, step, phase)".
absl::StatusOr<std::vector<Fault>> ParseFaults(absl::string_view spec,
                                               const FaultGrammar& grammar);

// The rules that need the run's size: rank < world_size, 1 <= step <= steps.
absl::Status ValidateFaults(const std::vector<Fault>& faults, int world_size,
                            int64_t steps);

// The fault of `kind` that fires on `rank` at `step` in `phase` (phase ""
// of a fault matches every phase), or nullptr.
const Fault* FindFault(const std::vector<Fault>& faults, FaultKind kind,
                       int rank, int64_t step, absl::string_view phase);

// "kill:rank=1,step=3,phase=backward" (the canonical spelling).
std::string FaultToString(const Fault& fault);

}  // namespace mtb

#endif  // MTB_COMMON_FAULTS_FAULT_SPEC_H_
