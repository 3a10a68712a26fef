// How a training step is distributed (SPEC §4 "Strategies"). The loop
// (trainer/trainer.h) owns the model, data and schedule and calls a Strategy
// at fixed points of every step; a strategy adds communication there. This
// issue ships only SingleStrategy (one rank, no communication); ddp, zero1,
// zero2 and fsdp implement the same calls.
//
// Collective contract: on every rank the loop makes the same calls in the same
// order with the same step, so a strategy may issue collectives from any of
// them. The order per optimizer step is:
//
//   for each micro-batch m of K:  BeforeBackward(m, K); loss.backward()
//   AfterBackward()           (gradients complete on every rank after this)
//   GlobalGradNorm()          (the norm of the full gradient, before clipping)
//   ScaleGradients(c)         (clipping, only when the norm exceeds the limit)
//   ReduceScalar(...)         (loss, non-finite flag, slowest step time)
//   OptimizerStep(lr)         (skipped when the step stops on a non-finite
//                              loss or norm: every rank skips it together)
//
// Checkpoint state (sharded optimizer state, bucket layout) will be added here
// when checkpoints exist (SPEC §5).
#ifndef MTB_TRAINER_STRATEGY_H_
#define MTB_TRAINER_STRATEGY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/model.h"
#include "trainer/optimizer.h"

namespace mtb {

enum class ScalarReduction { kSum, kMean, kMax };

class Strategy {
 public:
  virtual ~Strategy() = default;

  virtual std::string name() const = 0;

  // Called once per model (each --repeat run builds a new one), before any
  // step: e.g. broadcast rank 0's parameters, register gradient hooks, shard.
  // `parameters` outlive the strategy's use of them.
  virtual absl::Status Setup(const std::vector<NamedParameter>& parameters,
                             const AdamWOptions& optimizer) = 0;

  // Before micro-batch `micro_batch`'s backward (0-based, of `micro_batches`):
  // where DDP decides whether this backward synchronises (no_sync).
  virtual absl::Status BeforeBackward(int micro_batch, int micro_batches) = 0;

  // After the last micro-batch's backward: gradient reduction goes here.
  virtual absl::Status AfterBackward() = 0;

  // sqrt(sum of squares) of the whole model's gradient (correct when gradients
  // are sharded), in fp64.
  virtual absl::StatusOr<double> GlobalGradNorm() = 0;

  // Multiplies the whole gradient (every shard) by `factor`.
  virtual absl::Status ScaleGradients(double factor) = 0;

  // Reduces one value over ranks (the identity on one rank).
  virtual absl::StatusOr<double> ReduceScalar(double value,
                                              ScalarReduction op) = 0;

  // The AdamW update with learning rate `lr` (sharded strategies update their
  // shard, then gather).
  virtual absl::Status OptimizerStep(double lr) = 0;
};

// One rank, no communication: the reference every other strategy must equal.
class SingleStrategy : public Strategy {
 public:
  std::string name() const override { return "single"; }
  absl::Status Setup(const std::vector<NamedParameter>& parameters,
                     const AdamWOptions& optimizer) override;
  absl::Status BeforeBackward(int micro_batch, int micro_batches) override;
  absl::Status AfterBackward() override;
  absl::StatusOr<double> GlobalGradNorm() override;
  absl::Status ScaleGradients(double factor) override;
  absl::StatusOr<double> ReduceScalar(double value,
                                      ScalarReduction op) override;
  absl::Status OptimizerStep(double lr) override;

 private:
  std::vector<NamedParameter> parameters_;
  std::unique_ptr<AdamW> optimizer_;
};

// The fp64 L2 norm of the gradients of `parameters` (those that have one).
double GradNorm(const std::vector<NamedParameter>& parameters);

}  // namespace mtb

#endif  // MTB_TRAINER_STRATEGY_H_
