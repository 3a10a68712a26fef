// A run component: one concern of a training run beside the algorithm
// (checkpointing and preemption, fault injection, tracing, memory
// attribution, restart history, progress lines, the result's figures),
// told of the run's events through a few optional hooks. The loop
// (trainer/run/trainer.h) calls every component's hook at each event, in the
// order the components were added; the step itself never names one.
// docs/design.md "The run loop" lists them.
#ifndef MTB_TRAINER_RUN_RUN_COMPONENT_H_
#define MTB_TRAINER_RUN_RUN_COMPONENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "trainer/run/step_scalars.h"
#include "trainer/run/strategy.h"
#include "trainer/train_result.pb.h"

namespace mtb {

class RunComponents;
class Trainer;

struct RankInfo {
  int rank = 0;
  int world_size = 1;
  // Ranks per tensor-parallel group (trainer/tp/; docs/tp.md): the tp ranks
  // of a group train the same samples, so the data is split over the
  // world_size / tp data-parallel replicas (rank / tp is this one).
  int tp = 1;
  int data_rank() const { return rank / tp; }
  int data_ranks() const { return world_size / tp; }
};

// What the components of one RunTraining share.
struct RunState {
  const TrainConfig* config = nullptr;
  RankInfo rank;
  Strategy* strategy = nullptr;
  TrainResult* result = nullptr;
  Trainer* trainer = nullptr;  // the current run's (one per --repeat)
  int repeat = 0;              // 0-based
  // The step the run continues after: 0, or a resumed checkpoint's.
  int64_t start_step = 0;
  // The checkpoint directory the run resumed from ("": a fresh start).
  std::string resumed_from;
  // Set by a component to end the run after the current step (a
  // preemption); the run's result says why.
  bool stop = false;
  // Every component of the run (a checkpoint save announces its phases).
  RunComponents* components = nullptr;
};

class RunComponent {
 public:
  virtual ~RunComponent() = default;

  // Once, before the first step of the first run (the model exists; a
  // component that resumes sets state.start_step and restores the trainer).
  virtual absl::Status OnRunStart(RunState& state) { return absl::OkStatus(); }
  // Around every step, and the start of each of its phases ("data",
  // "forward", "backward", "optimizer") and a checkpoint save's. Returns
  // true to poison the phase's loss with NaN (fault injection).
  virtual void OnStepBegin(int64_t step) {}
  virtual bool OnPhaseBegin(int64_t step, const char* phase) { return false; }
  // A point where what the strategy holds may change (memory attribution):
  // the loop's and the strategy's (Strategy::set_memory_marks).
  virtual void OnMark(const char* what, int index) {}
  // Values added to the step's one scalar gather, read back from every rank.
  virtual void ContributeScalars(int64_t step, StepScalars& scalars) {}
  virtual void ReadScalars(int64_t step, const StepScalars::Gathered& all) {}
  // What the component adds to a non-finite stop's message at `step` (" (injected by --fault=...)").
  virtual std::string NonFiniteNote(int64_t step) const { return ""; }
  // The step's record before it is returned (memory figures).
  virtual void OnStepEnd(int64_t step, StepRecord& record) {}
  // After step `record.step()` completed, before it joins the result.
  virtual absl::Status AfterStep(RunState& state, StepRecord& record) {
    return absl::OkStatus();
  }
  // After the last step of each run (state.repeat), and once after all.
  virtual absl::Status OnRunEnd(RunState& state) { return absl::OkStatus(); }
  virtual absl::Status OnTrainingEnd(RunState& state) {
    return absl::OkStatus();
  }
};

// The components of a run, each hook called on all of them in order.
class RunComponents : public MemoryMarks {
 public:
  void Add(std::unique_ptr<RunComponent> component) {
    components_.push_back(std::move(component));
  }
  absl::Status RunStart(RunState& state);
  void StepBegin(int64_t step);
  bool PhaseBegin(int64_t step, const char* phase);
  void Mark(const char* what, int index) override;
  void ContributeScalars(int64_t step, StepScalars& scalars);
  void ReadScalars(int64_t step, const StepScalars::Gathered& all);
  std::string NonFiniteNote(int64_t step) const;
  void StepEnd(int64_t step, StepRecord& record);
  absl::Status AfterStep(RunState& state, StepRecord& record);
  absl::Status RunEnd(RunState& state);
  absl::Status TrainingEnd(RunState& state);

 private:
  std::vector<std::unique_ptr<RunComponent>> components_;
};

}  // namespace mtb

#endif  // MTB_TRAINER_RUN_RUN_COMPONENT_H_
