// The run components RunTraining wires from its RunHooks
// (trainer/run/run_component.h says what a component is):
//
//   progress     MFU per step, rank 0's progress line with the ETA
//   memory       the counting allocator's peak per step, what the strategy
//                held there (trainer/memory/memory_peak.h), every rank's peak at the
//                end
//   observer     the flight recorder's position at each phase; the steady
//                state after the first step (RunHooks::phase_observer,
//                after_first_step)
//   faults       --fault= injected at each phase (attempt 0 only)
//   tracing      --trace_steps' window: the trainer's spans, ProfilerStep#N
//   checkpoint   resume, saves (sync or async), preemption, corrupt faults
//   history      the restart history's start and step records (on_start,
//                after_step)
//   digest       the last run's parameter digest (and after_last_run)
#ifndef MTB_TRAINER_RUN_COMPONENTS_H_
#define MTB_TRAINER_RUN_COMPONENTS_H_

#include "absl/status/status.h"
#include "trainer/data/data.h"
#include "trainer/run/run_component.h"
#include "trainer/run/trainer.h"

namespace mtb {

// The components of a RunTraining with `hooks`, in the order their hooks run.
RunComponents StandardComponents(const TrainConfig& config,
                                 const RankInfo& rank, const RunHooks& hooks);

// Only --fault= (tests that drive a Trainer without RunTraining).
std::unique_ptr<RunComponent> MakeFaultComponent(std::vector<Fault> faults,
                                                 int rank, int attempt = 0);

// The result's model, strategy and peak FLOP/s, and rank 0's start-up
// lines: before the first step (collective: the peak is summed over ranks).
absl::Status DescribeRun(RunState& state, const DataSource& data);

}  // namespace mtb

#endif  // MTB_TRAINER_RUN_COMPONENTS_H_
