#include "trainer/run/trainer.h"

#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/flags.h"
#include "common/base/status.h"
#include "common/libtorch/torch_status.h"
#include "common/nn/autocast.h"
#include "common/nn/layers.h"
#include "glog/logging.h"
#include "trainer/run/block_spans.h"
#include "trainer/checkpoint/protocol.h"
#include "trainer/config/config.h"
#include "trainer/exact/exact.h"
#include "trainer/output/metrics.h"
#include "trainer/run/components.h"
#include "trainer/run/run_report.h"
#include "trainer/strategy/scalars.h"

namespace mtb {
namespace {

// Points the strategy's memory marks at the run's components and away from
// them on every way out of the step.
class ScopedMemoryMarks {
 public:
  ScopedMemoryMarks(Strategy* strategy, MemoryMarks* marks)
      : strategy_(strategy) {
    strategy_->set_memory_marks(marks);
  }
  ~ScopedMemoryMarks() { strategy_->set_memory_marks(nullptr); }
  ScopedMemoryMarks(const ScopedMemoryMarks&) = delete;
  ScopedMemoryMarks& operator=(const ScopedMemoryMarks&) = delete;

 private:
  Strategy* strategy_;
};

std::vector<std::string> UnitNames(const ParameterStore& store) {
  std::vector<std::string> names;
  for (const ParameterUnit& unit : store.units()) names.push_back(unit.name);
  return names;
}

}  // namespace

AdamWOptions AdamWOptionsOf(const TrainConfig& config) {
  AdamWOptions options;
  options.beta1 = config.beta1();
  options.beta2 = config.beta2();
  options.eps = config.eps();
  options.weight_decay = config.weight_decay();
  return options;
}

ForwardOptions ForwardOptionsOf(const TrainConfig& config, int64_t step,
                                const std::vector<int64_t>& sample_indices) {
  ForwardOptions options;
  options.dropout.p = config.dropout();
  options.dropout.seed = config.seed();
  options.dropout.step = step;
  options.dropout.sample_indices = sample_indices;
  options.activation_checkpointing = config.activation_checkpointing();
  return options;
}

checkpoint::RankState ProgressState(const TrainConfig& config,
                                    const RankInfo& rank, int64_t step) {
  return checkpoint::ProgressStateOf(config, rank.rank, rank.data_ranks(), step);
}

Trainer::Trainer(const TrainConfig& config, const RankInfo& rank,
                 Strategy* strategy, const DataSource* data,
                 RunComponents* components, const ModelSplit* split)
    : config_(config),
      rank_(rank),
      strategy_(strategy),
      data_(data),
      components_(components != nullptr ? components : &none_),
      model_(ModelShapeOf(config), config.seed(), split),
      schedule_(LrScheduleOf(config)) {}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(
    const TrainConfig& config, const RankInfo& rank, Strategy* strategy,
    const DataSource* data, RunComponents* components,
    const ModelSplit* split) {
  CHECK(strategy != nullptr);
  CHECK(data != nullptr);
  CHECK(rank.world_size >= 1 && rank.rank >= 0 && rank.rank < rank.world_size);
  CHECK_EQ(strategy->world_size(), rank.world_size) << strategy->name();
  std::unique_ptr<Trainer> trainer(
      new Trainer(config, rank, strategy, data, components, split));
  RETURN_IF_ERROR(
      strategy->Setup(trainer->model_.store(), AdamWOptionsOf(config)));
  trainer->reduction_ =
      MakeGradientReduction(config, rank, *strategy, trainer->model_.store(),
                            trainer->components_);
  return trainer;
}

void Trainer::RestoreProgress(int64_t completed_steps) {
  CHECK_EQ(completed_steps_, 0) << "RestoreProgress before the first step";
  completed_steps_ = completed_steps;
  first_step_ = completed_steps + 1;
}

int64_t Trainer::tokens_per_step() const {
  return static_cast<int64_t>(rank_.data_ranks()) * config_.grad_accum() *
         config_.batch_size() * config_.seq_len();
}

absl::StatusOr<StepRecord> Trainer::Step() {
  const int64_t step = completed_steps_ + 1;
  StepRecord record;
  record.set_step(static_cast<int32_t>(step));
  record.set_lr(LearningRateAt(schedule_, step));
  // The timing warm-up counts this process's steps (a resumed run warms up
  // again).
  record.set_timed(step - first_step_ >= config_.timing_warmup_steps());
  components_->StepBegin(step);
  const ScopedMemoryMarks marks(strategy_, components_);
  const Stopwatch step_watch;
  const double cpu_at_start = ProcessCpuMs();

  // Forward and backward piece by piece, then the gradient synchronisation
  // (again from the start when the reduction asks for a redo).
  std::vector<double> losses;  // this rank's, piece by piece
  Synchronised synced;
  std::optional<Stopwatch> optimizer_watch;
  do {
    strategy_->ZeroGradients();
    components_->Mark("gradients zeroed", -1);
    reduction_->Begin();
    losses.clear();
    for (const BackwardPiece& piece : reduction_->Pieces()) {
      const Batch batch = GetBatch(step, piece, record);
      // Declared before `loss`, whose graph holds its hooks (ForwardLoss).
      std::optional<BlockSpans> block_spans;
      ASSIGN_OR_RETURN(const at::Tensor loss,
                       ForwardLoss(step, batch, piece.index, &block_spans, record));
      losses.push_back(loss.item<double>());
      RETURN_IF_ERROR(Backward(step, piece, loss, record));
    }
    optimizer_watch.emplace();
    ASSIGN_OR_RETURN(synced, reduction_->Synchronise(step, record));
  } while (synced.redo);

  // Every rank decides from the same gathered values, so all stop together.
  StepScalars scalars;
  scalars.Add("loss", reduction_->LossesToGather(losses));
  scalars.Add("grad_norm", synced.grad_norm);
  components_->ContributeScalars(step, scalars);
  ASSIGN_OR_RETURN(const StepScalars::Gathered all,
                   scalars.Gather(strategy_->communicator()));
  components_->ReadScalars(step, all);
  const double loss = reduction_->StepLoss(all);
  record.set_loss(loss);
  record.set_loss_bits(DoubleBits(loss));
  record.set_grad_norm(synced.grad_norm);
  RETURN_IF_ERROR(CheckFinite(step, all));

  RETURN_IF_ERROR(ClipAndUpdate(step, record));
  RecordFigures(record);
  record.set_optimizer_ms(optimizer_watch->ElapsedMs());
  record.set_cpu_ms(ProcessCpuMs() - cpu_at_start);
  components_->StepEnd(step, record);
  ASSIGN_OR_RETURN(const double slowest_ms,
                   ReduceScalarOverRanks(strategy_->communicator(),
                                         step_watch.ElapsedMs(),
                                         ScalarReduction::kMax, strategy_->name()));
  record.set_step_ms(slowest_ms);
  record.set_tokens_per_second(static_cast<double>(tokens_per_step()) /
                               (slowest_ms / 1000.0));
  ++completed_steps_;
  return record;
}

Batch Trainer::GetBatch(int64_t step, const BackwardPiece& piece,
                        StepRecord& record) const {
  const Stopwatch watch;
  (void)components_->PhaseBegin(step, "data");
  std::optional<trace::ScopedSpan> data_span(std::in_place, trace_, "data",
                                             "data");
  Batch batch = data_->Get(step, piece.first_sample, piece.samples);
  data_span.reset();
  record.set_data_ms(record.data_ms() + watch.ElapsedMs());
  return batch;
}

absl::StatusOr<at::Tensor> Trainer::ForwardLoss(
    int64_t step, const Batch& batch, int index,
    std::optional<BlockSpans>* block_spans, StepRecord& record) {
  const Stopwatch watch;
  // Traced: per-block spans around the strategy's unit hooks
  // (trainer/run/block_spans.h).
  if (trace_ != nullptr) {
    block_spans->emplace(trace_, UnitNames(model_.store()),
                         strategy_->unit_hooks(), index);
  }
  at::Tensor loss;
  const bool poisoned = components_->PhaseBegin(step, "forward");
  components_->Mark("forward of micro-batch", index);
  RETURN_IF_ERROR(CallGuarded("forward", [&] {
    const trace::ScopedSpan span(trace_, "forward", "compute");
    nn::AutocastGuard autocast(config_.precision() == TrainConfig::bf16);
    ForwardOptions options =
        ForwardOptionsOf(config_, step, batch.sample_indices);
    if (*block_spans) {
      options.unit_hooks.push_back(&**block_spans);
    } else if (UnitHooks* hooks = strategy_->unit_hooks()) {
      options.unit_hooks.push_back(hooks);
    }
    const at::Tensor logits = model_.Forward(batch.inputs, options);
    loss = model_.Loss(logits, batch.targets);
    if (poisoned) {
      // A multiplication, so that the gradients are NaN too.
      loss = loss * std::numeric_limits<double>::quiet_NaN();
    }
  }));
  record.set_forward_ms(record.forward_ms() + watch.ElapsedMs());
  return loss;
}

absl::Status Trainer::Backward(int64_t step, const BackwardPiece& piece,
                               const at::Tensor& loss, StepRecord& record) {
  const Stopwatch watch;
  RETURN_IF_ERROR(reduction_->BeforeBackward(piece));
  components_->Mark("backward of micro-batch", piece.index);
  (void)components_->PhaseBegin(step, "backward");
  RETURN_IF_ERROR(CallGuarded("backward", [&] {
    const trace::ScopedSpan span(trace_, "backward", "compute");
    (loss / piece.loss_divisor).backward();
  }));
  reduction_->AfterBackward(piece);
  record.set_backward_ms(record.backward_ms() + watch.ElapsedMs());
  return absl::OkStatus();
}

absl::Status Trainer::CheckFinite(int64_t step,
                                  const StepScalars::Gathered& all) const {
  std::vector<int> loss_ranks;
  std::vector<double> losses;
  bool norm_finite = true;
  double norm = 0;
  for (int r = 0; r < all.ranks(); ++r) {
    const std::vector<double> rank_losses = all.Of(r, "loss");
    double rank_loss = 0;
    for (double value : rank_losses) {
      rank_loss += value / static_cast<double>(rank_losses.size());
    }
    if (!std::isfinite(rank_loss)) {
      loss_ranks.push_back(r);
      losses.push_back(rank_loss);
    }
    if (norm_finite && !std::isfinite(all.One(r, "grad_norm"))) {
      norm_finite = false;
      norm = all.One(r, "grad_norm");
    }
  }
  if (loss_ranks.empty() && norm_finite) return absl::OkStatus();
  // It would only happen again from the same state: the launcher must not
  // restart it (exit kExitDeterministicFailure).
  return MarkDeterministic(absl::AbortedError(
      NonFiniteMessage(step, config_.steps(), loss_ranks, losses, norm_finite,
                       norm, components_->NonFiniteNote(step))));
}

absl::Status Trainer::ClipAndUpdate(int64_t step, StepRecord& record) {
  const double max_norm = config_.max_grad_norm();
  double gradient_scale = 1;
  if (max_norm > 0 && record.grad_norm() > max_norm) {
    // torch.nn.utils.clip_grad_norm_'s coefficient.
    gradient_scale = max_norm / (record.grad_norm() + 1e-6);
    record.set_clipped(true);
  }
  (void)components_->PhaseBegin(step, "optimizer");
  components_->Mark("optimizer step", -1);
  {
    const trace::ScopedSpan span(trace_, "optimizer", "compute");
    RETURN_IF_ERROR(strategy_->OptimizerStep(record.lr(), gradient_scale));
  }
  components_->Mark("optimizer step done", -1);
  return absl::OkStatus();
}

void Trainer::RecordFigures(StepRecord& record) const {
  reduction_->RecordTraffic(strategy_->TakeStepCommunication(), record);
  const HeldMemory held = strategy_->Held();
  record.set_held_parameter_bytes(held.parameters);
  record.set_held_gradient_bytes(held.gradients);
  record.set_held_optimizer_state_bytes(held.optimizer_state);
  record.set_held_collective_bytes(held.collective_temporaries);
}

absl::StatusOr<TrainResult> RunTraining(const TrainConfig& config,
                                        const RankInfo& rank,
                                        Strategy& strategy,
                                        const DataSource& data,
                                        const RunHooks& hooks) {
  TrainResult result;
  result.set_schema_version(kTrainResultSchemaVersion);
  *result.mutable_config() = config;
  result.set_config_fingerprint(ConfigFingerprint(config));
  RunComponents components = StandardComponents(config, rank, hooks);
  RunState state;
  state.config = &config;
  state.rank = rank;
  state.strategy = &strategy;
  state.result = &result;
  state.components = &components;
  for (int repeat = 0; repeat < config.repeat() && !state.stop; ++repeat) {
    ASSIGN_OR_RETURN(
        std::unique_ptr<Trainer> trainer,
        WithMemoryAdvice(CallGuarded("creating the model and optimizer",
                                     [&] {
                                       return Trainer::Create(
                                           config, rank, &strategy, &data,
                                           &components, hooks.model_split);
                                     }),
                         rank, ""));
    state.trainer = trainer.get();
    state.repeat = repeat;
    if (repeat == 0) {
      RETURN_IF_ERROR(DescribeRun(state, data));
      RETURN_IF_ERROR(components.RunStart(state));
    }
    TrainRun* run = result.add_runs();
    run->set_index(repeat);
    const Stopwatch run_watch;
    for (int64_t step = state.start_step + 1;
         step <= config.steps() && !state.stop; ++step) {
      // Anything LibTorch throws inside the step (a failed allocation
      // included) is one line naming the step and the operation, exit 1.
      ASSIGN_OR_RETURN(
          StepRecord record,
          WithMemoryAdvice(CallGuarded(absl::StrCat("step ", step),
                                       [&] { return trainer->Step(); }),
                           rank, absl::StrCat("step ", step, ": ")));
      RETURN_IF_ERROR(components.AfterStep(state, record));
      *run->add_steps() = std::move(record);
    }
    RETURN_IF_ERROR(components.RunEnd(state));
    run->set_wall_seconds(run_watch.ElapsedMs() / 1000.0);
    // A resume that trains nothing has no step to summarise.
    if (run->steps_size() > 0) FinishRun(run, result.model().tokens_per_step());
  }
  RETURN_IF_ERROR(components.TrainingEnd(state));
  *result.mutable_summary() = SummarizeRuns(result);
  if (rank.rank == 0 && result.summary().param_gather_in_flight_ms() > 0) {
    LOG(INFO) << ParameterGatherLine(result);
  }
  return result;
}

}  // namespace mtb
