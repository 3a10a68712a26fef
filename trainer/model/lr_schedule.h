// Learning-rate schedules, as a pure function of the optimizer step.
#ifndef MTB_TRAINER_MODEL_LR_SCHEDULE_H_
#define MTB_TRAINER_MODEL_LR_SCHEDULE_H_

#include <cstdint>

#include "trainer/train_result.pb.h"

namespace mtb {

enum class LrScheduleKind { kConstant, kCosine };

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  double lr = 1e-3;
  double min_lr = 0;
  int64_t warmup_steps = 0;
  // Cosine: the step at which the rate reaches min_lr. At or below
  // warmup_steps, the rate drops to min_lr right after warm-up.
  int64_t decay_steps = 0;
};

// The rate for optimizer step `step` (1-based):
//   step <= warmup_steps:   lr * step / warmup_steps          (linear warm-up)
//   constant:               lr
//   cosine, step >= decay:  min_lr
//   cosine, otherwise:      min_lr + (lr - min_lr) * (1 + cos(pi * r)) / 2,
//                           r = (step - warmup) / (decay - warmup)
double LearningRateAt(const LrSchedule& schedule, int64_t step);

// The schedule --lr_schedule, --lr, --min_lr, --lr_warmup_steps and
// --lr_decay_steps give (after ResolveConfig).
LrSchedule LrScheduleOf(const TrainConfig& config);

}  // namespace mtb

#endif  // MTB_TRAINER_MODEL_LR_SCHEDULE_H_
