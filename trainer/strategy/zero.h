// ZeRO stages 1 and 2 (Rajbhandari et al.): every rank holds the
// whole model's parameters, but only its shard of the AdamW state (zero1)
// or of the AdamW state and the gradients (zero2). zero.cc explains the
// mechanism and its vocabulary.
//
// Collective contract: as DdpStrategy (ddp.h): every rank constructs its
// ZeroStrategy over its rank of one Communicator and runs the same loop;
// Setup checks the ranks built the same model and broadcasts rank 0's
// parameters; buckets launch in a fixed order on every rank.
//
// Threading: gradient hooks run on the thread that calls backward(); every
// call must come from that one thread.
#ifndef MTB_TRAINER_STRATEGY_ZERO_H_
#define MTB_TRAINER_STRATEGY_ZERO_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "trainer/run/strategy.h"
#include "trainer/strategy/bucket_engine.h"
#include "trainer/strategy/sync_fault.h"

namespace mtb {

struct ZeroOptions {
  // 1: optimizer state sharded; 2: gradients sharded too.
  int stage = 1;
  // The reduce-scatter and all-gather pieces (buckets): as DdpOptions.
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  int64_t first_bucket_cap_bytes = int64_t{1} << 20;
  GradSync grad_sync = GradSync::kLast;
  // Tests only (sync_fault.h): sum_not_average, bucket_never_synced:B,
  // keep_full_gradients (zero2). kNone everywhere else.
  SyncTestFault testonly_fault;
};

// The options --strategy (zero1 or zero2), --bucket_cap_mb and the resolved
// --grad_sync ask for.
ZeroOptions ZeroOptionsFromConfig(int stage, double bucket_cap_mb,
                                  const std::string& grad_sync);

class ZeroStrategy final : public Strategy {
 public:
  // `communicator`: this rank's membership, or nullptr for one rank (then
  // every shard is the whole bucket and nothing is communicated). Must
  // outlive the strategy.
  ZeroStrategy(collective::Communicator* communicator,
               const ZeroOptions& options);
  ~ZeroStrategy() override;
  ZeroStrategy(const ZeroStrategy&) = delete;
  ZeroStrategy& operator=(const ZeroStrategy&) = delete;

  std::string name() const;
  std::string Describe() const;
  StrategySummary Summary() const override {
    return {name(), Describe(), Buckets()};
  }

  // Collective. kFailedPrecondition when the ranks' parameter lists differ;
  // kInvalidArgument when a test fault names a bucket that does not exist.
  absl::Status Setup(ParameterStore& store,
                     const AdamWOptions& optimizer) override;
  void ZeroGradients() override;
  absl::Status BeforeBackward(int micro_batch, int micro_batches);
  absl::Status BeforeBackward(int piece, int pieces,
                              ReductionMode mode) override {
    return mode == ReductionMode::kExact ? BeforeLocalBackward(piece, pieces)
                                         : BeforeBackward(piece, pieces);
  }
  // Waits for every bucket's reduce-scatter: this rank's gradient shards are
  // complete after it. kFailedPrecondition, naming the parameter, when a
  // parameter got no gradient in a synchronised backward.
  absl::Status AfterBackward();
  absl::Status AfterBackward(ReductionMode mode) override {
    return mode == ReductionMode::kExact ? AfterLocalBackwards()
                                         : AfterBackward();
  }
  StepCommunication TakeStepCommunication() override;
  std::vector<BucketSummary> Buckets() const;
  // Collective: the fp64 sum of squares of this rank's gradient shards,
  // summed over ranks (never a sum of per-shard norms).
  absl::StatusOr<double> GlobalGradNorm() override;
  // Scales this rank's gradient shards (every rank scales its own).
  absl::Status ScaleGradients(double factor);
  // Collective: AdamW on this rank's shard of every bucket, then the updated
  // parameters all-gathered bucket by bucket.
  absl::Status OptimizerStep(double lr, double gradient_scale) override;
  // Gradients: zero1's flat buffer, every shard that is not a view of it,
  // and any .grad tensor alive outside the flat buffer (zero2 between a
  // bucket's backward and its launch, or across no_sync micro-batches).
  // Collective temporaries: staging, reduce-scatter outputs and the
  // communicator's temporaries of collectives in flight. Marks every change
  // (Strategy::set_memory_marks).
  HeldMemory Held() const override;
  // Saves this rank's shard of the parameters and of the AdamW state (rank 0
  // also the step); loads the whole model and its own state shard.
  std::vector<StatePiece> CheckpointPiecesToSave() const;
  std::vector<StatePiece> CheckpointPiecesToLoad();
  std::vector<StatePiece> CheckpointPieces(CheckpointUse use) override {
    return use == CheckpointUse::kSave ? CheckpointPiecesToSave()
                                       : CheckpointPiecesToLoad();
  }
  absl::Status FinishCheckpointLoad() override { return absl::OkStatus(); }
  // Exact mode (strategy.h): a no_sync backward; one int64 reduce-scatter
  // per bucket into this rank's gradient shard.
  absl::Status BeforeLocalBackward(int chunk, int chunks);
  absl::Status AfterLocalBackwards() { return FinishSync(); }
  std::vector<ExactGroup> ExactGroups() override;
  collective::Communicator* communicator() const override {
    return communicator_;
  }

  // This rank's shard elements summed over buckets (its part of the model).
  int64_t shard_numel() const;
  // fp32 bytes of the AdamW state this rank holds.
  int64_t optimizer_state_bytes() const;

 private:
  // A bucket split into world_size shards (sizes differ by at most one
  // element when n does not divide it: the V collectives move exact counts,
  // so there is no padding).
  struct Piece {
    std::vector<int64_t> counts;  // per rank, elements
    int64_t shard_offset = 0;     // this rank's first element in the bucket
    int64_t shard_numel = 0;
    // (shard_numel) this rank's reduced gradient: a view of the flat
    // gradient buffer (zero1 with --grad_sync=last: reduced in place) or a
    // buffer of its own (zero2, or zero1 accumulating over micro-batches).
    at::Tensor grad_shard;
    // zero2: the bucket's gradients, copied out of .grad at launch (which
    // is then freed), alive only while its reduce-scatter is in flight.
    at::Tensor staging;
    // The reduce-scatter's output when this sync adds onto grad_shard.
    at::Tensor incoming;
    collective::CollectiveHandle handle;
    bool in_flight = false;  // handle holds an issued reduce-scatter
    bool finished = true;    // this sync's reduce-scatter has landed
  };

  bool communicating() const;
  // The step's communication figures back to 0 (its first backward).
  void ResetStepFigures();
  bool keeps_full_gradients() const { return options_.stage == 1; }
  void LaunchBucket(int bucket);
  // Bucket `bucket`'s .grad tensors copied into its staging and freed.
  void StageBucket(int bucket);
  // Waits for bucket `bucket`'s reduce-scatter and frees what it held.
  absl::Status FinishBucket(int bucket);
  absl::Status FinishSync();

  collective::Communicator* communicator_;
  ZeroOptions options_;
  ParameterStore* store_ = nullptr;
  std::unique_ptr<FlatAdamW> optimizer_;
  BucketEngine engine_;
  std::vector<Piece> pieces_;  // per bucket
  int fault_bucket_ = -1;      // test fault: never reduce-scattered
  // Test fault keep_full_gradients: every staged .grad, until ZeroGradients.
  std::vector<at::Tensor> fault_kept_gradients_;

  // Per backward / step.
  bool sync_in_flight_ = false;
  absl::Status hook_error_;        // a failure inside backward's hooks
  bool accumulate_ = false;        // this sync adds onto the shards
  bool zero_after_sync_ = false;   // zero1 under every: more micro-batches
  int64_t bytes_at_arm_ = 0;
  int64_t bytes_sent_ = 0;         // this step's reduce-scatters
  int64_t gather_bytes_sent_ = 0;  // this step's all-gathers
  double wait_ms_ = 0;
  int syncs_ = 0;
};

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_ZERO_H_
