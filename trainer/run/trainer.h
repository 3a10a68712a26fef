// The training loop: per optimizer step, this rank's pieces of the global
// batch (K micro-batches, or exact mode's chunks) forward and backward, the
// gradient synchronisation (trainer/run/gradient_reduction.h), the global
// gradient norm, the non-finite stop, clipping and AdamW, all timed; around
// it the run components (trainer/run/run_component.h). docs/design.md "The
// step" walks through it.
//
// Global batch layout. A step's global batch holds world_size * K * B samples
// (B = --batch_size, K = --grad_accum). Micro-batch m of rank r is samples
//   [(m * world_size + r) * B, (m * world_size + r + 1) * B)
// so one rank with batch world_size * B sees, micro-batch by micro-batch,
// exactly what world_size ranks with batch B see together; and K x B on one
// rank covers the same samples as one micro-batch of K * B. Data and dropout
// masks are keyed by those global indices (trainer/data/data.h,
// common/nn/dropout.h), so none of these layouts changes a number beyond
// floating-point summation order. Each micro-batch's mean loss is divided by K
// before backward; the strategy averages over ranks.
#ifndef MTB_TRAINER_RUN_TRAINER_H_
#define MTB_TRAINER_RUN_TRAINER_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/hf/gpt2_tensors.h"
#include "trainer/data/data.h"
#include "trainer/model/lr_schedule.h"
#include "trainer/model/model.h"
#include "trainer/run/gradient_reduction.h"
#include "trainer/run/run_component.h"
#include "trainer/run/strategy.h"
#include "common/faults/fault_spec.h"
#include "common/trace/recorder.h"
#include "trainer/checkpoint/checkpoint.pb.h"
#include "trainer/train_result.pb.h"

namespace mtb {
namespace checkpoint {
class Checkpointer;
}  // namespace checkpoint
class BlockSpans;

AdamWOptions AdamWOptionsOf(const TrainConfig& config);

// The forward options for `step` (1-based) on rows with these global indices.
ForwardOptions ForwardOptionsOf(const TrainConfig& config, int64_t step,
                                const std::vector<int64_t>& sample_indices);

// Where `rank` is after `step` steps of `config`, as its checkpoint records
// it and a resume checks it: the step, micro-batches and global tokens done,
// the data position (global samples consumed: step s draws samples
// 0..global_batch-1 keyed by (seed, s, sample), so the next sample is
// step * global_batch), the seed and the next step whose data and dropout
// keys come (step + 1), and the learning rate of the last step. Our
// randomness is counter-based, so these numbers are the whole RNG state.
checkpoint::RankState ProgressState(const TrainConfig& config,
                                    const RankInfo& rank, int64_t step);

// One run from scratch: a freshly initialised model trained step by step.
// Not thread-safe; one Trainer per rank (thread or process).
class Trainer {
 public:
  // `config` must be resolved and valid (trainer/config/config.h). `strategy`,
  // `data` and `components` (nullptr: none) must outlive the Trainer. Calls
  // strategy->Setup.
  // `split` (nullptr: the whole model on this rank) builds this rank's
  // tensor-parallel part of the model (trainer/tp/model_split.h); it must
  // outlive the Trainer.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(
      const TrainConfig& config, const RankInfo& rank, Strategy* strategy,
      const DataSource* data, RunComponents* components = nullptr,
      const ModelSplit* split = nullptr);

  // Runs optimizer step completed_steps() + 1. kAborted, naming the step and
  // the rank(s) whose loss is not finite, when the loss or the gradient norm
  // is not finite on any rank: every rank decides from the same gathered
  // values, so all skip the optimizer update of the same step and their
  // parameters stay as before it. Other errors come from the strategy.
  // Collective (every rank calls it).
  absl::StatusOr<StepRecord> Step();

  int64_t completed_steps() const { return completed_steps_; }
  // A resumed run: the model and optimizer hold the state after
  // `completed_steps` (loaded by the caller); the next Step() is the one
  // after it, and the timing warm-up counts from here (this process's
  // steps). Before the first Step().
  void RestoreProgress(int64_t completed_steps);
  // Phase spans (data, forward, backward, optimizer) and per-block spans go
  // to `trace` (nullptr: none; the default). The tracing component sets it
  // for the steps of --trace_steps' window.
  void set_trace(trace::TraceRecorder* trace) { trace_ = trace; }
  const GptModel& model() const { return model_; }
  // Global tokens per optimizer step.
  int64_t tokens_per_step() const;

 private:
  Trainer(const TrainConfig& config, const RankInfo& rank, Strategy* strategy,
          const DataSource* data, RunComponents* components,
          const ModelSplit* split);
  // The piece's samples of `step`, timed into record.data_ms.
  Batch GetBatch(int64_t step, const BackwardPiece& piece,
                 StepRecord& record) const;
  // The loss of `batch` (piece `index` of `step`): the forward through the
  // strategy's unit hooks, traced per block into `block_spans` when tracing
  // (the caller keeps it until after the backward: the loss's graph holds
  // its hooks); NaN when a component poisons the forward (a nan fault).
  absl::StatusOr<at::Tensor> ForwardLoss(int64_t step, const Batch& batch,
                                         int index,
                                         std::optional<BlockSpans>* block_spans,
                                         StepRecord& record);
  absl::Status Backward(int64_t step, const BackwardPiece& piece,
                        const at::Tensor& loss, StepRecord& record);
  // kAborted (deterministic) when a rank's loss or the norm is not finite.
  absl::Status CheckFinite(int64_t step, const StepScalars::Gathered& all) const;
  // Clipping (torch.nn.utils.clip_grad_norm_'s coefficient), then AdamW.
  absl::Status ClipAndUpdate(int64_t step, StepRecord& record);
  // What the strategy holds now and the step's traffic, into `record`.
  void RecordFigures(StepRecord& record) const;

  TrainConfig config_;
  RankInfo rank_;
  Strategy* strategy_;
  const DataSource* data_;
  RunComponents none_;  // when the caller gives none
  RunComponents* components_;
  GptModel model_;
  LrSchedule schedule_;
  std::unique_ptr<GradientReduction> reduction_;
  int64_t completed_steps_ = 0;
  int64_t first_step_ = 1;  // the first step this process runs
  trace::TraceRecorder* trace_ = nullptr;
};

class MetricsStream;

// What RunTraining's standard components (trainer/run/components.h) are
// built from.
struct RunHooks {
  // Called on every rank once, after the first step of the first run has
  // completed (no collective in flight); an error fails the run.
  std::function<absl::Status()> after_first_step;
  // Called on every rank with the final model of the last run (e.g. to dump
  // its parameters); an error fails the run.
  std::function<absl::Status(const GptModel&)> after_last_run;
  // --trace_dir: spans of the steps in [trace_first_step, trace_last_step]
  // (ProfilerStep#N and its phases) go here; nullptr: no tracing.
  trace::TraceRecorder* trace = nullptr;
  int64_t trace_first_step = 1;
  int64_t trace_last_step = std::numeric_limits<int64_t>::max();
  // --fault=, validated against the world size and steps; they act on
  // attempt 0 only (the launcher's restart count).
  std::vector<Fault> faults;
  int attempt = 0;
  // Told (step, phase) at the start of every phase of every step and
  // checkpoint save, before any fault acts there (the flight recorder's
  // position: heartbeats and dumps say where a rank is). Empty: nobody.
  std::function<void(int64_t, absl::string_view)> phase_observer;
  // --checkpoint_dir: resumes before the first step when its plan says so
  // and saves after the steps it names (nullptr: no checkpoints), in the
  // background with --async_checkpoint (the last save is waited for before
  // RunTraining returns). A resume whose --steps is its step trains nothing
  // and saves at once when the plan saves. Must be the same kind of object
  // on every rank (collective).
  checkpoint::Checkpointer* checkpointer = nullptr;
  // A preemption notice (trainer/run/preemption.h), asked once per step and
  // gathered with the step's scalars. With a checkpointer, a notice ends the
  // run after the step the ranks agree on, with a checkpoint of it and the
  // result's `preemption` set (the caller exits kExitPreempted).
  std::function<bool()> stop_notice;
  // Called on every rank once before the first step, with the checkpoint
  // directory the run resumed from and its step ("" and 0: a fresh start),
  // and after every completed step (before its checkpoint, if any, is
  // saved: a step whose save fails was still trained).
  // An error fails the run.
  std::function<absl::Status(const std::string&, int64_t)> on_start;
  std::function<absl::Status(int64_t)> after_step;
  // --init_from: the model every rank writes into its strategy before the
  // first step unless the run resumes from a checkpoint (InitFromComponent,
  // trainer/model/init_from.h); nullptr: the seeded initialisation. Must outlive
  // RunTraining.
  const hf::OurParameters* init_parameters = nullptr;
  // --metrics_jsonl: rank 0's stream, a line after every step
  // (MetricsStreamComponent, trainer/output/metrics_stream.h); nullptr: none.
  MetricsStream* metrics_stream = nullptr;
  // --tp > 1: this rank's split of the model (trainer/tp/model_split.h);
  // nullptr: the whole model. Must outlive RunTraining.
  const ModelSplit* model_split = nullptr;
};

// Runs config.repeat() runs of config.steps() steps each (with a
// checkpointer that resumes at step k: steps k+1..config.steps()), logging a progress
// line every config.log_every() steps (and the last), and returns the result
// without run_context (the caller's, who knows argv). Also measures the peak
// FLOP/s for MFU (unless config.peak_flops() is set) and gathers every rank's
// peak memory (counted only when the counting allocator is installed:
// common/libtorch/counting_allocator.h). Collective: every rank must call it; rank 0's
// result is the one to write.
absl::StatusOr<TrainResult> RunTraining(const TrainConfig& config,
                                        const RankInfo& rank,
                                        Strategy& strategy,
                                        const DataSource& data,
                                        const RunHooks& hooks = {});

}  // namespace mtb

#endif  // MTB_TRAINER_RUN_TRAINER_H_
