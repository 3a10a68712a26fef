// The pipelined step (pipeline_training.h has the vocabulary and the
// equality argument). Messages between neighbouring stages are tagged by
// micro-batch: activation j on tag 2j, its gradient on tag 2j + 1; sends are
// posted asynchronously and waited for at the end of the step, receives
// block (the order CheckDeadlockFree accepts as SendSemantics::kBuffered).
#include "trainer/pipeline/pipeline_training.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/match.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/flags.h"
#include "common/base/status.h"
#include "common/libtorch/counting_allocator.h"
#include "common/collective/communicator.h"
#include "common/libtorch/torch_status.h"
#include "common/nn/layers.h"
#include "glog/logging.h"
#include "trainer/config/config.h"
#include "trainer/exact/exact.h"
#include "trainer/model/init_from.h"
#include "trainer/output/metrics_stream.h"
#include "trainer/output/metrics.h"
#include "trainer/run/run_report.h"
#include "trainer/strategy/scalars.h"
#include "torch/csrc/autograd/autograd.h"
#include "trainer/run/strategy.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpointer.h"
#include "trainer/pipeline/run_events.h"
#include "trainer/strategy/factory.h"
#include "trainer/run/trainer.h"
#include "trainer/tp/bytes.h"
#include "trainer/tp/strategy.h"

namespace mtb::pipeline {
namespace {

int ActivationTag(int micro_batch) { return 2 * micro_batch; }
int GradientTag(int micro_batch) { return 2 * micro_batch + 1; }
// Below the communicator's reserved tags, above any micro-batch's: the last
// stage's head gradient, then stage 0's updated values.
constexpr int kTiedEmbeddingTag = 1 << 29;
constexpr int kTiedValuesTag = kTiedEmbeddingTag + 1;

// Model parameter order (trainer/model/model.h): wte, wpe, 12 per block, ln_f.
constexpr int kTokenEmbedding = 0;
constexpr int kPositionEmbedding = 1;
constexpr int kPerBlock = 12;

}  // namespace

// Forwards to the stage's strategy, but for the checkpoint lists: every
// stage's strategy lists "optimizer/step" (the same count everywhere); only
// stage 0's pieces save it.
class PipelineStage::CheckpointState final : public Strategy {
 public:
  explicit CheckpointState(PipelineStage* stage) : stage_(stage) {}
  StrategySummary Summary() const override {
    return inner().Summary();
  }
  collective::Communicator* communicator() const override {
    return stage_->communicator_;
  }
  absl::Status Setup(ParameterStore&, const AdamWOptions&) override {
    return absl::FailedPreconditionError("set up by the pipeline stage");
  }
  void ZeroGradients() override { inner().ZeroGradients(); }
  absl::Status BeforeBackward(int piece, int pieces,
                              ReductionMode mode) override {
    return inner().BeforeBackward(piece, pieces, mode);
  }
  absl::Status AfterBackward(ReductionMode mode) override {
    return inner().AfterBackward(mode);
  }
  absl::StatusOr<double> GlobalGradNorm() override {
    return inner().GlobalGradNorm();
  }
  absl::Status OptimizerStep(double lr, double gradient_scale) override {
    return inner().OptimizerStep(lr, gradient_scale);
  }
  StepCommunication TakeStepCommunication() override {
    return inner().TakeStepCommunication();
  }
  HeldMemory Held() const override { return inner().Held(); }
  std::vector<StatePiece> CheckpointPieces(CheckpointUse use) override {
    std::vector<StatePiece> pieces = inner().CheckpointPieces(use);
    if (stage_->stage_ != 0 &&
        (use == CheckpointUse::kSave || stage_->testonly_resume_without_step_)) {
      pieces.erase(std::remove_if(pieces.begin(), pieces.end(),
                                  [](const StatePiece& piece) {
                                    return piece.name == "optimizer/step";
                                  }),
                   pieces.end());
    }
    // With tp > 1 the stage's tensors are its tp rank's parts: as pieces of
    // the logical global tensors, as tensor parallelism saves them.
    if (stage_->tp_ > 1) {
      return tp::GlobalPieces(std::move(pieces), use, stage_->tp_rank_,
                              stage_->tp_);
    }
    return pieces;
  }
  absl::Status FinishCheckpointLoad() override {
    RETURN_IF_ERROR(inner().FinishCheckpointLoad());
    return stage_->SendTiedValues();
  }
  std::vector<ExactGroup> ExactGroups() override {
    return inner().ExactGroups();
  }
  absl::Status GatherFullParameters() override {
    return stage_->GatherFullParameters();
  }

 private:
  Strategy& inner() const { return *stage_->strategy_; }
  PipelineStage* stage_;
};

absl::Status PipelineStage::SendTiedValues() {
  const int last = options_.stages - 1;
  const at::Tensor& wte = model_->parameters()[kTokenEmbedding].tensor;
  at::NoGradGuard no_grad;
  if (stage_ == 0) {
    const at::Tensor values = wte.detach();
    RETURN_IF_ERROR(pipe_->SendAsync(values, last, kTiedValuesTag).Wait());
    traffic_.tied_embedding_bytes += values.numel() * 4;
  } else if (stage_ == last) {
    RETURN_IF_ERROR(pipe_->Recv(wte.detach(), 0, kTiedValuesTag));
  }
  return absl::OkStatus();
}

PipelineStage::PipelineStage(const TrainConfig& config, PipelineOptions options,
                             collective::Communicator* communicator)
    : config_(config),
      options_(std::move(options)),
      communicator_(communicator),
      pipe_(communicator),
      tp_(tp::TensorParallelSize(config)),
      dp_(communicator->world_size() / (options_.stages * tp_)),
      stage_(communicator->rank() / (dp_ * tp_)),
      dp_rank_(communicator->rank() / tp_ % dp_),
      tp_rank_(communicator->rank() % tp_),
      schedule_(LrScheduleOf(config)) {
  const StageBlocks& blocks = options_.partition[stage_];
  view_.first_block = blocks.first_block;
  view_.end_block = blocks.end_block;
  view_.embed = stage_ == 0;
  view_.head = stage_ == options_.stages - 1;
}

int PipelineStage::OwnerOf(int parameter) const {
  const int count = static_cast<int>(model_->parameters().size());
  if (parameter == kTokenEmbedding || parameter == kPositionEmbedding) return 0;
  if (parameter >= count - 2) return options_.stages - 1;  // ln_f
  const int64_t block = (parameter - 2) / kPerBlock;
  for (int s = 0; s < options_.stages; ++s) {
    if (block < options_.partition[s].end_block) return s;
  }
  LOG(FATAL) << "parameter " << parameter << " is in no stage";
  return -1;
}

int64_t PipelineStage::owned_parameters() const {
  return stage_store_->flat_parameters().numel();
}

absl::StatusOr<std::unique_ptr<PipelineStage>> PipelineStage::Create(
    const TrainConfig& config, collective::Communicator* communicator,
    const SyncTestFault& sync_fault, tp::TestFault tp_fault) {
  CHECK(communicator != nullptr);
  ASSIGN_OR_RETURN(PipelineOptions options, PipelineOptionsOf(config));
  if (communicator->world_size() % (options.stages *
                                    tp::TensorParallelSize(config)) != 0) {
    return ValidatePipelineWorldSize(config, communicator->world_size());
  }
  std::unique_ptr<PipelineStage> stage(
      new PipelineStage(config, std::move(options), communicator));
  const int dp = stage->dp_;
  const int tp = stage->tp_;
  collective::CommunicatorOptions group;
  group.timeout = communicator->timeout();
  group.keep_records = false;
  if (absl::StrContains(communicator->device_description(), "127.0.0.1")) {
    group.gloo_hostname = "127.0.0.1";
  }
  // Rank = (stage * dp + dp_rank) * tp + tp_rank. Every rank joins its
  // pipeline, then its data-parallel group, then its tensor-parallel group:
  // each group's members create it in the same order. (At tp 1 the names
  // are the pp x dp ones.)
  if (dp * tp > 1) {
    group.rank = stage->stage_;
    group.world_size = stage->options_.stages;
    ASSIGN_OR_RETURN(
        stage->pipe_owned_,
        collective::Communicator::Create(
            communicator->store().WithPrefix(absl::StrCat(
                "pp_pipeline_", stage->dp_rank_ * tp + stage->tp_rank_)),
            group));
    stage->pipe_ = stage->pipe_owned_.get();
  }
  if (dp > 1) {
    group.rank = stage->dp_rank_;
    group.world_size = dp;
    ASSIGN_OR_RETURN(stage->data_,
                     collective::Communicator::Create(
                         communicator->store().WithPrefix(absl::StrCat(
                             "pp_data_", stage->stage_ * tp + stage->tp_rank_)),
                         group));
  }
  if (tp > 1) {
    group.rank = stage->tp_rank_;
    group.world_size = tp;
    ASSIGN_OR_RETURN(stage->tp_group_,
                     collective::Communicator::Create(
                         communicator->store().WithPrefix(absl::StrCat(
                             "pp_tp_", stage->stage_ * dp + stage->dp_rank_)),
                         group));
    stage->split_ = std::make_unique<tp::TensorParallelSplit>(
        stage->tp_group_.get(), config.sequence_parallel(), tp_fault);
  }
  // Every rank builds the whole model (its tp parts) from the seed.
  stage->model_ = std::make_unique<GptModel>(ModelShapeOf(config),
                                             config.seed(), stage->split_.get());
  // The stage store: the owned parameters, in the model's units (the
  // strategy's buckets follow its layout), each tensor rebound to it.
  const ParameterStore& model_store = stage->model_->store();
  const int count = static_cast<int>(model_store.parameters().size());
  std::vector<int> stage_index(count, -1);
  std::vector<NamedParameter> mine;
  for (int i = 0; i < count; ++i) {
    if (stage->OwnerOf(i) != stage->stage_) continue;
    stage_index[i] = static_cast<int>(mine.size());
    stage->owned_.push_back(i);
    mine.push_back(model_store.parameters()[i]);
  }
  std::vector<std::pair<std::string, std::vector<int>>> units;
  for (const ParameterUnit& unit : model_store.units()) {
    std::vector<int> members;
    for (int i : unit.parameters) {
      if (stage_index[i] >= 0) members.push_back(stage_index[i]);
    }
    if (!members.empty()) units.push_back({unit.name, members});
  }
  stage->stage_store_ =
      std::make_unique<ParameterStore>(std::move(mine), units);
  if (stage->data_ != nullptr) {
    ASSIGN_OR_RETURN(stage->strategy_,
                     MakeStrategy(config, stage->data_.get(), sync_fault));
  } else {
    // dp 1: nothing to reduce; the one-rank reference's arithmetic.
    stage->strategy_ = std::make_unique<SingleStrategy>();
  }
  RETURN_IF_ERROR(stage->strategy_->Setup(*stage->stage_store_,
                                          AdamWOptionsOf(config)));
  stage->checkpoint_state_ =
      std::make_unique<CheckpointState>(stage.get());
  return stage;
}

absl::StatusOr<StepRecord> PipelineStage::Step(int64_t step,
                                               const DataSource& data) {
  const Stopwatch step_watch;
  StepRecord record;
  record.set_step(static_cast<int32_t>(step));
  record.set_lr(LearningRateAt(schedule_, step));
  record.set_timed(step > config_.timing_warmup_steps());
  // The phases as a step's (set_phase_hook): each at its first micro-batch.
  bool poisoned = false;
  auto phase = [&](const char* name) {
    if (phase_hook_) poisoned = phase_hook_(step, name) || poisoned;
  };
  phase("data");
  traffic_ = {};
  strategy_->ZeroGradients();

  const int m = options_.micro_batches;
  const int last = options_.stages - 1;
  const bool tied = !options_.skip_tied_embedding_sum;
  const std::vector<NamedParameter>& parameters = model_->parameters();
  const at::Tensor& wte = parameters[kTokenEmbedding].tensor;
  // The last stage's head gradient b accumulates from nothing each step.
  if (stage_ == last) wte.mutable_grad() = at::Tensor();
  const int64_t samples = config_.batch_size() / m;
  const Schedule schedule = MakeSchedule(options_.schedule, options_.stages, m);
  // Per micro-batch: the stage's input (a leaf that receives its gradient,
  // on stages after the first) and output (the loss on the last stage).
  std::vector<at::Tensor> inputs(m), outputs(m);
  std::vector<double> losses(m, 0);
  std::vector<collective::CollectiveHandle> sends;
  // Activation sends by micro-batch: waited for once their gradient arrives
  // (the next stage has received them), so that the output's storage is
  // freed with the rest of the micro-batch's activations.
  std::vector<std::optional<collective::CollectiveHandle>> activation_sends(m);
  // Activations held: micro-batches in flight, and with the counting
  // allocator the bytes above the step's start after each forward.
  memory_ = {};
  const bool counted = CountingCpuAllocatorInstalled();
  const int64_t base_bytes = counted ? CpuMemory().current_bytes : 0;
  int in_flight = 0;
  // The activation between stages: (samples, T, D), each tp rank's own
  // copy; with sequence parallelism its part of the sequence, T / tp.
  const int64_t positions = split_ != nullptr && split_->sequence_parallel()
                                ? config_.seq_len() / tp_
                                : config_.seq_len();
  auto shape = [&] {
    return std::vector<int64_t>{samples, positions, config_.d_model()};
  };
  int backwards = 0;
  for (const Action& action : schedule.actions[stage_]) {
    const int j = action.micro_batch;
    const std::map<std::string, std::string> span_args = {
        {"stage", absl::StrCat(stage_)}, {"micro_batch", absl::StrCat(j)}};
    if (action.phase == Phase::kForward) {
      if (j == 0) phase("forward");
      Stopwatch watch;
      // DDP's layout: data-parallel rank d holds samples [d B, (d+1) B).
      const Batch batch = data.Get(
          step, dp_rank_ * config_.batch_size() + j * samples, samples);
      at::Tensor input = batch.inputs;
      if (stage_ > 0) {
        input = at::empty(shape(), at::kFloat);
        RETURN_IF_ERROR(pipe_->Recv(input, stage_ - 1, ActivationTag(j)));
        input.requires_grad_(true);
      }
      std::optional<trace::ScopedSpan> span(std::in_place, trace_, "forward",
                                            "compute", span_args);
      const at::Tensor output = model_->StageForward(
          input, view_, ForwardOptionsOf(config_, step, batch.sample_indices));
      inputs[j] = input;
      if (stage_ == last) {
        // One rank's cross-entropy; with tp the vocab-parallel one.
        outputs[j] = model_->Loss(output, batch.targets);
        losses[j] = outputs[j].item<double>();
        span.reset();
      } else {
        span.reset();
        outputs[j] = output;
        activation_sends[j] = pipe_->SendAsync(output.detach().contiguous(),
                                              stage_ + 1, ActivationTag(j));
        traffic_.activation_bytes += output.numel() * 4;
      }
      memory_.peak_in_flight = std::max(memory_.peak_in_flight, ++in_flight);
      if (counted) {
        // Input-gradient messages still being sent hold their storage until
        // the step's end: not activations.
        const int64_t held =
            CpuMemory().current_bytes - base_bytes - traffic_.gradient_bytes;
        if (memory_.micro_batch_bytes == 0) memory_.micro_batch_bytes = held;
        memory_.peak_bytes = std::max(memory_.peak_bytes, held);
      }
      record.set_forward_ms(record.forward_ms() + watch.ElapsedMs());
      continue;
    }
    if (backwards == 0) phase("backward");
    Stopwatch watch;
    // The strategy's micro-batch pieces are this stage's backwards in order.
    RETURN_IF_ERROR(
        strategy_->BeforeBackward(backwards, m, ReductionMode::kFloat));
    const bool final_backward = ++backwards == m;
    if (stage_ == last) {
      const trace::ScopedSpan span(trace_, "backward", "compute", span_args);
      // One rank's step divides each piece's mean loss by the pieces.
      (outputs[j] / static_cast<double>(m)).backward();
    } else {
      at::Tensor gradient = at::empty(shape(), at::kFloat);
      RETURN_IF_ERROR(pipe_->Recv(gradient, stage_ + 1, GradientTag(j)));
      if (activation_sends[j].has_value()) {
        RETURN_IF_ERROR(activation_sends[j]->Wait());
        activation_sends[j].reset();
      }
      if (stage_ == 0 && final_backward && tied) {
        // The head's gradient b joins this backward as a second root whose
        // gradient with respect to wte is 1 * b = b exactly: the hooks see
        // a + b (= b + a in IEEE), as one rank's backward sums them.
        at::Tensor head = at::empty_like(wte);
        RETURN_IF_ERROR(pipe_->Recv(head, last, kTiedEmbeddingTag));
        const trace::ScopedSpan span(trace_, "backward", "compute", span_args);
        torch::autograd::backward({outputs[j], (wte * head).sum()},
                                  {gradient, at::ones({}, at::kFloat)});
      } else {
        const trace::ScopedSpan span(trace_, "backward", "compute", span_args);
        outputs[j].backward(gradient);
      }
    }
    if (stage_ > 0) {
      const at::Tensor input_gradient = inputs[j].grad().contiguous();
      sends.push_back(
          pipe_->SendAsync(input_gradient, stage_ - 1, GradientTag(j)));
      traffic_.gradient_bytes += input_gradient.numel() * 4;
    }
    if (stage_ == last && final_backward && tied) {
      const at::Tensor head = wte.grad().contiguous();
      sends.push_back(pipe_->SendAsync(head, 0, kTiedEmbeddingTag));
      traffic_.tied_embedding_bytes += head.numel() * 4;
    }
    // The micro-batch's activations are freed here (1F1B's memory bound).
    outputs[j] = at::Tensor();
    inputs[j] = at::Tensor();
    --in_flight;
    record.set_backward_ms(record.backward_ms() + watch.ElapsedMs());
  }
  for (collective::CollectiveHandle& send : sends) RETURN_IF_ERROR(send.Wait());
  for (std::optional<collective::CollectiveHandle>& send : activation_sends) {
    if (send.has_value()) RETURN_IF_ERROR(send->Wait());
  }
  // The stage's gradient reduced over its data-parallel group (its
  // strategy's buckets; nothing at dp 1).
  const Stopwatch sync_watch;
  RETURN_IF_ERROR(strategy_->AfterBackward(ReductionMode::kFloat));

  // One fp64 all-reduce: the loss (the last stage's tp rank 0's), each
  // parameter's squared gradient norm (its owner's, at dp 1) or each stage's
  // squared norm (its strategy's, with dp > 1, from its first replica),
  // zeros elsewhere. At tp 1 every sum has one non-zero term, so it is
  // exact, and at dp 1 the norm is then summed as GradNorm
  // (trainer/run/strategy.h) sums it on one rank. With tp > 1 a split
  // parameter's entry is the sum of its tp parts' squares and a replicated
  // one is counted on tp rank 0 only (NamedParameter::counted_in_norm, as
  // the strategies' norms count it): every parameter once, across the
  // stages and the tp group.
  const int count = static_cast<int>(parameters.size());
  // Last: how many ranks have a preemption notice.
  at::Tensor scalars =
      at::zeros({1 + count + options_.stages + 1}, at::kDouble);
  double* values = scalars.data_ptr<double>();
  if (stop_notice_ && stop_notice_()) values[1 + count + options_.stages] = 1;
  // A nan fault on any stage: the summed loss is NaN on every rank.
  if (poisoned) values[0] = std::numeric_limits<double>::quiet_NaN();
  if (stage_ == last && tp_rank_ == 0) {
    double mean = 0;
    for (double loss : losses) mean += loss / static_cast<double>(m);
    values[0] = dp_ == 1 ? mean : mean / static_cast<double>(dp_);
  }
  if (dp_ == 1) {
    for (int i : owned_) {
      if (!parameters[i].counted_in_norm) continue;
      const double norm = parameters[i].tensor.grad().norm().item<double>();
      values[1 + i] = norm * norm;
    }
  } else {
    ASSIGN_OR_RETURN(const double stage_norm, strategy_->GlobalGradNorm());
    // Every replica holds it: the first one's counts (each tp rank's
    // parts, summed by the all-reduce).
    if (dp_rank_ == 0) values[1 + count + stage_] = stage_norm * stage_norm;
  }
  RETURN_IF_ERROR(communicator_->AllReduce(scalars));
  double sum_of_squares = 0;
  for (int i = 0; i < count; ++i) sum_of_squares += values[1 + i];
  for (int s = 0; s < options_.stages; ++s) {
    sum_of_squares += values[1 + count + s];
  }
  const double norm = std::sqrt(sum_of_squares);
  const double loss = values[0];
  stop_agreed_ = values[1 + count + options_.stages] > 0;
  record.set_loss(loss);
  record.set_loss_bits(DoubleBits(loss));
  record.set_grad_norm(norm);
  if (!std::isfinite(loss) || !std::isfinite(norm)) {
    return MarkDeterministic(absl::AbortedError(absl::StrCat(
        "step ", step, ": the loss (", loss, ") or the gradient norm (", norm,
        ") is not finite; every stage stops before the update")));
  }

  phase("optimizer");
  const Stopwatch optimizer_watch;
  double gradient_scale = 1;
  const double max_norm = config_.max_grad_norm();
  if (max_norm > 0 && norm > max_norm) {
    // torch.nn.utils.clip_grad_norm_'s coefficient, as Trainer::Step.
    gradient_scale = max_norm / (norm + 1e-6);
    record.set_clipped(true);
  }
  {
    const trace::ScopedSpan span(trace_, "optimizer", "compute");
    RETURN_IF_ERROR(strategy_->OptimizerStep(record.lr(), gradient_scale));
  }
  // The tied embedding's new values, stage 0 to the last stage.
  RETURN_IF_ERROR(SendTiedValues());
  record.set_optimizer_ms(optimizer_watch.ElapsedMs());
  const StepCommunication communication = strategy_->TakeStepCommunication();
  record.set_comm_wait_ms(sync_watch.ElapsedMs() - record.optimizer_ms());
  // The gradient traffic of the step as the result reports it: the tied
  // embedding's exchange (V x D fp32 one way, on each end stage) and the
  // stage's dp reduction, each next to its closed form; activations are not
  // gradient traffic.
  record.set_grad_bytes_sent(traffic_.tied_embedding_bytes +
                             communication.bytes_sent);
  record.set_expected_grad_bytes(communication.expected_bytes);
  if (options_.stages > 1 && tied && (stage_ == 0 || stage_ == last)) {
    record.set_expected_grad_bytes(record.expected_grad_bytes() +
                                   wte.numel() * 4);
  }
  record.set_param_gather_bytes_sent(communication.gather_bytes_sent);
  record.set_expected_param_gather_bytes(communication.expected_gather_bytes);
  if (tp_group_ != nullptr) {
    // The stage's tp group's bytes this step, next to the stage's closed
    // form (trainer/tp/bytes.h).
    const int64_t sent = tp_group_->log().Totals().bytes_sent;
    record.set_tp_bytes_sent(sent - tp_bytes_taken_);
    tp_bytes_taken_ = sent;
    record.set_expected_tp_bytes(tp::ExpectedStageTensorParallelStepBytes(
        config_, view_.end_block - view_.first_block, view_.embed, view_.head,
        m));
  }
  const double step_ms = step_watch.ElapsedMs();
  record.set_step_ms(step_ms);
  record.set_tokens_per_second(
      static_cast<double>(dp_ * config_.batch_size() * config_.seq_len()) /
      (step_ms / 1000.0));
  return record;
}

absl::Status PipelineStage::GatherFullParameters() {
  RETURN_IF_ERROR(strategy_->GatherFullParameters());
  const ParameterStore& store = model_->store();
  at::NoGradGuard no_grad;
  at::Tensor contribution = at::zeros({store.numel()}, at::kFloat);
  const std::vector<NamedParameter>& parameters = store.parameters();
  const int count = static_cast<int>(parameters.size());
  for (int i = 0; i < count; ++i) {
    if (OwnerOf(i) != stage_) continue;
    const at::Tensor& tensor = parameters[i].tensor;
    contribution.narrow(0, store.offset(i), tensor.numel())
        .copy_(tensor.detach().reshape({-1}));
  }
  // x + 0 is x: every element comes from its owner alone.
  RETURN_IF_ERROR(pipe_->AllReduce(contribution));
  // The model's flat memory (the parameters that live there) and each
  // parameter wherever it lives (the stage store's).
  store.flat_parameters().copy_(contribution);
  for (int i = 0; i < count; ++i) {
    const at::Tensor& tensor = parameters[i].tensor;
    tensor.detach().copy_(
        contribution.narrow(0, store.offset(i), tensor.numel())
            .view(tensor.sizes()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<NamedParameter>> PipelineStage::GlobalParameters() {
  RETURN_IF_ERROR(GatherFullParameters());
  if (split_ == nullptr) return model_->parameters();
  return split_->GlobalParameters(model_->parameters());
}

namespace {

// A non-finite stop's message with the nan faults that caused it (payloads
// kept: the exit code reads them).
absl::Status WithNonFiniteNote(const absl::Status& status,
                               const PipelineRunEvents& events, int64_t step) {
  const std::string note = events.NonFiniteNote(step);
  if (status.code() != absl::StatusCode::kAborted || note.empty()) return status;
  absl::Status noted(status.code(), absl::StrCat(status.message(), note));
  status.ForEachPayload(
      [&](absl::string_view url, const absl::Cord& payload) {
        noted.SetPayload(url, payload);
      });
  return noted;
}

}  // namespace

absl::StatusOr<TrainResult> RunPipelineTraining(
    const TrainConfig& config, const RankInfo& rank,
    collective::Communicator* communicator, const DataSource& data,
    const RunHooks& hooks, const SyncTestFault& sync_fault,
    tp::TestFault tp_fault, bool testonly_resume_without_step) {
  TrainResult result;
  result.set_schema_version(kTrainResultSchemaVersion);
  *result.mutable_config() = config;
  result.set_config_fingerprint(ConfigFingerprint(config));
  ASSIGN_OR_RETURN(std::unique_ptr<PipelineStage> stage,
                   CallGuarded("creating the pipeline stage", [&] {
                     return PipelineStage::Create(config, communicator,
                                                  sync_fault, tp_fault);
                   }));
  // --fault=, the flight recorder's position and the restart history
  // (run_events.h), as RunTraining's components.
  PipelineRunEvents events(hooks, rank.rank);
  stage->set_testonly_resume_without_step(testonly_resume_without_step);
  stage->set_phase_hook([&events](int64_t step, const char* phase) {
    return events.Phase(step, phase);
  });
  const GptModel& model = stage->model();
  // pp x tp ranks per data-parallel replica.
  const int model_parallel = config.pp() * stage->tp_size();
  const int64_t tokens_per_step =
      static_cast<int64_t>(rank.world_size / model_parallel) *
      config.batch_size() * config.seq_len();
  ModelInfo* info = result.mutable_model();
  info->set_parameter_count(model.ParameterCount());
  info->set_flops_parameter_count(model.FlopsParameterCount());
  info->set_flops_per_token(model.FlopsPerToken());
  info->set_tokens_per_step(tokens_per_step);
  // --peak_flops, or the GEMMs measured on every rank at once, as other runs
  // (trainer/run/run_report.h): MFU reads 0 without a peak.
  ASSIGN_OR_RETURN(*result.mutable_peak_flops(),
                   JobPeakFlops(config, rank, communicator, "pipeline"));
  const double job_peak = result.peak_flops().job_flops_per_second();
  if (rank.rank == 0) {
    const PipelineOptions options = PipelineOptionsOf(config).value();
    LOG(INFO) << "pipeline: " << options.stages << " stages, "
              << ScheduleKindName(options.schedule) << ", "
              << options.micro_batches << " micro-batch(es) of "
              << config.batch_size() / options.micro_batches
              << " samples; " << DescribePartition(options.partition);
  }
  // --checkpoint_dir: the stage's pieces through the Checkpointer, as
  // RunTraining's checkpoint component does (a resume first, then saves
  // after the plan's steps). The data position counts the pipelines'
  // samples (each pipeline's stages share theirs, as tp's ranks do).
  const RankInfo progress_rank{rank.rank, rank.world_size, model_parallel};
  checkpoint::Checkpointer* checkpointer = hooks.checkpointer;
  int64_t start_step = 0;
  bool resumed = false;
  if (checkpointer != nullptr) {
    RETURN_IF_ERROR(checkpointer->Start());
    const checkpoint::CheckpointPlan& plan = checkpointer->plan();
    double load_ms = 0;
    if (plan.resuming()) {
      resumed = true;
      start_step = plan.start_step;
      const Stopwatch load_watch;
      RETURN_IF_ERROR(CallGuarded("resuming", [&] {
        return checkpointer->Resume(
            stage->checkpoint_state(),
            ProgressState(config, progress_rank, start_step));
      }));
      load_ms = load_watch.ElapsedMs();
      if (rank.rank == 0) {
        LOG(INFO) << "resumed from " << plan.resume_dir << " at step "
                  << start_step
                  << (plan.resume_exact
                          ? std::string(", exact")
                          : absl::StrCat(", not exact: ", plan.inexact_reason));
      }
    }
    *result.mutable_checkpoint() = checkpointer->Info();
    result.mutable_checkpoint()->set_load_ms(load_ms);
  }
  auto save_after = [&](int64_t step, bool forced) -> absl::Status {
    if (checkpointer == nullptr ||
        !(forced || checkpointer->plan().SavesAt(step, config.steps()))) {
      return absl::OkStatus();
    }
    const checkpoint::RankState progress =
        ProgressState(config, progress_rank, step);
    std::vector<CheckpointSave> finished;
    const bool async_save = checkpointer->plan().options.async_save;
    if (async_save) {
      ASSIGN_OR_RETURN(finished, checkpointer->SaveAsync(
                                     step, stage->checkpoint_state(), progress,
                                     nullptr, events.SavePhases(step, true)));
    } else {
      ASSIGN_OR_RETURN(CheckpointSave save,
                       checkpointer->Save(step, stage->checkpoint_state(),
                                          progress, nullptr,
                                          events.SavePhases(step, false)));
      finished.push_back(std::move(save));
    }
    RETURN_IF_ERROR(events.AfterSave(step, *checkpointer, &finished));
    for (CheckpointSave& save : finished) {
      *result.mutable_checkpoint()->add_saves() = std::move(save);
    }
    return absl::OkStatus();
  };
  // --init_from: the imported model written into every stage's pieces
  // (InitializeParameters, trainer/model/init_from.h), unless the run resumed:
  // the checkpoint's model wins.
  if (hooks.init_parameters != nullptr) {
    if (resumed) {
      if (rank.rank == 0) {
        LOG(INFO) << "--init_from: not applied: the run resumed";
      }
    } else {
      RETURN_IF_ERROR(CallGuarded("--init_from", [&] {
        return InitializeParameters(*hooks.init_parameters,
                                    stage->checkpoint_state());
      }));
    }
  }
  if (checkpointer != nullptr && hooks.stop_notice) {
    stage->set_stop_notice(hooks.stop_notice);
  }
  RETURN_IF_ERROR(events.Started(
      resumed ? checkpointer->plan().resume_dir : std::string(), start_step));
  // A resume that trains nothing and saves at once: an offline reshard.
  if (start_step == config.steps() && start_step > 0) {
    RETURN_IF_ERROR(save_after(start_step, false));
  }
  TrainRun* run = result.add_runs();
  run->set_index(0);
  const Stopwatch run_watch;
  for (int64_t step = start_step + 1; step <= config.steps(); ++step) {
    const bool traced = hooks.trace != nullptr &&
                        step >= hooks.trace_first_step &&
                        step <= hooks.trace_last_step;
    if (hooks.trace != nullptr) hooks.trace->set_enabled(traced);
    stage->set_trace(traced ? hooks.trace : nullptr);
    const absl::Time step_begin = absl::Now();
    absl::StatusOr<StepRecord> stepped = CallGuarded(
        absl::StrCat("step ", step), [&] { return stage->Step(step, data); });
    if (!stepped.ok()) return WithNonFiniteNote(stepped.status(), events, step);
    StepRecord record = *std::move(stepped);
    if (job_peak > 0) {
      record.set_mfu(record.tokens_per_second() * info->flops_per_token() /
                     job_peak);
    }
    if (traced) {
      hooks.trace->AddSpan(absl::StrCat("ProfilerStep#", step), "step",
                           trace::kComputeTrack, step_begin, absl::Now(),
                           {{"step", absl::StrCat(step)}});
    }
    if (rank.rank == 0 &&
        (step % config.log_every() == 0 || step == config.steps())) {
      const double eta_seconds = run_watch.ElapsedMs() / 1000.0 /
                                 static_cast<double>(step) *
                                 static_cast<double>(config.steps() - step);
      LOG(INFO) << FormatProgressLine(record, config.steps(), eta_seconds);
    }
    *run->add_steps() = std::move(record);
    if (step == start_step + 1 && hooks.after_first_step) {
      RETURN_IF_ERROR(hooks.after_first_step());
    }
    if (hooks.metrics_stream != nullptr) {
      RETURN_IF_ERROR(hooks.metrics_stream->Append(run->steps(run->steps_size() - 1), 0));
    }
    RETURN_IF_ERROR(events.StepDone(step));
    // A preemption notice on any rank: this step saved, then every rank
    // stops (the caller exits kExitPreempted), as RunTraining does.
    const bool preempted = checkpointer != nullptr && stage->stop_agreed();
    RETURN_IF_ERROR(save_after(step, preempted));
    if (preempted) {
      Preemption* preemption = result.mutable_preemption();
      preemption->set_step(static_cast<int32_t>(step));
      preemption->set_checkpoint(absl::StrCat(
          checkpointer->plan().options.dir, "/", checkpoint::StepDirName(step)));
      if (rank.rank == 0) {
        LOG(WARNING) << "preemption notice: stopped after step " << step
                     << " of " << config.steps() << " with checkpoint "
                     << preemption->checkpoint()
                     << " (resume with --resume=latest)";
      }
      break;
    }
  }
  if (checkpointer != nullptr) {
    ASSIGN_OR_RETURN(std::vector<CheckpointSave> finished,
                     checkpointer->FinishAsync());
    for (CheckpointSave& save : finished) {
      *result.mutable_checkpoint()->add_saves() = std::move(save);
    }
  }
  // Each stage's activations next to the bounds, from its first replica's
  // last step (collective: every rank sends its row).
  const StageMemory& memory = stage->last_memory();
  ASSIGN_OR_RETURN(
      const std::vector<double> rows,
      GatherScalarsOverRanks(
          communicator,
          {static_cast<double>(stage->view().first_block),
           static_cast<double>(stage->view().end_block),
           static_cast<double>(stage->owned_parameters()),
           static_cast<double>(memory.peak_in_flight),
           static_cast<double>(memory.micro_batch_bytes),
           static_cast<double>(memory.peak_bytes)},
          "pipeline"));
  const int dp = rank.world_size / model_parallel;
  const int micro_batches = config.pp_microbatches();
  for (int s = 0; s < config.pp(); ++s) {
    // The stage's first rank: dp rank 0, tp rank 0.
    const double* row =
        &rows[static_cast<size_t>(s) * dp * stage->tp_size() * 6];
    PipelineStageMemory* stage_memory = result.add_pipeline_stages();
    stage_memory->set_stage(s);
    stage_memory->set_first_block(static_cast<int64_t>(row[0]));
    stage_memory->set_end_block(static_cast<int64_t>(row[1]));
    stage_memory->set_owned_parameters(static_cast<int64_t>(row[2]));
    stage_memory->set_peak_in_flight(static_cast<int>(row[3]));
    stage_memory->set_gpipe_bound(micro_batches);
    stage_memory->set_one_f_one_b_bound(std::min(config.pp() - s, micro_batches));
    stage_memory->set_micro_batch_activation_bytes(static_cast<int64_t>(row[4]));
    stage_memory->set_peak_activation_bytes(static_cast<int64_t>(row[5]));
  }
  run->set_wall_seconds(run_watch.ElapsedMs() / 1000.0);
  FinishRun(run, tokens_per_step);
  *result.mutable_summary() = SummarizeRuns(result);
  if (hooks.after_last_run) {
    ASSIGN_OR_RETURN(const std::vector<NamedParameter> global,
                     CallGuarded("gathering the stages' parameters",
                                 [&] { return stage->GlobalParameters(); }));
    if (stage->tp_size() == 1) {
      RETURN_IF_ERROR(hooks.after_last_run(stage->model()));
    } else {
      // The logical model, whole, as one rank's holds it.
      const GptModel whole(ModelShapeOf(config), config.seed());
      at::NoGradGuard no_grad;
      for (size_t i = 0; i < global.size(); ++i) {
        whole.parameters()[i].tensor.detach().copy_(global[i].tensor);
      }
      RETURN_IF_ERROR(hooks.after_last_run(whole));
    }
  }
  return result;
}

}  // namespace mtb::pipeline
