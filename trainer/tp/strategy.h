// A data-parallel strategy (ddp, zero1, zero2, fsdp) run over the dp group of
// a rank mesh, seen by the loop as one strategy over the whole world
// (docs/tp.md). The inner strategy works on this rank's tensor-parallel
// parts of the parameters exactly as it works on whole parameters; this
// wrapper adds what tensor parallelism changes:
//
//   communicator()     the world's: the step's scalars (loss, norm, stop
//                      notices) are agreed by every rank
//   GlobalGradNorm()   the inner norm (over the dp group, replicated
//                      parameters counted on tp rank 0 only:
//                      NamedParameter::counted_in_norm) squared, summed over
//                      the tp group
//   CheckpointPieces   the inner pieces of local parts mapped to the logical
//                      global tensors (trainer/tp/layout.h); a replicated
//                      tensor and the optimizer step are saved by tp rank 0
//                      only, loaded by all
//
// Everything else is the inner strategy's.
#ifndef MTB_TRAINER_TP_STRATEGY_H_
#define MTB_TRAINER_TP_STRATEGY_H_

#include <memory>
#include <vector>

#include "common/collective/mesh.h"
#include "trainer/run/strategy.h"

namespace mtb::tp {

class TensorParallelStrategy : public Strategy {
 public:
  // `inner` runs over mesh->dp(); `mesh` is not owned and outlives this.
  // `expected_tp_bytes`: the closed form of a step's tp bytes.
  TensorParallelStrategy(std::unique_ptr<Strategy> inner,
                         collective::RankMesh* mesh,
                         int64_t expected_tp_bytes);

  StrategySummary Summary() const override;
  collective::Communicator* communicator() const override {
    return mesh_->world();
  }
  absl::Status Setup(ParameterStore& store,
                     const AdamWOptions& optimizer) override;
  void ZeroGradients() override { inner_->ZeroGradients(); }
  absl::Status BeforeBackward(int piece, int pieces,
                              ReductionMode mode) override;
  absl::Status AfterBackward(ReductionMode mode) override;
  absl::StatusOr<double> GlobalGradNorm() override;
  absl::Status OptimizerStep(double lr, double gradient_scale) override;
  // The inner strategy's figures, plus the bytes sent on the tp group since
  // the last call and their closed form (trainer/tp/bytes.h).
  StepCommunication TakeStepCommunication() override;
  HeldMemory Held() const override { return inner_->Held(); }
  std::vector<StatePiece> CheckpointPieces(CheckpointUse use) override;
  absl::Status FinishCheckpointLoad() override {
    return inner_->FinishCheckpointLoad();
  }
  UnitHooks* unit_hooks() override { return inner_->unit_hooks(); }
  std::vector<ExactGroup> ExactGroups() override {
    return inner_->ExactGroups();
  }
  absl::Status GatherFullParameters() override {
    return inner_->GatherFullParameters();
  }

  Strategy& inner() { return *inner_; }

 private:
  std::unique_ptr<Strategy> inner_;
  collective::RankMesh* mesh_;
  ParameterStore* store_ = nullptr;
  int64_t expected_tp_bytes_ = 0;
  int64_t tp_bytes_taken_ = 0;  // the tp group's bytes sent at the last take
};

// Checkpoint pieces of this rank's tp parts (`local`, as a strategy over
// them lists them) as pieces of the logical global tensors: a split tensor's
// local elements become runs of the global one (trainer/tp/layout.h); a
// replicated tensor and the optimizer step are kept for kSave on tp rank 0
// only, for kLoad on every rank. `rank` of `n`: this rank in its tp group.
// What TensorParallelStrategy and the pipeline's stages (pp x tp) save.
std::vector<StatePiece> GlobalPieces(std::vector<StatePiece> local,
                                     CheckpointUse use, int rank, int n);

// The global tensors of `parameters` (this rank's parts) gathered over the
// tp group, in the same order: what a one-rank model holds. Collective over
// `tp`.
absl::StatusOr<std::vector<NamedParameter>> GatherGlobalParameters(
    const std::vector<NamedParameter>& parameters,
    collective::Communicator& tp);

}  // namespace mtb::tp

#endif  // MTB_TRAINER_TP_STRATEGY_H_
