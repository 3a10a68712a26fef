// A training run's checkpoints on every rank (docs/checkpoint.md "The
// trainer"): the run id agreed by all ranks, a resumed run's state loaded
// into the strategy, and saves after the steps the plan (plan.h) names, with
// the publish order of docs/checkpoint.md. The strategy says which pieces of the global
// tensors this rank writes and loads (trainer/run/strategy.h, "Checkpoint
// state"); this class turns them into shard files and back.
//
// Collective contract: every rank constructs its Checkpointer from a plan
// made from the same flags and files, and calls Start, Resume, Save,
// SaveAsync and FinishAsync in the same order at the same steps (between
// steps, never with a collective in flight). Not thread-safe: one thread
// (the training loop's) calls it; SaveAsync's background thread is its own.
//
// Async saves (--async_checkpoint). SaveAsync copies this rank's pieces into
// a snapshot buffer at the step boundary (the only time training waits,
// besides waiting for the previous save: one save is in flight at most) and
// hands the rest of the save to a background thread: the same write and
// publish as a synchronous save, with the same fault points and crash
// behaviour, but its exchanges between ranks go through the group's store
// (keys under "checkpoint/step_NNNNNNNN/"), never through the training
// process group, whose collectives the training thread issues meanwhile
// (two threads issuing collectives on one group would interleave them
// differently on different ranks and deadlock).
#ifndef MTB_TRAINER_CHECKPOINT_CHECKPOINTER_H_
#define MTB_TRAINER_CHECKPOINT_CHECKPOINTER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "common/trace/recorder.h"
#include "trainer/checkpoint/checkpoint.pb.h"
#include "trainer/checkpoint/plan.h"
#include "trainer/checkpoint/protocol.h"
#include "trainer/run/strategy.h"
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
  // (CheckRankState). With the plan's hash_on_load, what this rank reads
  // (the tensor ranges holding its pieces, by their range digests, and the
  // state file it checks) is first hashed against the manifest
  // (HashCheckpointReads). Every rank fails together; errors name the
  // rank, the file and the tensor or field.
  absl::Status Resume(Strategy& strategy, const RankState& expected);

  // Resume, with `expected_at(step)` what this run's configuration gives at
  // `step`, and a fallback: with the plan's hash_on_load and --resume=latest
  // (ranks no launcher of ours verified for, which find a rotten byte only
  // when they load), a checkpoint whose bytes fail on any rank (kDataLoss,
  // kNotFound) is skipped on every rank, as our launcher's resolution skips
  // it: each rank plans the newest older READY checkpoint of this run that
  // verifies for structure and plans with this very configuration, the
  // ranks exchange their choices and load it only when all agree (else every
  // rank fails naming both), and so on down. What was skipped and why is in
  // plan().notes (rank 0 logs it); plan() describes the checkpoint loaded.
  // Without such a checkpoint, the first failure and every skip are named.
  absl::Status Resume(Strategy& strategy,
                      const std::function<RankState(int64_t step)>& expected_at);
  // The bytes Resume hashed on this rank (0 without hash_on_load); also
  // the result's CheckpointInfo.load_hashed_bytes.
  int64_t load_hashed_bytes() const { return load_hashed_bytes_; }

  // Called at each checkpoint fault point with its phase
  // (checkpoint_write mid-shard, checkpoint_before_ready,
  // checkpoint_before_latest); --fault= acts there.
  using FaultPoint = checkpoint::FaultPoint;

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

  // Collective (between steps): waits for the save in flight, if any, then
  // copies this rank's pieces (CheckpointPiecesToSave) and `state` into the
  // snapshot and starts the save of step `step` in the background (see the
  // file comment); returns at once with the saves that finished meanwhile
  // (the one waited for), or the error that ended one (every rank gets the
  // same). `fault_point` is called on the background thread. A "checkpoint
  // snapshot" span goes to `trace` (nullptr: none); the background thread
  // records none (the recorder is the training thread's).
  absl::StatusOr<std::vector<CheckpointSave>> SaveAsync(
      int64_t step, const Strategy& strategy, const RankState& state,
      trace::TraceRecorder* trace, FaultPoint fault_point);

  // Collective: waits for the save in flight (none: returns at once) and
  // returns it, or the error that ended it. Call after the last step.
  absl::StatusOr<std::vector<CheckpointSave>> FinishAsync();

  // Test hooks, called on the background thread: `hold_before_write` before
  // a save's first file is written (a test may block it there while
  // training goes on); `after_publish` on rank 0 once `latest` names the
  // new checkpoint.
  using TestHooks = PublishHooks;
  void set_test_hooks(TestHooks hooks) { test_hooks_ = std::move(hooks); }

  // A save still in flight is cancelled (its waits on the store end) and
  // joined; what it left in staging is cleared by the next save of that
  // step, as after a crash.
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

 private:
  struct Shards;
  struct InFlight;
  // What the save protocol (protocol.h, both modes) records and where.
  SaveTarget Target(const std::string& strategy_name) const;
  Exchange ExchangeOverStore(int64_t step) const;
  // One load of the plan's checkpoint with every rank's verdict;
  // `content_failure`: some rank found a byte that is not what the manifest
  // says (kDataLoss) or a file missing (kNotFound).
  absl::Status LoadOnce(Strategy& strategy, const RankState& expected, bool* content_failure);
  // This rank's plan of the newest READY checkpoint of this run older than
  // step `below` that verifies for structure and plans with config_ (none:
  // a plan that is not resuming); what it passed over goes to `skipped`.
  CheckpointPlan PlanFallback(int64_t below, std::vector<std::string>* skipped) const;

  CheckpointPlan plan_;
  TrainConfig config_;
  int rank_;
  int world_size_;
  collective::Communicator* communicator_;
  std::string run_id_;
  TestHooks test_hooks_;
  int64_t load_hashed_bytes_ = 0;
  // Async saves: the snapshot buffer (allocated at the first, reused: its
  // size is the same every save) and the save in flight.
  at::Tensor snapshot_;
  std::unique_ptr<InFlight> in_flight_;
  std::atomic<bool> cancelled_{false};
  // The step of the last async save whose store keys are still there.
  int64_t keys_to_delete_step_ = -1;
};

}  // namespace mtb::checkpoint

#endif  // MTB_TRAINER_CHECKPOINT_CHECKPOINTER_H_
