#include "trainer/model/lr_schedule.h"

#include <cmath>

#include "glog/logging.h"

namespace mtb {

double LearningRateAt(const LrSchedule& schedule, int64_t step) {
  CHECK_GE(step, 1);
  if (step <= schedule.warmup_steps) {
    return schedule.lr * static_cast<double>(step) /
           static_cast<double>(schedule.warmup_steps);
  }
  if (schedule.kind == LrScheduleKind::kConstant) return schedule.lr;
  // Also covers decay_steps <= warmup_steps: the floor right after warm-up.
  if (step >= schedule.decay_steps) return schedule.min_lr;
  const double ratio =
      static_cast<double>(step - schedule.warmup_steps) /
      static_cast<double>(schedule.decay_steps - schedule.warmup_steps);
  return schedule.min_lr + (schedule.lr - schedule.min_lr) * 0.5 *
                               (1.0 + std::cos(M_PI * ratio));
}

LrSchedule LrScheduleOf(const TrainConfig& config) {
  LrSchedule schedule;
  schedule.kind = config.lr_schedule() == TrainConfig::cosine ? LrScheduleKind::kCosine
                                                   : LrScheduleKind::kConstant;
  schedule.lr = config.lr();
  schedule.min_lr = config.min_lr();
  schedule.warmup_steps = config.lr_warmup_steps();
  schedule.decay_steps = config.lr_decay_steps();
  return schedule;
}

}  // namespace mtb
