// What a pipelined run (RunPipelineTraining, pipeline_training.h) does at the
// events RunTraining's components handle (trainer/run/components.h), for the
// hooks that concern faults and restarts: the flight recorder's position and
// --fault= at the start of every phase of a step and of a checkpoint save,
// corrupt faults once a save is published, and the restart history's start
// and step records. docs/pipeline.md "Faults and restarts".
#ifndef MTB_TRAINER_PIPELINE_RUN_EVENTS_H_
#define MTB_TRAINER_PIPELINE_RUN_EVENTS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/faults/fault_injector.h"
#include "trainer/checkpoint/checkpointer.h"
#include "trainer/run/trainer.h"

namespace mtb::pipeline {

class PipelineRunEvents {
 public:
  // `hooks` outlives this.
  PipelineRunEvents(const RunHooks& hooks, int rank);

  // The start of `phase` of `step` (a step's "data", "forward", "backward",
  // "optimizer": each at its first micro-batch; a save's phases): the
  // observer is told, then this rank's fault there acts (kill, exit and hang
  // do not return). True when a nan fault fires: the caller poisons the
  // step's loss.
  bool Phase(int64_t step, const char* phase);
  // A checkpoint save's phase callback for `step` (an async save's runs on
  // its own thread, with an injector of its own).
  std::function<void(const char*)> SavePhases(int64_t step, bool async_save);
  // After step `step`'s save was asked for: this rank's corrupt fault of
  // that step (the save waited for, into `finished`) flips a byte of its
  // shard file.
  absl::Status AfterSave(int64_t step, checkpoint::Checkpointer& checkpointer,
                         std::vector<CheckpointSave>* finished);
  // " (injected by --fault=...)" for the nan faults of `step` (any rank's:
  // rank 0 gives the job's verdict), on the first attempt.
  std::string NonFiniteNote(int64_t step) const;
  // RunHooks::on_start and after_step, when set.
  absl::Status Started(const std::string& resumed_from, int64_t start_step);
  absl::Status StepDone(int64_t step);

 private:
  const RunHooks& hooks_;
  const int rank_;
  FaultInjector injector_;
  std::shared_ptr<FaultInjector> background_;
};

}  // namespace mtb::pipeline

#endif  // MTB_TRAINER_PIPELINE_RUN_EVENTS_H_
