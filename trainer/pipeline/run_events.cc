#include "trainer/pipeline/run_events.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "glog/logging.h"
#include "trainer/checkpoint/checkpoint.h"

namespace mtb::pipeline {

PipelineRunEvents::PipelineRunEvents(const RunHooks& hooks, int rank)
    : hooks_(hooks),
      rank_(rank),
      injector_(hooks.faults, rank, hooks.attempt),
      background_(std::make_shared<FaultInjector>(hooks.faults, rank,
                                                  hooks.attempt)) {}

bool PipelineRunEvents::Phase(int64_t step, const char* phase) {
  if (hooks_.phase_observer) hooks_.phase_observer(step, phase);
  return injector_.At(step, phase);
}

std::function<void(const char*)> PipelineRunEvents::SavePhases(
    int64_t step, bool async_save) {
  if (async_save) {
    return [injector = background_, step](const char* phase) {
      injector->At(step, phase);
    };
  }
  return [this, step](const char* phase) { (void)Phase(step, phase); };
}

absl::Status PipelineRunEvents::AfterSave(
    int64_t step, checkpoint::Checkpointer& checkpointer,
    std::vector<CheckpointSave>* finished) {
  const Fault* corrupt = injector_.Corruption(step);
  if (corrupt == nullptr) return absl::OkStatus();
  // It acts on the published checkpoint: an async save is waited for.
  ASSIGN_OR_RETURN(std::vector<CheckpointSave> waited, checkpointer.FinishAsync());
  for (CheckpointSave& save : waited) finished->push_back(std::move(save));
  ASSIGN_OR_RETURN(
      const std::string file,
      checkpoint::CorruptShardFile(
          absl::StrCat(checkpointer.plan().options.dir, "/",
                       checkpoint::StepDirName(step)),
          rank_));
  LOG(ERROR) << "--fault=" << FaultToString(*corrupt) << ": flipped a byte of "
             << file;
  return absl::OkStatus();
}

// Any rank's, as the normal loop's note: the verdict is rank 0's.
std::string PipelineRunEvents::NonFiniteNote(int64_t step) const {
  if (hooks_.attempt > 0) return "";
  std::string note;
  for (const Fault& fault : hooks_.faults) {
    if (fault.kind == FaultKind::kNan && fault.step == step) {
      absl::StrAppend(&note, " (injected by --fault=", FaultToString(fault), ")");
    }
  }
  return note;
}

absl::Status PipelineRunEvents::Started(const std::string& resumed_from,
                                        int64_t start_step) {
  if (!hooks_.on_start) return absl::OkStatus();
  return hooks_.on_start(resumed_from, start_step);
}

absl::Status PipelineRunEvents::StepDone(int64_t step) {
  if (!hooks_.after_step) return absl::OkStatus();
  return hooks_.after_step(step);
}

}  // namespace mtb::pipeline
