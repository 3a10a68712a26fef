// One pipeline rank's training (docs/pipeline.md): its stage of the GPT, the
// schedule's forwards and backwards with activations and their gradients sent
// point-to-point, the tied embedding's gradient summed between the first and
// last stages, the global gradient norm, clipping and AdamW on the stage's
// parameters.
//
// Vocabulary as trainer/pipeline/schedule.h. The world is pp x dp x tp, tp
// innermost, then dp, then pp (Megatron-LM's order): rank r is stage
// r / (dp tp), data-parallel rank (r / tp) % dp, tp rank r % tp. Pipeline
// (d, t) is the stages' ranks with those two coordinates; pipeline d's tp
// ranks take samples [d B, (d+1) B) of the step (DDP's layout) and each
// stage's gradient is reduced over its dp group (the ranks of its (stage,
// tp) coordinate) by --strategy (ddp, zero1 or zero2; fsdp is refused before
// ranks start). With --tp > 1 every stage's parameters are its tp rank's
// parts (trainer/tp/model_split.h, the split tensor parallelism runs), its
// blocks run with their collectives over the stage's tp group, and a
// stage's activation goes to the same tp rank of the next stage (with
// --sequence_parallel: that rank's part of the sequence). A stage *owns* the parameters it
// computes with: its blocks; the token and position embeddings on stage 0;
// the final LayerNorm on the last stage. Every rank builds the whole model
// from the seed (so every stage starts from the same values as one rank);
// the parameters it owns move into a stage store of their own
// (trainer/model/parameter_store.h), over which the strategy runs exactly as it
// runs over a whole model: buckets, shards, AdamW and checkpoint pieces.
//
// The tied embedding. The last stage's head uses the token embedding too but
// does not own it: after its last backward it sends its head gradient b to
// stage 0, which adds it inside its own last backward (a second root,
// sum(wte * b), whose gradient is b exactly), so the strategy's hooks reduce
// a + b; after the update stage 0 sends the new values back to the last
// stage. Bytes per end stage and step: V x D fp32, as a gradient exchange.
//
// Equality with one rank. With --pp_microbatches=1 every stage runs the same
// operations on the same values as one rank's forward and backward, the tied
// embedding's gradient is the same two-term sum (a + b = b + a in IEEE), the
// norm is summed from the same per-parameter norms in the same order (at dp
// 1; with dp > 1 each stage's norm is its strategy's), and AdamW is
// elementwise: the losses, norms and parameters are one rank's bit
// for bit (pipeline_training_test proves it). With m > 1 micro-batches the
// mean of m micro-batch means and the per-micro-batch gradient accumulation
// change the summation order: equal within fp32 rounding.
//
// Collective contract: every rank of the communicator calls Create, each Step
// and GatherFullParameters in the same order.
#ifndef MTB_TRAINER_PIPELINE_PIPELINE_TRAINING_H_
#define MTB_TRAINER_PIPELINE_PIPELINE_TRAINING_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainer/data/data.h"
#include "trainer/model/lr_schedule.h"
#include "trainer/model/model.h"
#include "trainer/model/optimizer.h"
#include "trainer/model/parameter_store.h"
#include "trainer/pipeline/pipeline_config.h"
#include "common/trace/recorder.h"
#include "trainer/run/run_component.h"
#include "trainer/run/strategy.h"
#include "trainer/strategy/sync_fault.h"
#include "trainer/train_result.pb.h"
#include "trainer/run/trainer.h"
#include "trainer/tp/model_split.h"
#include "trainer/tp/options.h"

namespace mtb {
namespace collective {
class Communicator;
class CollectiveHandle;
}  // namespace collective

namespace pipeline {

// What one step moved between stages, counted here (bytes of this rank's
// sends).
struct StageTraffic {
  int64_t activation_bytes = 0;
  int64_t gradient_bytes = 0;
  int64_t tied_embedding_bytes = 0;
};

// What the stage held for activations in one step (train_result.proto's
// PipelineStageMemory): micro-batches in flight always; bytes only when the
// counting allocator is installed (0 otherwise).
struct StageMemory {
  int peak_in_flight = 0;
  int64_t micro_batch_bytes = 0;
  int64_t peak_bytes = 0;
};

class PipelineStage {
 public:
  // `config` valid and pipelined; `communicator` holds pp x dp ranks and
  // outlives the stage. With dp > 1 it creates the pipeline and
  // data-parallel communicators over communicator's store (collective).
  // `sync_fault` (tests only) goes to the strategy of the stage's dp group
  // (dp > 1).
  // `tp_fault` (tests only) goes to the stage's tensor-parallel split
  // (tp > 1).
  static absl::StatusOr<std::unique_ptr<PipelineStage>> Create(
      const TrainConfig& config, collective::Communicator* communicator,
      const SyncTestFault& sync_fault = {},
      tp::TestFault tp_fault = tp::TestFault::kNone);

  // Runs optimizer step `step` (1-based) over the step's batch_size samples
  // of `data`. Collective. kAborted on every rank when the loss or the norm
  // is not finite (decided from the same reduced values), before the update.
  absl::StatusOr<StepRecord> Step(int64_t step, const DataSource& data);

  // Collective: every rank's model then holds every stage's values (each
  // parameter from its owner; the token embedding from stage 0), in its
  // parameters and in model().store().flat_parameters().
  absl::Status GatherFullParameters();
  // Collective: GatherFullParameters, then (tp > 1) every part gathered over
  // the stage's tp group: the logical global tensors, in the model's order,
  // as one rank's model holds them.
  absl::StatusOr<std::vector<NamedParameter>> GlobalParameters();

  // Spans per micro-batch ("forward", "backward" with args stage and
  // micro_batch) and "optimizer" go to `trace` (nullptr: none).
  void set_trace(trace::TraceRecorder* trace) { trace_ = trace; }
  // Asked once per step; the answers ride on the step's scalar all-reduce,
  // so every rank learns after the same step whether any had a notice
  // (stop_agreed).
  void set_stop_notice(std::function<bool()> notice) {
    stop_notice_ = std::move(notice);
  }
  bool stop_agreed() const { return stop_agreed_; }
  // Tests only: checkpoint_state() leaves "optimizer/step" out of the pieces
  // a stage after the first loads (a negative case for exact resumes).
  void set_testonly_resume_without_step(bool on) {
    testonly_resume_without_step_ = on;
  }
  // Told (step, phase) at the start of a step's "data", and of its
  // "forward", "backward" and "optimizer" at the first micro-batch of each
  // (--fault=, the flight recorder's position: run_events.h). True: this
  // rank's contribution to the step's loss becomes NaN (a nan fault), so
  // every rank stops as for any non-finite loss.
  void set_phase_hook(std::function<bool(int64_t, const char*)> hook) {
    phase_hook_ = std::move(hook);
  }

  // The stage's checkpoint state as the Checkpointer (trainer/checkpoint/
  // checkpointer.h) reads it: the global tensors of the parameters this
  // stage owns (its strategy's pieces over the stage's dp group) and, from
  // stage 0 only, AdamW's step count; over all ranks every tensor once, in
  // the format of every other strategy. Its FinishCheckpointLoad (collective)
  // also sends the loaded token embedding to the last stage.
  Strategy& checkpoint_state() { return *checkpoint_state_; }

  const GptModel& model() const { return *model_; }
  int tp_size() const { return tp_; }
  int stage() const { return stage_; }
  const StageView& view() const { return view_; }
  const StageTraffic& last_traffic() const { return traffic_; }
  const StageMemory& last_memory() const { return memory_; }
  // Parameter elements this stage updates.
  int64_t owned_parameters() const;

 private:
  PipelineStage(const TrainConfig& config, PipelineOptions options,
                collective::Communicator* communicator);
  class CheckpointState;
  // The owner of each parameter of model_->parameters().
  int OwnerOf(int parameter) const;
  // Collective over the pipeline: the last stage's token embedding takes
  // stage 0's values.
  absl::Status SendTiedValues();

  TrainConfig config_;
  PipelineOptions options_;
  collective::Communicator* communicator_;  // every rank (pp x dp)
  // This rank's pipeline (ranks d, dp + d, ...: stage s is rank s) and,
  // with dp > 1, its stage's data-parallel group (owned here).
  collective::Communicator* pipe_;
  std::unique_ptr<collective::Communicator> pipe_owned_;
  std::unique_ptr<collective::Communicator> data_;
  // With tp > 1: the stage's tensor-parallel group and the split over it.
  std::unique_ptr<collective::Communicator> tp_group_;
  std::unique_ptr<tp::TensorParallelSplit> split_;
  int64_t tp_bytes_taken_ = 0;  // the tp group's bytes sent at the last step
  int tp_ = 1;
  int dp_ = 1;
  int stage_ = 0;
  int dp_rank_ = 0;
  int tp_rank_ = 0;
  StageView view_;
  std::unique_ptr<GptModel> model_;
  LrSchedule schedule_;
  std::vector<int> owned_;  // model parameter indices this stage updates
  // owned_'s parameters (stage store index k is model index owned_[k]) and
  // the strategy over them: SingleStrategy at dp 1, else --strategy over
  // data_.
  std::unique_ptr<ParameterStore> stage_store_;
  std::unique_ptr<Strategy> strategy_;
  std::unique_ptr<Strategy> checkpoint_state_;
  StageTraffic traffic_;
  StageMemory memory_;
  trace::TraceRecorder* trace_ = nullptr;
  std::function<bool()> stop_notice_;
  bool stop_agreed_ = false;
  std::function<bool(int64_t, const char*)> phase_hook_;
  bool testonly_resume_without_step_ = false;
};

// The pipelined counterpart of RunTraining (trainer/run/trainer.h) for one rank:
// config.steps() steps, a progress line per --log_every on rank 0. Of
// `hooks` it honours `trace` (with its step window: a ProfilerStep#N span per
// step and the stage's spans), `after_first_step` and `after_last_run`, called after
// GatherFullParameters with the full model (with --tp > 1 a whole model
// holding the logical global tensors); `checkpointer`, `stop_notice`,
// `init_parameters` and `metrics_stream`; and through PipelineRunEvents
// (run_events.h) `faults`, `phase_observer`, `on_start` and `after_step`.
// Returns the result (steps, losses, norms) without run_context.
// `testonly_resume_without_step` (tests only): a resume leaves AdamW's step
// count unloaded on the stages after the first, a pipeline checkpoint bug the
// restart tests must catch.
absl::StatusOr<TrainResult> RunPipelineTraining(
    const TrainConfig& config, const RankInfo& rank,
    collective::Communicator* communicator, const DataSource& data,
    const RunHooks& hooks, const SyncTestFault& sync_fault = {},
    tp::TestFault tp_fault = tp::TestFault::kNone,
    bool testonly_resume_without_step = false);

}  // namespace pipeline
}  // namespace mtb

#endif  // MTB_TRAINER_PIPELINE_PIPELINE_TRAINING_H_
