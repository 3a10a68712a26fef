// How a step's gradient is computed piece by piece and reduced over ranks
// (--reduction). The step asks for this rank's pieces of the global batch,
// runs forward and backward on each, telling the reduction before and after
// every backward, and then has it synchronise; it never knows which mode
// runs:
//
//   float  the pieces are the --grad_accum micro-batches; the strategy's
//          collectives average fp32 gradients (Strategy::BeforeBackward and
//          AfterBackward, its hooks in between); the norm is the strategy's.
//   exact  the pieces are --exact_chunk chunks; each chunk's gradient goes
//          onto an int64 grid (trainer/exact/exact.h), which the strategy's
//          reduction pieces (Strategy::ExactGroups) sum over its
//          communicator; an overflow of the grid asks for the step's pieces
//          again on a coarser grid. The same bits on any layout.
#ifndef MTB_TRAINER_RUN_GRADIENT_REDUCTION_H_
#define MTB_TRAINER_RUN_GRADIENT_REDUCTION_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/run/run_component.h"
#include "trainer/run/step_scalars.h"
#include "trainer/model/parameter_store.h"
#include "trainer/run/strategy.h"
#include "trainer/train_result.pb.h"

namespace mtb {

// The first global sample index of micro-batch `micro_batch` on `rank`
// (the global batch layout in trainer/run/trainer.h).
int64_t FirstSampleOf(int micro_batch, const RankInfo& rank,
                      int64_t batch_size);

// One forward and backward of the step: `samples` global samples from
// `first_sample`; the loss is divided by `loss_divisor` before backward.
struct BackwardPiece {
  int index = 0;  // 0-based, of the step's pieces on this rank
  int64_t first_sample = 0;
  int64_t samples = 0;
  double loss_divisor = 1;
};

struct Synchronised {
  bool redo = false;    // run the step's pieces again (nothing reduced)
  double grad_norm = 0;  // of the whole reduced gradient; NaN: not finite
};

class GradientReduction {
 public:
  virtual ~GradientReduction() = default;
  // This rank's pieces of the step, in order.
  virtual const std::vector<BackwardPiece>& Pieces() const = 0;
  // After the gradients are zeroed, before the first piece (again on a redo).
  virtual void Begin() {}
  virtual absl::Status BeforeBackward(const BackwardPiece& piece) = 0;
  virtual void AfterBackward(const BackwardPiece& piece) {}
  // Collective: after the last piece. The reduced gradient is in place (or
  // its shard) and its norm returned; or redo.
  virtual absl::StatusOr<Synchronised> Synchronise(int64_t step,
                                                   StepRecord& record) = 0;
  // This rank's losses for the step's gather (float: the mean of its
  // pieces; exact: every chunk's), and the step's loss from every rank's.
  virtual std::vector<double> LossesToGather(
      const std::vector<double>& piece_losses) const = 0;
  virtual double StepLoss(const StepScalars::Gathered& all) const = 0;
  // The step's gradient traffic into `record` (float: the strategy's).
  virtual void RecordTraffic(const StepCommunication& strategy_figures,
                             StepRecord& record) const;
};

// The reduction config.reduction() names, for this rank; `marks` (may be
// nullptr) is told where the reduction changes what the strategy holds.
std::unique_ptr<GradientReduction> MakeGradientReduction(
    const TrainConfig& config, const RankInfo& rank, Strategy& strategy,
    const ParameterStore& store, MemoryMarks* marks);

}  // namespace mtb

#endif  // MTB_TRAINER_RUN_GRADIENT_REDUCTION_H_
