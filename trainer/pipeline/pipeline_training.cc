// The pipelined step (pipeline_training.h has the vocabulary and the
// equality argument). Messages between neighbouring stages are tagged by
// micro-batch: activation j on tag 2j, its gradient on tag 2j + 1; sends are
// posted asynchronously and waited for at the end of the step, receives
// block (the order CheckDeadlockFree accepts as SendSemantics::kBuffered).
#include "trainer/pipeline/pipeline_training.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/flags.h"
#include "common/base/status.h"
#include "common/libtorch/counting_allocator.h"
#include "common/collective/communicator.h"
#include "common/libtorch/torch_status.h"
#include "common/nn/layers.h"
#include "glog/logging.h"
#include "trainer/config.h"
#include "trainer/exact.h"
#include "trainer/metrics.h"
#include "trainer/run/run_report.h"
#include "trainer/strategy/scalars.h"
#include "trainer/strategy.h"
#include "trainer/trainer.h"

namespace mtb::pipeline {
namespace {

int ActivationTag(int micro_batch) { return 2 * micro_batch; }
int GradientTag(int micro_batch) { return 2 * micro_batch + 1; }
// Below the communicator's reserved tags, above any micro-batch's.
constexpr int kTiedEmbeddingTag = 1 << 29;

// Model parameter order (trainer/model.h): wte, wpe, 12 per block, ln_f.
constexpr int kTokenEmbedding = 0;
constexpr int kPositionEmbedding = 1;
constexpr int kPerBlock = 12;

}  // namespace

PipelineStage::PipelineStage(const TrainConfig& config, PipelineOptions options,
                             collective::Communicator* communicator)
    : config_(config),
      options_(std::move(options)),
      communicator_(communicator),
      pipe_(communicator),
      dp_(communicator->world_size() / options_.stages),
      stage_(communicator->rank() / dp_),
      dp_rank_(communicator->rank() % dp_),
      model_(ModelShapeOf(config), config.seed()),
      schedule_(LrScheduleOf(config)) {
  const StageBlocks& blocks = options_.partition[stage_];
  view_.first_block = blocks.first_block;
  view_.end_block = blocks.end_block;
  view_.embed = stage_ == 0;
  view_.head = stage_ == options_.stages - 1;
}

int PipelineStage::OwnerOf(int parameter) const {
  const int count = static_cast<int>(model_.parameters().size());
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
  int64_t elements = 0;
  for (const FlatAdamW::Range& range : owned_ranges_) elements += range.numel;
  return elements;
}

absl::StatusOr<std::unique_ptr<PipelineStage>> PipelineStage::Create(
    const TrainConfig& config, collective::Communicator* communicator) {
  CHECK(communicator != nullptr);
  ASSIGN_OR_RETURN(PipelineOptions options, PipelineOptionsOf(config));
  if (communicator->world_size() % options.stages != 0) {
    return ValidatePipelineWorldSize(config, communicator->world_size());
  }
  std::unique_ptr<PipelineStage> stage(
      new PipelineStage(config, std::move(options), communicator));
  if (stage->dp_ > 1) {
    // Rank = stage * dp + dp_rank. Every rank joins its pipeline, then its
    // data-parallel group: each group's members create it in the same order.
    collective::CommunicatorOptions group;
    group.timeout = communicator->timeout();
    group.keep_records = false;
    if (absl::StrContains(communicator->device_description(), "127.0.0.1")) {
      group.gloo_hostname = "127.0.0.1";
    }
    group.rank = stage->stage_;
    group.world_size = stage->options_.stages;
    ASSIGN_OR_RETURN(stage->pipe_owned_,
                     collective::Communicator::Create(
                         communicator->store().WithPrefix(
                             absl::StrCat("pp_pipeline_", stage->dp_rank_)),
                         group));
    stage->pipe_ = stage->pipe_owned_.get();
    group.rank = stage->dp_rank_;
    group.world_size = stage->dp_;
    ASSIGN_OR_RETURN(stage->data_,
                     collective::Communicator::Create(
                         communicator->store().WithPrefix(
                             absl::StrCat("pp_data_", stage->stage_)),
                         group));
  }
  ParameterStore& store = stage->model_.store();
  store.AttachGradients();
  const int count = static_cast<int>(store.parameters().size());
  const int last = stage->options_.stages - 1;
  for (int i = 0; i < count; ++i) {
    const bool head_copy = i == kTokenEmbedding && stage->stage_ == last;
    if (stage->OwnerOf(i) == stage->stage_ || head_copy) {
      stage->owned_.push_back(i);
    }
  }
  // Flat ranges in layout order, neighbours merged.
  std::vector<FlatAdamW::Range> ranges;
  for (int i : stage->owned_) {
    ranges.push_back({store.offset(i), store.parameters()[i].tensor.numel()});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const FlatAdamW::Range& a, const FlatAdamW::Range& b) {
              return a.offset < b.offset;
            });
  for (const FlatAdamW::Range& range : ranges) {
    if (!stage->owned_ranges_.empty() &&
        stage->owned_ranges_.back().offset + stage->owned_ranges_.back().numel ==
            range.offset) {
      stage->owned_ranges_.back().numel += range.numel;
    } else {
      stage->owned_ranges_.push_back(range);
    }
  }
  stage->optimizer_ = std::make_unique<FlatAdamW>(
      store, stage->owned_ranges_, AdamWOptionsOf(config),
      kOptimizerPieceElements);
  return stage;
}

absl::StatusOr<StepRecord> PipelineStage::Step(int64_t step,
                                               const DataSource& data) {
  const Stopwatch step_watch;
  StepRecord record;
  record.set_step(static_cast<int32_t>(step));
  record.set_lr(LearningRateAt(schedule_, step));
  record.set_timed(step > config_.timing_warmup_steps());
  traffic_ = {};
  ParameterStore& store = model_.store();
  store.ZeroGradients();

  const int m = options_.micro_batches;
  const int last = options_.stages - 1;
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
  auto shape = [&] {
    return std::vector<int64_t>{samples, config_.seq_len(), config_.d_model()};
  };
  for (const Action& action : schedule.actions[stage_]) {
    const int j = action.micro_batch;
    const std::map<std::string, std::string> span_args = {
        {"stage", absl::StrCat(stage_)}, {"micro_batch", absl::StrCat(j)}};
    if (action.phase == Phase::kForward) {
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
      const at::Tensor output = model_.StageForward(
          input, view_, ForwardOptionsOf(config_, step, batch.sample_indices));
      inputs[j] = input;
      if (stage_ == last) {
        outputs[j] = nn::CrossEntropy(output, batch.targets);
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
    Stopwatch watch;
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
      const trace::ScopedSpan span(trace_, "backward", "compute", span_args);
      outputs[j].backward(gradient);
    }
    if (stage_ > 0) {
      const at::Tensor input_gradient = inputs[j].grad().contiguous();
      sends.push_back(
          pipe_->SendAsync(input_gradient, stage_ - 1, GradientTag(j)));
      traffic_.gradient_bytes += input_gradient.numel() * 4;
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

  // pp x dp: the stage's gradient averaged over its data-parallel group
  // (ddp's arithmetic, after backward rather than overlapped with it).
  if (data_ != nullptr) {
    for (const FlatAdamW::Range& range : owned_ranges_) {
      RETURN_IF_ERROR(data_->AllReduce(
          store.flat_gradients().narrow(0, range.offset, range.numel),
          collective::ReduceOp::kAvg));
    }
  }

  // The tied embedding: stage 0 holds the lookup's gradient a, the last stage
  // the head's b; both add the other's (a + b == b + a, bit for bit).
  const Stopwatch sync_watch;
  const std::vector<NamedParameter>& parameters = store.parameters();
  if (options_.stages > 1 && !options_.skip_tied_embedding_sum &&
      (stage_ == 0 || stage_ == last)) {
    const at::Tensor gradient = parameters[kTokenEmbedding].tensor.grad();
    const at::Tensor received = at::empty_like(gradient);
    const int peer = stage_ == 0 ? last : 0;
    collective::CollectiveHandle send =
        pipe_->SendAsync(gradient, peer, kTiedEmbeddingTag);
    RETURN_IF_ERROR(pipe_->Recv(received, peer, kTiedEmbeddingTag));
    RETURN_IF_ERROR(send.Wait());
    at::NoGradGuard no_grad;
    gradient.add_(received);
    traffic_.tied_embedding_bytes += gradient.numel() * 4;
  }

  // One fp64 all-reduce: the loss (the last stage's) and each parameter's
  // gradient norm (its owner's; the token embedding's from stage 0), zeros
  // elsewhere, so the sums are exact. The norm is then summed as GradNorm
  // (trainer/strategy.h) sums it on one rank.
  const int count = static_cast<int>(parameters.size());
  at::Tensor scalars = at::zeros({1 + count}, at::kDouble);
  double* values = scalars.data_ptr<double>();
  if (stage_ == last) {
    double mean = 0;
    for (double loss : losses) mean += loss / static_cast<double>(m);
    values[0] = dp_ == 1 ? mean : mean / static_cast<double>(dp_);
  }
  for (int i : owned_) {
    // After the data-parallel average every replica holds the same norms:
    // the first one's count.
    if (dp_rank_ != 0) break;
    if (i == kTokenEmbedding && stage_ != 0) continue;
    values[1 + i] = parameters[i].tensor.grad().norm().item<double>();
  }
  RETURN_IF_ERROR(communicator_->AllReduce(scalars));
  double sum_of_squares = 0;
  for (int i = 0; i < count; ++i) sum_of_squares += values[1 + i] * values[1 + i];
  const double norm = std::sqrt(sum_of_squares);
  const double loss = values[0];
  record.set_loss(loss);
  record.set_loss_bits(DoubleBits(loss));
  record.set_grad_norm(norm);
  record.set_comm_wait_ms(sync_watch.ElapsedMs());
  if (!std::isfinite(loss) || !std::isfinite(norm)) {
    return MarkDeterministic(absl::AbortedError(absl::StrCat(
        "step ", step, ": the loss (", loss, ") or the gradient norm (", norm,
        ") is not finite; every stage stops before the update")));
  }

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
    at::NoGradGuard no_grad;
    if (gradient_scale != 1) store.flat_gradients().mul_(gradient_scale);
    std::vector<at::Tensor> gradients;
    for (const FlatAdamW::Range& range : owned_ranges_) {
      gradients.push_back(
          store.flat_gradients().narrow(0, range.offset, range.numel));
    }
    optimizer_->Step(record.lr(), gradients);
  }
  record.set_optimizer_ms(optimizer_watch.ElapsedMs());
  // The gradient traffic of the step as the result reports it: the tied
  // embedding's exchange (V x D fp32 each way, on the end stages), next to
  // its closed form; activations are not gradient traffic.
  record.set_grad_bytes_sent(traffic_.tied_embedding_bytes);
  if (options_.stages > 1 && (stage_ == 0 || stage_ == last)) {
    record.set_expected_grad_bytes(parameters[kTokenEmbedding].tensor.numel() *
                                   4);
  }
  const double step_ms = step_watch.ElapsedMs();
  record.set_step_ms(step_ms);
  record.set_tokens_per_second(
      static_cast<double>(dp_ * config_.batch_size() * config_.seq_len()) /
      (step_ms / 1000.0));
  return record;
}

absl::Status PipelineStage::GatherFullParameters() {
  ParameterStore& store = model_.store();
  at::NoGradGuard no_grad;
  const at::Tensor& flat = store.flat_parameters();
  at::Tensor contribution = at::zeros_like(flat);
  const int count = static_cast<int>(store.parameters().size());
  for (int i = 0; i < count; ++i) {
    if (OwnerOf(i) != stage_) continue;
    const int64_t numel = store.parameters()[i].tensor.numel();
    contribution.narrow(0, store.offset(i), numel)
        .copy_(flat.narrow(0, store.offset(i), numel));
  }
  // x + 0 is x: every element comes from its owner alone.
  RETURN_IF_ERROR(pipe_->AllReduce(contribution));
  flat.copy_(contribution);
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> RunPipelineTraining(
    const TrainConfig& config, const RankInfo& rank,
    collective::Communicator* communicator, const DataSource& data,
    const RunHooks& hooks) {
  TrainResult result;
  result.set_schema_version(kTrainResultSchemaVersion);
  *result.mutable_config() = config;
  result.set_config_fingerprint(ConfigFingerprint(config));
  ASSIGN_OR_RETURN(std::unique_ptr<PipelineStage> stage,
                   CallGuarded("creating the pipeline stage", [&] {
                     return PipelineStage::Create(config, communicator);
                   }));
  const GptModel& model = stage->model();
  const int64_t tokens_per_step = static_cast<int64_t>(rank.world_size /
                                                      config.pp()) *
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
  TrainRun* run = result.add_runs();
  run->set_index(0);
  const Stopwatch run_watch;
  for (int64_t step = 1; step <= config.steps(); ++step) {
    const bool traced = hooks.trace != nullptr &&
                        step >= hooks.trace_first_step &&
                        step <= hooks.trace_last_step;
    if (hooks.trace != nullptr) hooks.trace->set_enabled(traced);
    stage->set_trace(traced ? hooks.trace : nullptr);
    const absl::Time step_begin = absl::Now();
    ASSIGN_OR_RETURN(StepRecord record,
                     CallGuarded(absl::StrCat("step ", step),
                                 [&] { return stage->Step(step, data); }));
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
    if (step == 1 && hooks.after_first_step) {
      RETURN_IF_ERROR(hooks.after_first_step());
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
  const int dp = rank.world_size / config.pp();
  const int micro_batches = config.pp_microbatches();
  for (int s = 0; s < config.pp(); ++s) {
    const double* row = &rows[static_cast<size_t>(s) * dp * 6];
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
    RETURN_IF_ERROR(CallGuarded("gathering the stages' parameters",
                                [&] { return stage->GatherFullParameters(); }));
    RETURN_IF_ERROR(hooks.after_last_run(stage->model()));
  }
  return result;
}

}  // namespace mtb::pipeline
