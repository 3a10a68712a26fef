// DDP: every rank holds the whole model and optimizer; gradients
// are averaged over ranks by bucketed all-reduces launched during backward,
// as soon as each bucket's gradients are complete, so communication overlaps
// the rest of backward. ddp.cc explains the mechanism and why it is ours and
// not c10d::Reducer.
//
// Collective contract: every rank constructs its DdpStrategy over its own
// rank of one Communicator and runs the same loop (trainer/run/strategy.h); Setup
// checks that every rank built the same parameters and broadcasts rank 0's.
// Buckets are launched in a fixed order (bucket 0 first), the same on every
// rank, whatever order their gradients become ready in.
//
// Threading: gradient hooks run on the thread that calls backward() (LibTorch
// runs a CPU graph on the calling thread); all calls must come from that one
// thread. Not thread-safe otherwise.
#ifndef MTB_TRAINER_STRATEGY_DDP_H_
#define MTB_TRAINER_STRATEGY_DDP_H_

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

struct DdpOptions {
  // Limits of the second and later buckets, and of the first (PyTorch's
  // bucket_cap_mb and dist._DEFAULT_FIRST_BUCKET_BYTES).
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  int64_t first_bucket_cap_bytes = int64_t{1} << 20;
  GradSync grad_sync = GradSync::kLast;
  // false: every bucket is launched after backward (--ddp_overlap=false).
  bool overlap = true;
  SyncTestFault testonly_fault;  // tests only: kNone everywhere else
};

class DdpStrategy final : public Strategy {
 public:
  // `communicator`: this rank's membership, or nullptr for one rank (the same
  // buckets and hooks, no communication; also when its world size is 1).
  // Must outlive the strategy.
  DdpStrategy(collective::Communicator* communicator, const DdpOptions& options);
  ~DdpStrategy() override;
  DdpStrategy(const DdpStrategy&) = delete;
  DdpStrategy& operator=(const DdpStrategy&) = delete;

  std::string name() const { return "ddp"; }
  std::string Describe() const;
  StrategySummary Summary() const override {
    return {name(), Describe(), Buckets()};
  }

  // Collective. Fails with kFailedPrecondition, naming the first rank that
  // differs, when the ranks' parameter lists (count, names, shapes) disagree;
  // kInvalidArgument when a test fault names a bucket or parameter that does
  // not exist.
  absl::Status Setup(ParameterStore& store,
                     const AdamWOptions& optimizer) override;
  void ZeroGradients() override;
  absl::Status BeforeBackward(int micro_batch, int micro_batches);
  absl::Status BeforeBackward(int piece, int pieces,
                              ReductionMode mode) override {
    return mode == ReductionMode::kExact ? BeforeLocalBackward(piece, pieces)
                                         : BeforeBackward(piece, pieces);
  }
  // Waits for every bucket (the time blocked is the step's wait_ms); the
  // buckets are slices of the flat gradient buffer, reduced in place, so
  // nothing is copied back. kFailedPrecondition, naming the parameter, when
  // a parameter got no gradient in a synchronised backward.
  absl::Status AfterBackward();
  absl::Status AfterBackward(ReductionMode mode) override {
    return mode == ReductionMode::kExact ? AfterLocalBackwards()
                                         : AfterBackward();
  }
  StepCommunication TakeStepCommunication() override;
  std::vector<BucketSummary> Buckets() const;
  // Local: after AfterBackward every rank holds the same averaged gradients.
  absl::StatusOr<double> GlobalGradNorm() override;
  absl::Status ScaleGradients(double factor);
  absl::Status OptimizerStep(double lr, double gradient_scale) override;
  HeldMemory Held() const override;
  // Replicated state, written once: rank r saves the parameters and AdamW
  // state of its even slice r of the flat layout (EvenSlice; rank 0 also the
  // step), so every rank writes ~1/n of the bytes, in parallel. Every rank
  // loads everything.
  std::vector<StatePiece> CheckpointPiecesToSave() const;
  std::vector<StatePiece> CheckpointPiecesToLoad();
  std::vector<StatePiece> CheckpointPieces(CheckpointUse use) override {
    return use == CheckpointUse::kSave ? CheckpointPiecesToSave()
                                       : CheckpointPiecesToLoad();
  }
  absl::Status FinishCheckpointLoad() override { return absl::OkStatus(); }
  // Exact mode (strategy.h): a no_sync backward; one int64 all-reduce per
  // bucket into the flat gradient.
  absl::Status BeforeLocalBackward(int chunk, int chunks);
  absl::Status AfterLocalBackwards() { return FinishSync(); }
  std::vector<ExactGroup> ExactGroups() override;
  collective::Communicator* communicator() const override {
    return communicator_;
  }

  // fp32 bytes of every gradient (what one synchronisation all-reduces).
  int64_t gradient_bytes() const { return gradient_bytes_; }

 private:
  bool communicating() const;
  // Turns options_.testonly_fault into fault_bucket_ / fault_parameter_.
  absl::Status ResolveTestFault();
  // The engine's launch: bucket `bucket`'s all-reduce, in place.
  void LaunchBucket(int bucket);
  absl::Status FinishSync();

  collective::Communicator* communicator_;
  DdpOptions options_;
  ParameterStore* store_ = nullptr;
  std::unique_ptr<FlatAdamW> optimizer_;
  BucketEngine engine_;
  std::vector<collective::CollectiveHandle> handles_;  // per bucket
  int64_t gradient_bytes_ = 0;
  int fault_bucket_ = -1;     // test fault: the bucket never synchronised
  int fault_parameter_ = -1;  // test fault: the parameter left unreduced
  at::Tensor fault_local_gradient_;  // its local gradient, restored after

  // Per backward / step.
  bool sync_in_flight_ = false;
  int64_t bytes_at_arm_ = 0;  // the layer's total when the sync began
  int64_t bytes_sent_ = 0;    // this step's bucket all-reduces
  double wait_ms_ = 0;
  int syncs_ = 0;
};

// The options --bucket_cap_mb and --grad_sync ask for.
DdpOptions DdpOptionsFromConfig(double bucket_cap_mb,
                                const std::string& grad_sync);

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_DDP_H_
