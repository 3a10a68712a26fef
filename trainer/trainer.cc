#include "trainer/trainer.h"

#include <algorithm>
#include <optional>
#include <cmath>
#include <limits>
#include <utility>

#include "ATen/ATen.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/base/host_memory.h"
#include "common/libtorch/counting_allocator.h"
#include "common/nn/autocast.h"
#include "common/report/report.h"
#include "common/nn/layers.h"
#include "common/base/flags.h"
#include "common/base/status.h"
#include "common/libtorch/matmul_peak.h"
#include "common/libtorch/torch_status.h"
#include "glog/logging.h"
#include "google/protobuf/text_format.h"
#include "trainer/block_spans.h"
#include "trainer/config.h"
#include "trainer/memory_peak.h"
#include "trainer/metrics.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpointer.h"

namespace mtb {
namespace {

// Points the strategy's memory marks at a step's attribution and away from
// it on every way out of the step.
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

checkpoint::RankState ProgressState(const TrainConfig& config,
                                    const RankInfo& rank, int64_t step) {
  const int64_t samples_per_step = static_cast<int64_t>(rank.world_size) *
                                   config.grad_accum() * config.batch_size();
  checkpoint::RankState state;
  state.set_rank(rank.rank);
  state.set_step(step);
  state.set_micro_step(step * config.grad_accum());
  state.set_tokens_seen(step * samples_per_step * config.seq_len());
  state.set_data_position(step * samples_per_step);
  state.set_seed(config.seed());
  state.set_rng_step(step + 1);
  state.set_last_lr(step > 0 ? LearningRateAt(LrScheduleOf(config), step) : 0.0);
  return state;
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
  CHECK_EQ(strategy->world_size(), rank.world_size) << strategy->name();
  RETURN_IF_ERROR(ValidateConfig(config));
  RETURN_IF_ERROR(ValidateConfigForWorldSize(config, rank.world_size));
  std::unique_ptr<Trainer> trainer(
      new Trainer(config, rank, strategy, data));
  RETURN_IF_ERROR(
      strategy->Setup(trainer->model_.store(), AdamWOptionsOf(config)));
  if (IsExact(config)) {
    const int64_t global_chunks = static_cast<int64_t>(rank.world_size) *
                                  config.grad_accum() * config.batch_size() /
                                  config.exact_chunk();
    trainer->exact_ =
        std::make_unique<ExactReducer>(trainer->model_.store(), global_chunks,
                                       config.testonly_exact_grid_finer_bits());
  }
  return trainer;
}

void Trainer::RestoreProgress(int64_t completed_steps) {
  CHECK_EQ(completed_steps_, 0) << "RestoreProgress before the first step";
  completed_steps_ = completed_steps;
  first_step_ = completed_steps + 1;
}

int64_t Trainer::tokens_per_step() const {
  return static_cast<int64_t>(rank_.world_size) * config_.grad_accum() *
         config_.batch_size() * config_.seq_len();
}

void Trainer::set_faults(std::vector<Fault> faults, int attempt) {
  injector_ = FaultInjector(faults, rank_.rank, attempt);
  faults_ = injector_.empty() ? std::vector<Fault>() : std::move(faults);
}

bool Trainer::InjectFaults(int64_t step, const char* phase) const {
  if (phase_observer_) phase_observer_(step, phase);
  return injector_.At(step, phase);
}

absl::StatusOr<StepRecord> Trainer::Step() {
  const int64_t step = completed_steps_ + 1;
  const int micro_batches = config_.grad_accum();
  StepRecord record;
  record.set_step(static_cast<int32_t>(step));
  record.set_lr(LearningRateAt(schedule_, step));
  // The timing warm-up counts this process's steps (a resumed run warms up
  // again).
  record.set_timed(step - first_step_ >= config_.timing_warmup_steps());
  const bool count_memory = CountingCpuAllocatorInstalled();
  if (count_memory) ResetCpuPeak();
  // Where this step's memory peaks and what the strategy holds there
  // (trainer/memory_peak.h): the loop marks its phases, the strategy every
  // change of what it holds.
  std::optional<PeakAttribution> attribution;
  if (count_memory) {
    attribution.emplace([this] { return strategy_->Held(); });
    attribution->Begin("step begins");
  }
  const ScopedMemoryMarks scoped_marks(
      strategy_, attribution ? &*attribution : nullptr);
  auto mark = [&attribution](const char* what, int index) {
    if (attribution) attribution->Mark(what, index);
  };
  const Stopwatch step_watch;
  const double cpu_at_start = ProcessCpuMs();

  double local_loss = 0;  // mean over this rank's micro-batches (or chunks)
  std::vector<double> chunk_losses;  // exact mode: this rank's, in its order
  ExactTraffic exact_traffic;
  double grad_norm = 0;
  std::optional<Stopwatch> optimizer_watch;
  if (exact_ != nullptr) {
    ASSIGN_OR_RETURN(grad_norm, ExactBackward(step, record, &chunk_losses,
                                              &exact_traffic));
    optimizer_watch.emplace();
    for (double chunk_loss : chunk_losses) {
      local_loss += chunk_loss / static_cast<double>(chunk_losses.size());
    }
  } else {
    strategy_->ZeroGradients();
    mark("gradients zeroed", -1);
    for (int micro = 0; micro < micro_batches; ++micro) {
      const Batch batch =
          GetBatch(step, FirstSampleOf(micro, rank_, config_.batch_size()),
                   config_.batch_size(), record);
      Stopwatch watch;
      // Declared before `loss`, whose graph holds its hooks (ForwardLoss).
      std::optional<BlockSpans> block_spans;
      ASSIGN_OR_RETURN(const at::Tensor loss,
                       ForwardLoss(step, batch, micro, &block_spans, mark));
      local_loss += loss.item<double>() / micro_batches;
      record.set_forward_ms(record.forward_ms() + watch.ElapsedMs());

      watch = Stopwatch();
      RETURN_IF_ERROR(strategy_->BeforeBackward(micro, micro_batches));
      mark("backward of micro-batch", micro);
      (void)InjectFaults(step, "backward");
      RETURN_IF_ERROR(CallGuarded("backward", [&] {
        const trace::ScopedSpan span(trace_, "backward", "compute");
        (loss / static_cast<double>(micro_batches)).backward();
      }));
      record.set_backward_ms(record.backward_ms() + watch.ElapsedMs());
    }

    optimizer_watch.emplace();
    RETURN_IF_ERROR(strategy_->AfterBackward());
    mark("gradients synchronised", -1);
    ASSIGN_OR_RETURN(grad_norm, strategy_->GlobalGradNorm());
  }
  // Every rank decides from the same gathered values, so all stop together.
  // Exact mode gathers every chunk's loss: the step's loss is their sum in
  // global chunk order, the same on every layout. A preemption notice rides
  // on the same gather (the last value), so every rank learns of it after
  // the same step (trainer/preemption.h).
  const bool notice = stop_notice_ && stop_notice_();
  std::vector<double> mine = chunk_losses;
  if (exact_ == nullptr) mine = {local_loss};
  const size_t losses = mine.size();
  mine.push_back(grad_norm);
  mine.push_back(notice ? 1.0 : 0.0);
  const size_t per_rank = mine.size();
  ASSIGN_OR_RETURN(const std::vector<double> gathered,
                   strategy_->GatherScalars(mine));
  double loss_sum = 0;
  std::vector<int> non_finite_loss_ranks;
  std::vector<double> non_finite_losses;
  double non_finite_norm = 0;
  bool norm_finite = true;
  std::vector<std::pair<int64_t, double>> by_chunk;  // exact: (chunk, loss)
  for (int r = 0; r < rank_.world_size; ++r) {
    double rank_loss = 0;
    for (size_t i = 0; i < losses; ++i) {
      const double value = gathered[r * per_rank + i];
      rank_loss += value / static_cast<double>(losses);
      if (exact_ != nullptr) {
        by_chunk.emplace_back(
            GlobalChunkOf(static_cast<int>(i), r, rank_.world_size,
                          config_.batch_size(), config_.exact_chunk()),
            value);
      }
    }
    const double rank_norm = gathered[r * per_rank + losses];
    if (gathered[r * per_rank + losses + 1] != 0 && stop_after_step_ == 0) {
      stop_after_step_ = step;
    }
    loss_sum += rank_loss;
    if (!std::isfinite(rank_loss)) {
      non_finite_loss_ranks.push_back(r);
      non_finite_losses.push_back(rank_loss);
    }
    if (!std::isfinite(rank_norm) && norm_finite) {
      norm_finite = false;
      non_finite_norm = rank_norm;
    }
  }
  double loss = loss_sum / rank_.world_size;
  if (exact_ != nullptr) {
    std::sort(by_chunk.begin(), by_chunk.end());
    double sum = 0;
    for (const auto& [chunk, value] : by_chunk) sum += value;
    loss = sum / static_cast<double>(by_chunk.size());
  }
  record.set_loss(loss);
  record.set_loss_bits(DoubleBits(loss));
  record.set_grad_norm(grad_norm);
  if (!non_finite_loss_ranks.empty() || !norm_finite) {
    // It would only happen again from the same state: the launcher must not
    // restart it (exit kExitDeterministicFailure).
    return MarkDeterministic(absl::AbortedError(NonFiniteMessage(
        step, non_finite_loss_ranks, non_finite_losses, norm_finite,
        non_finite_norm)));
  }
  const double max_norm = config_.max_grad_norm();
  if (max_norm > 0 && grad_norm > max_norm) {
    // torch.nn.utils.clip_grad_norm_'s coefficient.
    RETURN_IF_ERROR(strategy_->ScaleGradients(max_norm / (grad_norm + 1e-6)));
    record.set_clipped(true);
  }
  (void)InjectFaults(step, "optimizer");
  mark("optimizer step", -1);
  {
    const trace::ScopedSpan span(trace_, "optimizer", "compute");
    RETURN_IF_ERROR(strategy_->OptimizerStep(record.lr()));
  }
  mark("optimizer step done", -1);
  const StepCommunication communication = strategy_->TakeStepCommunication();
  record.set_comm_wait_ms(communication.wait_ms);
  record.set_grad_bytes_sent(communication.bytes_sent);
  record.set_expected_grad_bytes(communication.expected_bytes);
  record.set_grad_syncs(communication.syncs);
  if (exact_ != nullptr) {
    // The int64 reductions are the loop's, not the strategy's.
    record.set_comm_wait_ms(exact_traffic.wait_ms);
    record.set_grad_bytes_sent(exact_traffic.bytes_sent);
    record.set_expected_grad_bytes(exact_traffic.expected_bytes);
    record.set_grad_syncs(1);
  }
  record.set_param_gather_bytes_sent(communication.gather_bytes_sent);
  record.set_expected_param_gather_bytes(communication.expected_gather_bytes);
  record.set_param_gathers(communication.gathers);
  record.set_param_gather_in_flight_ms(communication.gather_in_flight_ms);
  record.set_param_gather_wait_ms(communication.gather_wait_ms);
  record.set_param_gather_hidden_ms(communication.gather_hidden_ms);
  const HeldMemory held = strategy_->Held();
  record.set_held_parameter_bytes(held.parameters);
  record.set_held_gradient_bytes(held.gradients);
  record.set_held_optimizer_state_bytes(held.optimizer_state);
  record.set_held_collective_bytes(held.collective_temporaries);
  if (count_memory) {
    record.set_live_bytes(CpuMemory().current_bytes);
    record.set_unattributed_bytes(record.live_bytes() - held.total());
  }
  record.set_optimizer_ms(optimizer_watch->ElapsedMs());

  record.set_cpu_ms(ProcessCpuMs() - cpu_at_start);
  ASSIGN_OR_RETURN(const double slowest_ms,
                   strategy_->ReduceScalar(step_watch.ElapsedMs(),
                                           ScalarReduction::kMax));
  record.set_step_ms(slowest_ms);
  record.set_tokens_per_second(static_cast<double>(tokens_per_step()) /
                               (slowest_ms / 1000.0));
  if (count_memory) {
    record.set_peak_memory_bytes(CpuMemory().peak_bytes);
    *record.mutable_memory_at_peak() = attribution->End();
    record.mutable_memory_at_peak()->set_step(static_cast<int32_t>(step));
    VLOG(1) << "step " << step << ": " << attribution->marks()
            << " memory marks, " << attribution->walk_ms()
            << " ms walking what the strategy holds";
  }
  ++completed_steps_;
  return record;
}

Batch Trainer::GetBatch(int64_t step, int64_t first_sample, int64_t count,
                        StepRecord& record) const {
  const Stopwatch watch;
  (void)InjectFaults(step, "data");
  std::optional<trace::ScopedSpan> data_span(std::in_place, trace_, "data",
                                             "data");
  Batch batch = data_->Get(step, first_sample, count);
  data_span.reset();
  record.set_data_ms(record.data_ms() + watch.ElapsedMs());
  return batch;
}

absl::StatusOr<at::Tensor> Trainer::ForwardLoss(
    int64_t step, const Batch& batch, int index,
    std::optional<BlockSpans>* block_spans,
    const std::function<void(const char*, int)>& mark) {
  // Traced: per-block spans around the strategy's unit hooks
  // (trainer/block_spans.h).
  if (trace_ != nullptr) {
    block_spans->emplace(trace_, UnitNames(model_.store()),
                         strategy_->unit_hooks(), index);
  }
  at::Tensor loss;
  const bool nan_fault = InjectFaults(step, "forward");
  if (mark) mark("forward of micro-batch", index);
  RETURN_IF_ERROR(CallGuarded("forward", [&] {
    const trace::ScopedSpan span(trace_, "forward", "compute");
    nn::AutocastGuard autocast(config_.precision() == "bf16");
    ForwardOptions options =
        ForwardOptionsOf(config_, step, batch.sample_indices);
    if (*block_spans) {
      options.unit_hooks.push_back(&**block_spans);
    } else if (UnitHooks* hooks = strategy_->unit_hooks()) {
      options.unit_hooks.push_back(hooks);
    }
    const at::Tensor logits = model_.Forward(batch.inputs, options);
    loss = nn::CrossEntropy(logits, batch.targets);
    if (nan_fault) {
      // A multiplication, so that the gradients are NaN too.
      loss = loss * std::numeric_limits<double>::quiet_NaN();
    }
  }));
  return loss;
}

absl::StatusOr<double> Trainer::ExactBackward(int64_t step, StepRecord& record,
                                             std::vector<double>* chunk_losses,
                                             ExactTraffic* traffic) {
  const int micro_batches = config_.grad_accum();
  const int64_t chunk = config_.exact_chunk();
  const int chunks_per_micro = static_cast<int>(config_.batch_size() / chunk);
  const int chunks = micro_batches * chunks_per_micro;
  collective::Communicator* communicator = strategy_->communicator();
  bool coarsen = false;
  for (int attempt = 0;; ++attempt) {
    strategy_->ZeroGradients();
    exact_->BeginAttempt(coarsen);
    chunk_losses->clear();
    for (int micro = 0; micro < micro_batches; ++micro) {
      const int64_t first = FirstSampleOf(micro, rank_, config_.batch_size());
      for (int c = 0; c < chunks_per_micro; ++c) {
        const Batch batch =
            GetBatch(step, first + c * chunk, chunk, record);
        Stopwatch watch;
        // Declared before `loss`, whose graph holds its hooks (ForwardLoss).
        std::optional<BlockSpans> block_spans;
        ASSIGN_OR_RETURN(const at::Tensor loss,
                         ForwardLoss(step, batch, micro * chunks_per_micro + c,
                                     &block_spans, nullptr));
        chunk_losses->push_back(loss.item<double>());
        record.set_forward_ms(record.forward_ms() + watch.ElapsedMs());

        watch = Stopwatch();
        RETURN_IF_ERROR(strategy_->BeforeLocalBackward(
            micro * chunks_per_micro + c, chunks));
        (void)InjectFaults(step, "backward");
        RETURN_IF_ERROR(CallGuarded("backward", [&] {
          const trace::ScopedSpan span(trace_, "backward", "compute");
          loss.backward();
        }));
        // Converted as soon as the chunk is done; .grad zeroed for the next.
        exact_->AddChunk();
        record.set_backward_ms(record.backward_ms() + watch.ElapsedMs());
      }
    }
    RETURN_IF_ERROR(strategy_->AfterLocalBackwards());
    ASSIGN_OR_RETURN(const ExactReducer::Verdict verdict,
                     exact_->Decide(communicator));
    if (!verdict.finite) {
      // Nothing is reduced: the step stops on the NaN norm (every rank).
      return std::numeric_limits<double>::quiet_NaN();
    }
    if (verdict.overflowed.empty()) break;
    const std::string what =
        verdict.Describe(model_.store(), exact_->global_max_abs());
    if (attempt > 0) {
      return absl::InternalError(absl::StrCat(
          "step ", step, ": exact mode: the chunk gradients of ", what,
          " overflowed the coarser grid of the redo (their chunks are "
          "deterministic, so this is a bug)"));
    }
    if (rank_.rank == 0) {
      LOG(WARNING) << "step " << step << ": exact mode: chunk gradients of "
                   << what << " exceed the default grid (max-abs 2^"
                   << ExactReducer::kDefaultMaxAbsLog2 -
                          config_.testonly_exact_grid_finer_bits()
                   << "); redoing the step on a coarser grid for them";
    }
    record.set_exact_redos(attempt + 1);
    coarsen = true;
  }
  const std::vector<ExactGroup> groups = strategy_->ExactGroups();
  ASSIGN_OR_RETURN(*traffic, exact_->Reduce(groups, communicator));
  return exact_->Norm(groups, communicator);
}

std::string Trainer::NonFiniteMessage(
    int64_t step, const std::vector<int>& loss_ranks,
    const std::vector<double>& losses, bool norm_finite,
    double norm) const {
  // NaN's sign is noise ("-nan"): print every NaN as "nan".
  auto format = [](double value) {
    return std::isnan(value) ? std::string("nan")
                             : absl::StrFormat("%g", value);
  };
  std::string message =
      absl::StrFormat("step %d of %d: ", step, config_.steps());
  if (!loss_ranks.empty()) {
    std::vector<std::string> values;
    for (double value : losses) values.push_back(format(value));
    absl::StrAppend(&message, "the loss is not finite on ",
                    loss_ranks.size() == 1 ? "rank " : "ranks ",
                    absl::StrJoin(loss_ranks, ", "), " (",
                    absl::StrJoin(values, ", "), ")");
    if (!norm_finite) {
      absl::StrAppend(&message, " and the gradient norm (", format(norm),
                      ") is not finite");
    }
  } else {
    absl::StrAppend(&message, "the gradient norm (", format(norm),
                    ") is not finite (every rank's loss is finite)");
  }
  for (const Fault& fault : faults_) {
    if (fault.kind == FaultKind::kNan && fault.step == step) {
      absl::StrAppend(&message, " (injected by --fault=", FaultToString(fault), ")");
    }
  }
  absl::StrAppend(&message,
                  "; every rank stopped before the optimizer update");
  return message;
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
  LOG(INFO) << "strategy: " << strategy.Describe();
  const std::vector<BucketSummary> buckets = strategy.Buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    LOG(INFO) << absl::StrFormat("  bucket %d: %d parameters, %d bytes (%s .. %s)",
                                 b, buckets[b].parameters, buckets[b].bytes,
                                 buckets[b].first_parameter,
                                 buckets[b].last_parameter);
  }
}

// --peak_flops, or every rank measures a matmul at once (they share the
// host's cores as in training); the job's peak is the sum over ranks.
absl::StatusOr<PeakFlops> JobPeakFlops(const TrainConfig& config,
                                       const RankInfo& rank,
                                       Strategy& strategy) {
  PeakFlops peak;
  if (config.peak_flops() > 0) {
    peak.set_rank_flops_per_second(config.peak_flops());
    peak.set_job_flops_per_second(config.peak_flops() * rank.world_size);
    peak.set_source("--peak_flops");
    return peak;
  }
  // Every GEMM library at the model's shapes and 1024^3; the fastest is the
  // peak, so no product the trainer runs can beat it (an MFU above 100% would
  // be a bug of this measurement).
  const std::vector<GemmSpeed> speeds = MeasureGemms(
      config.precision(),
      ModelGemmShapes(int64_t{config.batch_size()} * config.seq_len(),
                      config.d_model(), config.vocab_size()));
  const GemmSpeed* fastest = FastestGemm(speeds);
  const GemmSpeed* blas = FastestGemm(speeds, "blas");
  CHECK(fastest != nullptr);
  ASSIGN_OR_RETURN(const double job_flops,
                   strategy.ReduceScalar(fastest->flops_per_second,
                                         ScalarReduction::kSum));
  ASSIGN_OR_RETURN(const double blas_job_flops,
                   strategy.ReduceScalar(
                       blas == nullptr ? 0.0 : blas->flops_per_second,
                       ScalarReduction::kSum));
  peak.set_rank_flops_per_second(job_flops / rank.world_size);
  peak.set_job_flops_per_second(job_flops);
  peak.set_blas_rank_flops_per_second(blas_job_flops / rank.world_size);
  peak.set_blas_job_flops_per_second(blas_job_flops);
  peak.set_source(absl::StrCat(
      "measured: fastest of ", speeds.size(), " GEMMs (", config.precision(),
      ", model shapes and 1024^3, best of 5): ", fastest->Describe(),
      ", on every rank at once (mean per rank)"));
  for (const GemmSpeed& speed : speeds) {
    GemmSpeedRecord* record = peak.add_gemms();
    record->set_library(speed.library);
    record->set_precision(speed.precision);
    record->set_m(speed.shape.m);
    record->set_n(speed.shape.n);
    record->set_k(speed.shape.k);
    record->set_flops_per_second(speed.flops_per_second);
  }
  if (rank.rank == 0) {
    LOG(INFO) << absl::StrFormat(
        "peak: %.1f GFLOP/s per rank, %.1f GFLOP/s for the job (%s)",
        peak.rank_flops_per_second() / 1e9, job_flops / 1e9, peak.source());
    for (const GemmSpeed& speed : speeds) {
      LOG(INFO) << absl::StrFormat("  gemm %s: %.1f GFLOP/s", speed.Describe(),
                                   speed.flops_per_second / 1e9);
    }
  }
  return peak;
}

void FillStrategyInfo(const Strategy& strategy, const GptModel& model,
                      StrategyInfo* info) {
  info->set_name(strategy.name());
  info->set_description(strategy.Describe());
  info->set_backend(strategy.backend());
  info->set_gradient_bytes(model.ParameterCount() * 4);
  const std::vector<BucketSummary> buckets = strategy.Buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    BucketInfo* bucket = info->add_buckets();
    bucket->set_index(static_cast<int32_t>(b));
    bucket->set_parameters(buckets[b].parameters);
    bucket->set_bytes(buckets[b].bytes);
    bucket->set_first_parameter(buckets[b].first_parameter);
    bucket->set_last_parameter(buckets[b].last_parameter);
  }
}

}  // namespace

namespace {

// An allocation failure (kResourceExhausted) gets the rank and what to lower.
template <typename T>
absl::StatusOr<T> WithMemoryAdvice(absl::StatusOr<T> result,
                                   const RankInfo& rank,
                                   absl::string_view context) {
  if (result.ok() ||
      result.status().code() != absl::StatusCode::kResourceExhausted) {
    return result;
  }
  // An exception caught by the step's own guard already names the step.
  const bool named = absl::StartsWith(result.status().message(), context);
  return absl::ResourceExhaustedError(absl::StrCat(
      "rank ", rank.rank, ": ", named ? "" : context, result.status().message(),
      " (lower --batch_size or --seq_len, use --activation_checkpointing or "
      "more ranks)"));
}

// Rank 0's line for a finished save.
void LogSave(const CheckpointSave& save, const RankInfo& rank) {
  if (rank.rank != 0) return;
  const std::string pruned =
      save.pruned().empty()
          ? ""
          : absl::StrCat("; pruned ", absl::StrJoin(save.pruned(), ", "));
  if (!save.async()) {
    LOG(INFO) << absl::StrFormat(
        "checkpoint %s: %s in %.0f ms (write %.0f, publish %.0f)%s", save.name(),
        FormatByteAmount(save.bytes()), save.blocking_ms(),
        save.write_seconds() * 1000, save.publish_seconds() * 1000, pruned);
    return;
  }
  LOG(INFO) << absl::StrFormat(
      "checkpoint %s: %s, training blocked %.1f ms (snapshot; %.1f ms waiting "
      "for the previous save), background %.0f ms (write %.0f, publish %.0f)%s",
      save.name(), FormatByteAmount(save.bytes()), save.blocking_ms(),
      save.wait_ms(), save.background_ms(), save.write_seconds() * 1000,
      save.publish_seconds() * 1000, pruned);
}

}  // namespace

absl::StatusOr<TrainResult> RunTraining(const TrainConfig& config,
                                        const RankInfo& rank,
                                        Strategy& strategy,
                                        const DataSource& data,
                                        const RunHooks& hooks) {
  TrainResult result;
  result.set_schema_version(kTrainResultSchemaVersion);
  *result.mutable_config() = config;
  result.set_config_fingerprint(ConfigFingerprint(config));
  int64_t total_steps = static_cast<int64_t>(config.steps()) * config.repeat();
  int64_t start_step = 0;  // a resumed run continues after it
  double load_ms = 0;      // a resumed run: how long loading took
  int64_t steps_done = 0;
  double elapsed_ms = 0;
  int64_t peak_memory_bytes = 0;
  MemoryAtPeak memory_at_peak;  // this rank's, over every run
  const absl::StatusOr<ProcessMemory> process_at_start = ReadProcessMemory();
  bool warned_mfu_above_one = false;

  for (int repeat = 0; repeat < config.repeat(); ++repeat) {
    ASSIGN_OR_RETURN(
        std::unique_ptr<Trainer> trainer,
        WithMemoryAdvice(
            CallGuarded("creating the model and optimizer",
                        [&] { return Trainer::Create(config, rank, &strategy,
                                                     &data); }),
            rank, ""));
    if (repeat == 0) {
      ModelInfo* model = result.mutable_model();
      model->set_parameter_count(trainer->model().ParameterCount());
      model->set_flops_parameter_count(trainer->model().FlopsParameterCount());
      model->set_flops_per_token(trainer->model().FlopsPerToken());
      model->set_tokens_per_step(trainer->tokens_per_step());
      LogStart(config, rank, strategy, data, trainer->model(),
               trainer->tokens_per_step());
      FillStrategyInfo(strategy, trainer->model(), result.mutable_strategy());
      ASSIGN_OR_RETURN(*result.mutable_peak_flops(),
                       JobPeakFlops(config, rank, strategy));
      if (hooks.checkpointer != nullptr) {  // one run (validated)
        checkpoint::Checkpointer& checkpointer = *hooks.checkpointer;
        RETURN_IF_ERROR(checkpointer.Start());
        if (checkpointer.plan().resuming()) {
          start_step = checkpointer.plan().start_step;
          const Stopwatch load_watch;
          RETURN_IF_ERROR(checkpointer.Resume(
              strategy, ProgressState(config, rank, start_step)));
          load_ms = load_watch.ElapsedMs();
          trainer->RestoreProgress(start_step);
          total_steps -= start_step;
          if (rank.rank == 0) {
            LOG(INFO) << "resumed from " << checkpointer.plan().resume_dir
                      << " (run " << checkpointer.run_id() << "): "
                      << (start_step == config.steps()
                              ? std::string("nothing to train")
                              : absl::StrCat("steps ", start_step + 1, "..",
                                             config.steps()))
                      << (checkpointer.plan().resume_exact
                              ? ", exact"
                              : absl::StrCat(", not exact: ",
                                             checkpointer.plan().inexact_reason));
          }
        }
        *result.mutable_checkpoint() = checkpointer.Info();
        result.mutable_checkpoint()->set_load_ms(load_ms);
      }
      if (hooks.on_start) {
        const bool resumed = hooks.checkpointer != nullptr &&
                             hooks.checkpointer->plan().resuming();
        RETURN_IF_ERROR(hooks.on_start(
            resumed ? hooks.checkpointer->plan().resume_dir : "", start_step));
      }
    }
    // Saves after `step` (every rank, no collective in flight): at once, or
    // with --async_checkpoint a snapshot now and the rest in the background
    // (its faults on an injector of its own: FaultInjector is not
    // thread-safe); finished saves go into the result.
    // One save in flight: its thread is joined before the next uses this.
    const std::shared_ptr<FaultInjector> background_faults =
        hooks.checkpointer != nullptr &&
                hooks.checkpointer->plan().options.async_save
            ? std::make_shared<FaultInjector>(hooks.faults, rank.rank,
                                              hooks.attempt)
            : nullptr;
    // The async save in flight, if any, waited for and recorded.
    const auto finish_async = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(std::vector<CheckpointSave> finished,
                       hooks.checkpointer->FinishAsync());
      for (CheckpointSave& save : finished) {
        LogSave(save, rank);
        *result.mutable_checkpoint()->add_saves() = std::move(save);
      }
      return absl::OkStatus();
    };
    const auto save_after = [&](int64_t step, bool traced) -> absl::Status {
      checkpoint::Checkpointer& checkpointer = *hooks.checkpointer;
      std::vector<CheckpointSave> finished;
      if (checkpointer.plan().options.async_save) {
        ASSIGN_OR_RETURN(
            finished,
            checkpointer.SaveAsync(
                step, strategy, ProgressState(config, rank, step),
                traced ? hooks.trace : nullptr,
                [injector = background_faults, step](const char* phase) {
                  injector->At(step, phase);
                }));
      } else {
        ASSIGN_OR_RETURN(
            CheckpointSave save,
            checkpointer.Save(
                step, strategy, ProgressState(config, rank, step),
                traced ? hooks.trace : nullptr,
                [&](const char* phase) { trainer->InjectFaults(step, phase); }));
        finished.push_back(std::move(save));
      }
      for (CheckpointSave& save : finished) {
        LogSave(save, rank);
        *result.mutable_checkpoint()->add_saves() = std::move(save);
      }
      return absl::OkStatus();
    };
    if (hooks.checkpointer != nullptr &&
        hooks.checkpointer->plan().trains_nothing(config.steps()) &&
        hooks.checkpointer->plan().SavesAt(start_step, config.steps())) {
      // An offline reshard: the loaded state, saved in this run's layout.
      RETURN_IF_ERROR(save_after(start_step, /*traced=*/false));
    }
    TrainRun* run = result.add_runs();
    run->set_index(repeat);
    const Stopwatch run_watch;
    for (int step = start_step + 1; step <= config.steps(); ++step) {
      // Anything LibTorch throws inside the step (a failed allocation
      // included) is one line naming the step and the operation, exit 1.
      // Traced steps: --trace_steps' window of the first run.
      const bool traced = hooks.trace != nullptr && repeat == 0 &&
                          step >= hooks.trace_first_step &&
                          step <= hooks.trace_last_step;
      if (hooks.trace != nullptr) hooks.trace->set_enabled(traced);
      trainer->set_trace(traced ? hooks.trace : nullptr);
      if (step == start_step + 1) {
        trainer->set_faults(hooks.faults, hooks.attempt);
        trainer->set_phase_observer(hooks.phase_observer);
        trainer->set_stop_notice(hooks.stop_notice);
      }
      const absl::Time step_begin = absl::Now();
      ASSIGN_OR_RETURN(
          StepRecord record,
          WithMemoryAdvice(CallGuarded(absl::StrCat("step ", step),
                                       [&] { return trainer->Step(); }),
                           rank, absl::StrCat("step ", step, ": ")));
      if (traced) {
        hooks.trace->AddSpan(absl::StrCat("ProfilerStep#", step), "step",
                             trace::kComputeTrack, step_begin, absl::Now(),
                             {{"step", absl::StrCat(step)}});
      }
      record.set_mfu(record.tokens_per_second() *
                     result.model().flops_per_token() /
                     result.peak_flops().job_flops_per_second());
      if (record.mfu() > 1 && !warned_mfu_above_one && rank.rank == 0) {
        warned_mfu_above_one = true;
        LOG(WARNING) << MfuAboveOneWarning(record.mfu(), result.peak_flops());
      }
      peak_memory_bytes =
          std::max(peak_memory_bytes, record.peak_memory_bytes());
      if (record.memory_at_peak().peak_bytes() > memory_at_peak.peak_bytes()) {
        memory_at_peak = record.memory_at_peak();
        memory_at_peak.set_run(repeat);
      }
      ++steps_done;
      if (steps_done == 1 && hooks.after_first_step) {
        RETURN_IF_ERROR(hooks.after_first_step());
      }
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
      if (hooks.after_step) RETURN_IF_ERROR(hooks.after_step(step));
      // The ranks agreed on a preemption notice during this step: it ends
      // the run once a checkpoint of it is published.
      const bool preempted =
          hooks.checkpointer != nullptr && trainer->stop_after_step() == step;
      if (hooks.checkpointer != nullptr &&
          (preempted || hooks.checkpointer->plan().SavesAt(step, config.steps()))) {
        RETURN_IF_ERROR(save_after(step, traced));
        const Fault* corrupt = trainer->CorruptionAt(step);
        // Both act on the published checkpoint: an async save is waited for.
        if (preempted || corrupt != nullptr) RETURN_IF_ERROR(finish_async());
        const std::string saved = absl::StrCat(hooks.checkpointer->plan().options.dir, "/",
                                               checkpoint::StepDirName(step));
        if (corrupt != nullptr) {
          ASSIGN_OR_RETURN(const std::string file,
                           checkpoint::CorruptShardFile(saved, rank.rank));
          LOG(ERROR) << "--fault=" << FaultToString(*corrupt) << ": flipped a byte of "
                     << file;
        }
        if (preempted) {
          Preemption* preemption = result.mutable_preemption();
          preemption->set_step(static_cast<int32_t>(step));
          preemption->set_checkpoint(saved);
          if (rank.rank == 0) {
            LOG(WARNING) << "preemption notice: stopped after step " << step << " of "
                         << config.steps() << " with checkpoint " << preemption->checkpoint()
                         << " (resume with --resume=latest)";
          }
        }
      }
      if (preempted) break;
    }
    if (hooks.checkpointer != nullptr) RETURN_IF_ERROR(finish_async());
    run->set_wall_seconds(run_watch.ElapsedMs() / 1000.0);
    // A resume that trains nothing has no step to summarise.
    if (run->steps_size() > 0) FinishRun(run, result.model().tokens_per_step());
    if (result.has_preemption()) break;
    if (repeat == config.repeat() - 1) {
      // Sharded parameters (fsdp) are gathered for the digest and the hook.
      RETURN_IF_ERROR(strategy.GatherFullParameters());
      result.set_parameter_digest(
          ParameterDigest(trainer->model().store().parameters()));
      if (hooks.after_last_run) {
        RETURN_IF_ERROR(hooks.after_last_run(trainer->model()));
      }
    }
  }
  // Every rank's peak (exact in fp64 up to 2^53 bytes).
  const bool counted = CountingCpuAllocatorInstalled();
  const absl::StatusOr<ProcessMemory> process_at_end = ReadProcessMemory();
  constexpr int kValues = 4;
  ASSIGN_OR_RETURN(
      const std::vector<double> peaks,
      strategy.GatherScalars(
          {static_cast<double>(peak_memory_bytes), counted ? 1.0 : 0.0,
           process_at_end.ok()
               ? static_cast<double>(process_at_end->hwm_bytes)
               : 0.0,
           process_at_start.ok()
               ? static_cast<double>(process_at_start->rss_bytes)
               : 0.0}));
  ASSIGN_OR_RETURN(const std::vector<MemoryAtPeak> at_peaks,
                   GatherMemoryAtPeak(strategy, memory_at_peak));
  for (int r = 0; r < rank.world_size; ++r) {
    RankMemory* memory = result.add_memory();
    memory->set_rank(r);
    memory->set_peak_bytes(static_cast<int64_t>(peaks[kValues * r]));
    memory->set_counted(peaks[kValues * r + 1] != 0);
    memory->set_vm_hwm_bytes(static_cast<int64_t>(peaks[kValues * r + 2]));
    memory->set_vm_rss_at_start_bytes(
        static_cast<int64_t>(peaks[kValues * r + 3]));
    if (memory->counted()) *memory->mutable_at_peak() = at_peaks[r];
  }
  *result.mutable_summary() = SummarizeRuns(result);
  if (rank.rank == 0 && result.summary().param_gather_in_flight_ms() > 0) {
    LOG(INFO) << ParameterGatherLine(result);
  }
  return result;
}

}  // namespace mtb
