// The history of a job the launcher restarts (--max_restarts), as rank 0 of
// the final attempt puts it in its result (TrainResult.restarts,
// docs/faults.md "Restarts"). Two witnesses, each telling what it alone
// knows:
//   - the launcher: how each earlier attempt ended ("rank 1 (pid 77) was
//     killed by SIGKILL ..."), through the rank environment
//     (MTB_RESTART_HISTORY, RankEnv::earlier_attempts);
//   - rank 0 of each attempt: where it resumed from, what it found in the
//     checkpoint directory, and the last step it completed, in the job's
//     store, which outlives every attempt (our launcher's, or torchrun's
//     agent store), under "trainer/attempt_<a>/":
//       start  AttemptRecord JSON: resumed_from, resumed_step, tree_at_start
//       step   the last completed step, rewritten after every step
// A rank that dies mid-step leaves the last step it completed; the steps
// lost are those the next attempt trains again.
#ifndef MTB_TRAINER_RUN_RESTART_HISTORY_H_
#define MTB_TRAINER_RUN_RESTART_HISTORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/collective/store.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// One attempt's records in the job's store. Rank 0 only. Not thread-safe.
class AttemptLog {
 public:
  // `store`: the job's store without any group prefix.
  AttemptLog(collective::Store store, int attempt);

  // Once, before the attempt's first step: where it starts (`record`'s
  // resumed_from, resumed_step and tree_at_start).
  absl::Status RecordStart(const AttemptRecord& record);
  // After every completed step.
  absl::Status RecordStep(int64_t step);

  // Attempts 0 .. this one from the store (an attempt that recorded nothing
  // has resumed_known false and last_completed_step -1); `earlier_ended`
  // (the launcher's lines) names how each earlier one ended. This attempt's
  // last_completed_step is `last_completed_step`.
  absl::StatusOr<RestartHistory> History(const std::vector<std::string>& earlier_ended,
                                         int max_restarts, int64_t last_completed_step);

 private:
  collective::Store store_;
  int attempt_;
};

// Fills each attempt's steps_lost (its last completed step minus the next
// attempt's resumed step, when both are known; never below 0), the total and
// the counts. `attempts` is attempt 0 first.
RestartHistory AssembleHistory(std::vector<AttemptRecord> attempts, int max_restarts);

// "restart 1 of 1: attempt 0 (fresh start, reached step 4) ended: rank 1
// (pid 77) was killed by SIGKILL ...; 1 completed step lost; resumed from
// .../step_00000002" — one line per earlier attempt, for the log.
std::vector<std::string> DescribeHistory(const RestartHistory& history);

}  // namespace mtb

#endif  // MTB_TRAINER_RUN_RESTART_HISTORY_H_
