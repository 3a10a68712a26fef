// A training run's checkpoints on every rank (docs/checkpoint.md "The
// trainer"): the run id agreed by all ranks, a resumed run's state loaded
// into the strategy, and saves after the steps the plan (plan.h) names, with
// the publish order of SPEC §5. The strategy says which pieces of the global
// tensors this rank writes and loads (trainer/strategy.h, "Checkpoint
// state"); this class turns them into shard files and back.
//
// Collective contract: every rank constructs its Checkpointer from a plan
// made from the same flags and files, and calls Start, Resume and Save in
// the same order at the same steps (between steps, never with a collective
// in flight). Not thread-safe.
#ifndef MTB_TRAINER_CHECKPOINT_CHECKPOINTER_H_
#define MTB_TRAINER_CHECKPOINT_CHECKPOINTER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "common/trace/recorder.h"
#include "trainer/checkpoint/checkpoint.pb.h"
#include "trainer/checkpoint/plan.h"
#include "trainer/strategy.h"
#include "trainer/train_result.pb.h"

namespace mtb::checkpoint {

class Checkpointer {
 public:
  // `communicator`: this rank's group; nullptr for one rank. `config`: the
  // run's configuration as planned (reconciled with the checkpoint on
  // resume); it goes into every manifest.
  Checkpointer(CheckpointPlan plan, const TrainConfig& config, int rank,
               int world_size, collective::Communicator* communicator);

  // Collective, once, before Resume or Save: every rank takes rank 0's run
  // id (inherited on resume, made by rank 0 for a fresh run) and checks that
  // every rank resumes from the same checkpoint (kFailedPrecondition naming
  // both otherwise).
  absl::Status Start();

  const CheckpointPlan& plan() const { return plan_; }
  const std::string& run_id() const { return run_id_; }
  // The CheckpointInfo for the result (saves are the caller's to add).
  CheckpointInfo Info() const;

  // Collective. Loads the plan's checkpoint into `strategy`: every piece of
  // its CheckpointPiecesToLoad read from whichever shard files hold it, then
  // FinishCheckpointLoad; and checks this rank's recorded RankState against
  // `expected`, what this run's configuration gives at that step
  // (CheckRankState). Every rank fails together; errors name the rank, the
  // file and the tensor or field.
  absl::Status Resume(Strategy& strategy, const RankState& expected);

  // Called at each checkpoint fault point with its phase
  // (checkpoint_write mid-shard, checkpoint_before_ready,
  // checkpoint_before_latest); --fault= acts there.
  using FaultPoint = std::function<void(const char* phase)>;

  // Collective: saves the state after step `step`. Rank 0 clears a staging
  // directory a crashed save left; every rank writes its pieces
  // (CheckpointPiecesToSave) and `state` into staging, fsynced and hashed as
  // written; the reports reach rank 0, which publishes (manifest, READY,
  // rename, `latest`) and prunes this run's checkpoints beyond --keep_last.
  // Every rank returns the same verdict. Spans "checkpoint write" and
  // "checkpoint publish" go to `trace` (nullptr: none).
  absl::StatusOr<CheckpointSave> Save(int64_t step, const Strategy& strategy,
                                      const RankState& state,
                                      trace::TraceRecorder* trace,
                                      const FaultPoint& fault_point);

 private:
  CheckpointPlan plan_;
  TrainConfig config_;
  int rank_;
  int world_size_;
  collective::Communicator* communicator_;
  std::string run_id_;
};

// kFailedPrecondition listing every field of `recorded` (a resumed rank's
// saved state) that differs from `expected` (what this run's configuration
// gives at that step): a resume that is not where it thinks it is.
absl::Status CheckRankState(const RankState& recorded, const RankState& expected);

}  // namespace mtb::checkpoint

#endif  // MTB_TRAINER_CHECKPOINT_CHECKPOINTER_H_
