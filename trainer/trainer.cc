#include "trainer/trainer.h"

#include <cmath>
#include <limits>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/nn/autocast.h"
#include "common/report.h"
#include "common/nn/layers.h"
#include "common/status.h"
#include "common/torch_status.h"
#include "glog/logging.h"
#include "google/protobuf/text_format.h"
#include "trainer/config.h"
#include "trainer/metrics.h"

namespace mtb {

int64_t FirstSampleOf(int micro_batch, const RankInfo& rank,
                      int64_t batch_size) {
  return (static_cast<int64_t>(micro_batch) * rank.world_size + rank.rank) *
         batch_size;
}

ModelShape ModelShapeOf(const TrainConfig& config) {
  ModelShape shape;
  shape.vocab_size = config.vocab_size();
  shape.d_model = config.d_model();
  shape.n_layers = config.n_layers();
  shape.n_heads = config.n_heads();
  shape.seq_len = config.seq_len();
  return shape;
}

LrSchedule LrScheduleOf(const TrainConfig& config) {
  LrSchedule schedule;
  schedule.kind = config.lr_schedule() == "cosine" ? LrScheduleKind::kCosine
                                                   : LrScheduleKind::kConstant;
  schedule.lr = config.lr();
  schedule.min_lr = config.min_lr();
  schedule.warmup_steps = config.lr_warmup_steps();
  schedule.decay_steps = config.lr_decay_steps();
  return schedule;
}

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

Trainer::Trainer(const TrainConfig& config, const RankInfo& rank,
                 Strategy* strategy, const DataSource* data)
    : config_(config),
      rank_(rank),
      strategy_(strategy),
      data_(data),
      model_(ModelShapeOf(config), config.seed()),
      schedule_(LrScheduleOf(config)) {}

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(
    const TrainConfig& config, const RankInfo& rank, Strategy* strategy,
    const DataSource* data) {
  CHECK(strategy != nullptr);
  CHECK(data != nullptr);
  CHECK(rank.world_size >= 1 && rank.rank >= 0 && rank.rank < rank.world_size);
  RETURN_IF_ERROR(ValidateConfig(config));
  std::unique_ptr<Trainer> trainer(
      new Trainer(config, rank, strategy, data));
  RETURN_IF_ERROR(
      strategy->Setup(trainer->model_.parameters(), AdamWOptionsOf(config)));
  return trainer;
}

int64_t Trainer::tokens_per_step() const {
  return static_cast<int64_t>(rank_.world_size) * config_.grad_accum() *
         config_.batch_size() * config_.seq_len();
}

absl::StatusOr<StepRecord> Trainer::Step() {
  const int64_t step = completed_steps_ + 1;
  const int micro_batches = config_.grad_accum();
  const bool bf16 = config_.precision() == "bf16";
  StepRecord record;
  record.set_step(static_cast<int32_t>(step));
  record.set_lr(LearningRateAt(schedule_, step));
  record.set_timed(step > config_.timing_warmup_steps());
  const Stopwatch step_watch;

  for (const NamedParameter& p : model_.parameters()) {
    p.tensor.mutable_grad() = at::Tensor();  // like zero_grad(set_to_none)
  }
  double local_loss = 0;  // mean over this rank's micro-batches
  for (int micro = 0; micro < micro_batches; ++micro) {
    Stopwatch watch;
    const Batch batch =
        data_->Get(step, FirstSampleOf(micro, rank_, config_.batch_size()),
                   config_.batch_size());
    record.set_data_ms(record.data_ms() + watch.ElapsedMs());

    watch = Stopwatch();
    at::Tensor loss;
    RETURN_IF_ERROR(CallGuarded("forward", [&] {
      nn::AutocastGuard autocast(bf16);
      const at::Tensor logits = model_.Forward(
          batch.inputs, ForwardOptionsOf(config_, step, batch.sample_indices));
      loss = nn::CrossEntropy(logits, batch.targets);
      if (step == config_.inject_nan_step()) {
        // A multiplication, so that the gradients are NaN too.
        loss = loss * std::numeric_limits<double>::quiet_NaN();
      }
    }));
    local_loss += loss.item<double>() / micro_batches;
    record.set_forward_ms(record.forward_ms() + watch.ElapsedMs());

    watch = Stopwatch();
    RETURN_IF_ERROR(strategy_->BeforeBackward(micro, micro_batches));
    RETURN_IF_ERROR(CallGuarded("backward", [&] {
      (loss / static_cast<double>(micro_batches)).backward();
    }));
    record.set_backward_ms(record.backward_ms() + watch.ElapsedMs());
  }

  const Stopwatch optimizer_watch;
  RETURN_IF_ERROR(strategy_->AfterBackward());
  ASSIGN_OR_RETURN(const double grad_norm, strategy_->GlobalGradNorm());
  ASSIGN_OR_RETURN(const double loss,
                   strategy_->ReduceScalar(local_loss, ScalarReduction::kMean));
  ASSIGN_OR_RETURN(
      const double any_non_finite,
      strategy_->ReduceScalar(
          std::isfinite(local_loss) && std::isfinite(grad_norm) ? 0.0 : 1.0,
          ScalarReduction::kMax));
  record.set_loss(loss);
  record.set_grad_norm(grad_norm);
  if (any_non_finite != 0) {
    // NaN's sign is noise ("-nan"): print every NaN as "nan".
    auto format = [](double value) {
      return std::isnan(value) ? std::string("nan")
                               : absl::StrFormat("%g", value);
    };
    std::string cause = absl::StrFormat(
        "step %d of %d: the loss (%s) or the gradient norm (%s) is not finite",
        step, config_.steps(), format(loss), format(grad_norm));
    if (step == config_.inject_nan_step()) {
      absl::StrAppend(&cause, " (injected by --inject_nan_step=", step, ")");
    }
    return absl::AbortedError(
        absl::StrCat(cause, "; stopped before the optimizer update"));
  }
  const double max_norm = config_.max_grad_norm();
  if (max_norm > 0 && grad_norm > max_norm) {
    // torch.nn.utils.clip_grad_norm_'s coefficient.
    RETURN_IF_ERROR(strategy_->ScaleGradients(max_norm / (grad_norm + 1e-6)));
    record.set_clipped(true);
  }
  RETURN_IF_ERROR(strategy_->OptimizerStep(record.lr()));
  record.set_optimizer_ms(optimizer_watch.ElapsedMs());

  ASSIGN_OR_RETURN(const double slowest_ms,
                   strategy_->ReduceScalar(step_watch.ElapsedMs(),
                                           ScalarReduction::kMax));
  record.set_step_ms(slowest_ms);
  record.set_tokens_per_second(static_cast<double>(tokens_per_step()) /
                               (slowest_ms / 1000.0));
  ++completed_steps_;
  return record;
}

namespace {

// The resolved configuration as a two-column table, one row per flag.
std::string OptionsTable(const TrainConfig& config) {
  MarkdownTable table;
  table.headers = {"option", "value"};
  const google::protobuf::Descriptor* descriptor = config.GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = descriptor->field(i);
    std::string value;
    google::protobuf::TextFormat::PrintFieldValueToString(config, field, -1,
                                                          &value);
    table.rows.push_back({absl::StrCat("--", field->name()), value});
  }
  return table.Render();
}

void LogStart(const TrainConfig& config, const RankInfo& rank,
              const Strategy& strategy, const DataSource& data,
              const GptModel& model, int64_t tokens_per_step) {
  if (rank.rank != 0) return;
  LOG(INFO) << "resolved options:\n" << OptionsTable(config);
  const ModelShape& s = model.shape();
  LOG(INFO) << absl::StrFormat(
      "model: GPT vocab %d, d_model %d, %d layers x %d heads, context %d | "
      "%d parameters | %.3g FLOPs/token (6N + 12LTD, N = %d)",
      s.vocab_size, s.d_model, s.n_layers, s.n_heads, s.seq_len,
      model.ParameterCount(), model.FlopsPerToken(),
      model.FlopsParameterCount());
  LOG(INFO) << absl::StrFormat(
      "run: strategy %s, %d rank(s), batch %d x grad_accum %d x seq %d = %d "
      "tokens/step, %s, dropout %g%s, %d steps x %d repeat(s)",
      strategy.name(), rank.world_size, config.batch_size(),
      config.grad_accum(), config.seq_len(), tokens_per_step,
      config.precision(), config.dropout(),
      config.activation_checkpointing() ? ", activation checkpointing" : "",
      config.steps(), config.repeat());
  const std::string schedule =
      config.lr_schedule() == "cosine"
          ? absl::StrFormat("cosine to %g at step %d", config.min_lr(),
                            config.lr_decay_steps())
          : std::string("constant");
  LOG(INFO) << absl::StrFormat(
      "optimizer: AdamW lr %g (warm-up %d steps, then %s), betas (%g, %g), "
      "eps %g, weight decay %g, clip %g",
      config.lr(), config.lr_warmup_steps(), schedule, config.beta1(),
      config.beta2(), config.eps(), config.weight_decay(),
      config.max_grad_norm());
  LOG(INFO) << "data: " << data.Describe();
}

}  // namespace

absl::StatusOr<TrainResult> RunTraining(const TrainConfig& config,
                                        const RankInfo& rank,
                                        Strategy& strategy,
                                        const DataSource& data) {
  TrainResult result;
  result.set_schema_version(kTrainResultSchemaVersion);
  *result.mutable_config() = config;
  result.set_config_fingerprint(ConfigFingerprint(config));
  const int64_t total_steps =
      static_cast<int64_t>(config.steps()) * config.repeat();
  int64_t steps_done = 0;
  double elapsed_ms = 0;

  for (int repeat = 0; repeat < config.repeat(); ++repeat) {
    ASSIGN_OR_RETURN(std::unique_ptr<Trainer> trainer,
                     Trainer::Create(config, rank, &strategy, &data));
    if (repeat == 0) {
      ModelInfo* model = result.mutable_model();
      model->set_parameter_count(trainer->model().ParameterCount());
      model->set_flops_parameter_count(trainer->model().FlopsParameterCount());
      model->set_flops_per_token(trainer->model().FlopsPerToken());
      model->set_tokens_per_step(trainer->tokens_per_step());
      LogStart(config, rank, strategy, data, trainer->model(),
               trainer->tokens_per_step());
    }
    TrainRun* run = result.add_runs();
    run->set_index(repeat);
    const Stopwatch run_watch;
    for (int step = 1; step <= config.steps(); ++step) {
      ASSIGN_OR_RETURN(StepRecord record, trainer->Step());
      ++steps_done;
      elapsed_ms += record.step_ms();
      const double eta_seconds = (elapsed_ms / steps_done) *
                                 static_cast<double>(total_steps - steps_done) /
                                 1000.0;
      if (rank.rank == 0 &&
          (step % config.log_every() == 0 || step == config.steps())) {
        LOG(INFO) << (config.repeat() > 1
                          ? absl::StrCat("run ", repeat + 1, "/",
                                         config.repeat(), " ")
                          : "")
                  << FormatProgressLine(record, config.steps(), eta_seconds);
      }
      *run->add_steps() = std::move(record);
    }
    run->set_wall_seconds(run_watch.ElapsedMs() / 1000.0);
    FinishRun(run, result.model().tokens_per_step());
  }
  *result.mutable_summary() = SummarizeRuns(result);
  return result;
}

}  // namespace mtb
