#include "trainer/cuda/run.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/results/run_context.h"
#include "glog/logging.h"
#include "trainer/checkpoint/protocol.h"
#include "trainer/cuda/checkpoint_state.h"
#include "trainer/config/config.h"
#include "trainer/model/lr_schedule.h"
#include "trainer/output/metrics.h"
#include "trainer/model/model_shape.h"
#include "trainer/strategy/buckets.h"
#include "trainer/strategy/registry.h"

namespace mtb {
namespace cuda {

void ThreadAverage::Average(int rank, float* values, int64_t n) {
  const int world_size = rounds_.world_size();
  const std::vector<std::vector<double>> all =
      rounds_.Gather(rank, std::vector<double>(values, values + n));
  for (int64_t i = 0; i < n; ++i) {
    float sum = 0;
    for (int r = 0; r < world_size; ++r) sum += static_cast<float>(all[r][i]);
    values[i] = sum / static_cast<float>(world_size);
  }
}

double ThreadAverage::Average(int rank, double value) {
  return Sum(rank, value) / rounds_.world_size();
}

double ThreadAverage::Sum(int rank, double value) {
  double sum = 0;
  for (const std::vector<double>& one : rounds_.Gather(rank, {value})) sum += one[0];
  return sum;
}

absl::StatusOr<CudaSync> CudaSyncOf(const TrainConfig& config) {
  ASSIGN_OR_RETURN(const StrategyEntry* entry, FindStrategy(ConfigName(config.strategy())));
  if (entry->max_world_size == 1) return CudaSync::kNone;
  // A whole gradient on every rank at the end of backward (the strategies
  // whose --grad_sync=auto is "last"; zero2 and fsdp shard it, "every").
  if (std::string(entry->auto_grad_sync) != "last") {
    return absl::UnimplementedError("the gradient is sharded during backward");
  }
  return entry->gather_bytes_label[0] == '\0' ? CudaSync::kAllReduce
                                               : CudaSync::kShardedUpdate;
}

checkpoint::Exchange ThreadExchange::For(int rank) {
  return [this, rank](const std::string&,
                      const std::string& bytes) -> absl::StatusOr<std::vector<std::string>> {
    return Exchange(rank, bytes);
  };
}

absl::Status CheckCudaConfig(const TrainConfig& config, int world_size) {
  auto refuse = [](const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is not supported with --device=cuda yet"));
  };
  // One GPU: single, or a synchronised strategy over NCCL at world size 1;
  // several: the synchronised ones (ddp's all-reduce, zero1's sharded update).
  const std::string strategy = ConfigName(config.strategy());
  const absl::StatusOr<CudaSync> sync = CudaSyncOf(config);
  if (!sync.ok() || (world_size > 1 && *sync == CudaSync::kNone)) {
    return refuse(absl::StrCat("--strategy=", strategy, " on ", world_size, " GPU",
                               world_size == 1 ? "" : "s", " (--strategy=",
                               StrategyName(StrategyKind::kSingle), ", ",
                               StrategyName(StrategyKind::kDdp), " or ",
                               StrategyName(StrategyKind::kZero1), ")"));
  }
  if (config.dropout() != 0) {
    return refuse(absl::StrCat("--dropout=", config.dropout()));
  }
  if (config.grad_accum() != 1) {
    return refuse(absl::StrCat("--grad_accum=", config.grad_accum()));
  }
  if (config.repeat() > 1) {
    return refuse(absl::StrCat("--repeat=", config.repeat()));
  }
  if (IsExact(config)) return refuse("--reduction=exact");
  if (config.activation_checkpointing()) {
    return refuse("--activation_checkpointing");
  }
  return absl::OkStatus();
}

absl::StatusOr<TrainResult> RunCudaTraining(const TrainConfig& config,
                                            const SampleSource& samples,
                                            const DeviceInfo& device,
                                            const GptCudaFactory& factory,
                                            const checkpoint::CheckpointPlan& plan,
                                            const CudaRanks& ranks) {
  const ModelShape shape = ModelShapeOf(config);
  const ParameterLayout layout = ParameterLayout::ForGpt(shape);
  std::vector<float> parameters(layout.total());
  InitializeParameters(layout, config.seed(), parameters.data());
  GptDims dims;
  dims.vocab_size = shape.vocab_size;
  dims.d_model = shape.d_model;
  dims.n_layers = shape.n_layers;
  dims.n_heads = shape.n_heads;
  dims.seq_len = shape.seq_len;
  dims.batch_size = config.batch_size();
  dims.bf16 = config.precision() == TrainConfig::bf16;
  std::string error;
  std::unique_ptr<GptCuda> model =
      factory(dims, layout, parameters.data(), &error);
  if (model == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("creating the model on ", device.name, ": ", error));
  }

  // Synchronised ranks: the buckets, launched from backward (BucketSync);
  // zero1: this rank's shard of the gradient and its update pieces.
  SyncPlan sync_plan;
  std::unique_ptr<BucketSync> bucket_sync;
  std::vector<UpdatePiece> pieces;
  ShardedDevice* sharded = nullptr;
  std::vector<PlanRange> save_ranges;  // synchronised ranks: what this rank saves
  StepBytes step_bytes;                // and what it sends per step
  if (ranks.collectives != nullptr) {
    ASSIGN_OR_RETURN(const CudaSync kind, CudaSyncOf(config));
    std::vector<int64_t> numels;
    std::vector<DeviceTensor> tensors;
    for (const TensorSlot& slot : layout.tensors()) {
      numels.push_back(slot.numel);
      tensors.push_back({slot.offset, slot.numel, slot.weight_decay});
    }
    sync_plan = MakeSyncPlan(numels, ranks.world_size, kFirstBucketBytes,
                             BucketCapBytes(config.bucket_cap_mb()));
    RETURN_IF_ERROR(CheckShardPlan(sync_plan, layout.total()));
    float* shard_grads = nullptr;
    if (kind == CudaSync::kShardedUpdate) {
      sharded = model->sharded();
      if (sharded == nullptr) {
        return absl::FailedPreconditionError(absl::StrCat(
            "--strategy=", ConfigName(config.strategy()), ": the model on ", device.name,
            " has no sharded update"));
      }
      shard_grads = sharded->AllocateShardGradients(
          std::max<int64_t>(1, sync_plan.ShardNumel(ranks.rank)), &error);
      if (shard_grads == nullptr) {
        return absl::ResourceExhaustedError(
            absl::StrCat("zero1's shard of the gradient on ", device.name, ": ", error));
      }
      pieces = ShardPieces(sync_plan, ranks.rank, tensors);
    }
    bucket_sync = std::make_unique<BucketSync>(
        sync_plan, kind == CudaSync::kShardedUpdate ? BucketOp::kReduceScatter
                                                    : BucketOp::kAllReduce,
        *ranks.collectives, ranks.stream, model->gradients(), shard_grads);
    if (!config.ddp_launch_after_backward()) model->SetGradientReadyHook(bucket_sync.get());
    step_bytes = ExpectedStepBytes(sync_plan,
                                   kind == CudaSync::kShardedUpdate ? BucketOp::kReduceScatter
                                                                    : BucketOp::kAllReduce,
                                   ranks.rank);
    // What this rank saves: ddp its even slice of the buffer, zero1 its
    // shards (the CPU trainer's placements).
    if (kind == CudaSync::kShardedUpdate) {
      save_ranges = sync_plan.UpdateRanges(ranks.rank);
    } else {
      const std::vector<int64_t> counts = ShardCounts(layout.total(), ranks.world_size);
      PlanRange slice{0, counts[ranks.rank]};
      for (int r = 0; r < ranks.rank; ++r) slice.offset += counts[r];
      if (slice.numel > 0) save_ranges.push_back(slice);
    }
  }

  TrainResult result;
  result.set_schema_version(kTrainResultSchemaVersion);
  *result.mutable_config() = config;
  result.set_config_fingerprint(ConfigFingerprint(config));
  const int64_t tokens_per_step = config.batch_size() * shape.seq_len;
  ModelInfo* info = result.mutable_model();
  info->set_parameter_count(ParameterCountOf(shape));
  info->set_flops_parameter_count(FlopsParameterCountOf(shape));
  info->set_flops_per_token(FlopsPerTokenOf(shape));
  info->set_tokens_per_step(tokens_per_step);
  if (config.peak_flops() > 0) {
    result.mutable_peak_flops()->set_rank_flops_per_second(config.peak_flops());
    result.mutable_peak_flops()->set_job_flops_per_second(config.peak_flops());
    result.mutable_peak_flops()->set_source("--peak_flops");
  }

  // Checkpoints: the resumed state onto the device, the run's id.
  HostState host(plan.enabled() ? layout.total() : 0);
  const checkpoint::Exchange& exchange = ranks.exchange;
  int64_t start_step = 0;
  int64_t hashed_bytes = 0;
  double load_ms = 0;
  const std::string run_id = plan.run_id.empty() ? NewRunId() : plan.run_id;
  if (plan.resuming()) {
    const Stopwatch load_clock;
    start_step = plan.start_step;
    // Every rank reads the whole state (the model everywhere; zero1 uses
    // the moments of its shard only) and checks its own recorded state.
    const std::string mine(
        checkpoint::ReadRankState(
            plan, ranks.rank, RequestsInto(layout, &host),
            checkpoint::ProgressStateOf(config, ranks.rank, ranks.world_size, start_step),
            &hashed_bytes)
            .message());
    std::vector<std::string> errors = {mine};
    if (exchange) {
      ASSIGN_OR_RETURN(errors, exchange("resume", mine));
    }
    RETURN_IF_ERROR(
        checkpoint::AgreedVerdict(errors, absl::StrCat("resuming from ", plan.resume_dir)));
    if (host.step != start_step) {
      return absl::FailedPreconditionError(absl::StrCat(
          "resuming from ", plan.resume_dir, ": optimizer/step is ", host.step,
          ", the checkpoint's step ", start_step));
    }
    model->LoadState(host.parameters.data(), host.exp_avg.data(), host.exp_avg_sq.data());
    load_ms = load_clock.ElapsedMs();
  }
  checkpoint::SaveTarget target;
  target.root = plan.options.dir;
  target.keep_last = plan.options.keep_last;
  target.run_id = run_id;
  target.strategy = ConfigName(config.strategy());
  target.rank = ranks.rank;
  target.world_size = ranks.world_size;
  target.config = config;
  target.data = plan.data_identity;
  auto save = [&](int64_t step) -> absl::Status {
    const Stopwatch save_clock;
    model->CopyStateToHost(host.parameters.data(), host.exp_avg.data(),
                           host.exp_avg_sq.data());
    host.step = step;
    ASSIGN_OR_RETURN(
        CheckpointSave saved,
        checkpoint::WriteAndPublish(
            target, step,
            ranks.collectives == nullptr
                ? ShardsOf(layout, host)
                : RangeShardsOf(layout, host, save_ranges, ranks.rank == 0),
            checkpoint::ProgressStateOf(config, ranks.rank, ranks.world_size, step),
            exchange ? exchange : checkpoint::SingleRankExchange(), /*trace=*/nullptr,
            [](const char*) {}));
    saved.set_blocking_ms(save_clock.ElapsedMs());
    *result.mutable_checkpoint()->add_saves() = std::move(saved);
    return absl::OkStatus();
  };
  if (plan.enabled()) {
    *result.mutable_checkpoint() = checkpoint::CheckpointInfoOf(plan, run_id, hashed_bytes);
    result.mutable_checkpoint()->set_load_ms(load_ms);
  }
  // A resume at the last step trains nothing; it saves the loaded state.
  if (plan.trains_nothing(config.steps()) && plan.SavesAt(start_step, config.steps())) {
    RETURN_IF_ERROR(save(start_step));
  }

  const LrSchedule schedule = LrScheduleOf(config);
  const int64_t row = shape.seq_len + 1;
  std::vector<int64_t> tokens(config.batch_size() * row);
  std::vector<int32_t> inputs(tokens_per_step), targets(tokens_per_step);
  TrainRun* run = result.add_runs();
  run->set_index(0);
  const Stopwatch run_clock;
  for (int64_t step = start_step; step < config.steps(); ++step) {
    const Stopwatch step_clock;
    samples.Fill(step, ranks.rank * config.batch_size(), config.batch_size(), tokens.data());
    for (int64_t b = 0; b < config.batch_size(); ++b) {
      for (int64_t t = 0; t < shape.seq_len; ++t) {
        inputs[b * shape.seq_len + t] = static_cast<int32_t>(tokens[b * row + t]);
        targets[b * shape.seq_len + t] =
            static_cast<int32_t>(tokens[b * row + t + 1]);
      }
    }
    const double data_ms = step_clock.ElapsedMs();
    const double lr = LearningRateAt(schedule, step + 1);
    if (bucket_sync != nullptr) bucket_sync->Start();
    StepStats stats = model->ForwardBackward(inputs.data(), targets.data());
    double comm_wait_ms = 0;
    if (bucket_sync != nullptr) {
      const Stopwatch sync_clock;
      if (absl::Status synced = bucket_sync->Finish(); !synced.ok()) {
        return Annotate(synced, absl::StrCat("step ", step + 1, ": the gradient's sync"));
      }
      // What backward did not hide: the buckets left and the wait for all.
      comm_wait_ms = sync_clock.ElapsedMs();
      stats.loss = ranks.average_loss(stats.loss);
      stats.backward_ms += sync_clock.ElapsedMs();
    }
    if (sharded != nullptr) {
      if (absl::Status updated = Zero1Update(sync_plan, pieces, *sharded,
                                             bucket_sync->shard_gradients(),
                                             *ranks.collectives, ranks.sum_over_ranks,
                                             step + 1, lr, config.max_grad_norm(), &stats);
          !updated.ok()) {
        return Annotate(updated, absl::StrCat("step ", step + 1, ": zero1's update"));
      }
    } else {
      model->Update(step + 1, lr, config.max_grad_norm(), &stats);
    }
    StepRecord* record = run->add_steps();
    record->set_step(static_cast<int32_t>(step + 1));  // 1-based, as the CPU trainer
    record->set_loss(stats.loss);
    record->set_lr(lr);
    record->set_grad_norm(stats.grad_norm);
    record->set_clipped(stats.clipped);
    record->set_data_ms(data_ms);
    record->set_forward_ms(stats.forward_ms);
    record->set_backward_ms(stats.backward_ms);
    record->set_optimizer_ms(stats.optimizer_ms);
    record->set_step_ms(step_clock.ElapsedMs());
    record->set_tokens_per_second(tokens_per_step / (record->step_ms() / 1e3));
    record->set_timed(step - start_step >= config.timing_warmup_steps());
    record->set_peak_memory_bytes(model->DeviceBytes());
    if (bucket_sync != nullptr) {
      // Expected by the byte model (NCCL's own traffic is not counted).
      record->set_grad_syncs(1);
      record->set_comm_wait_ms(comm_wait_ms);
      record->set_expected_grad_bytes(step_bytes.grad);
      record->set_expected_param_gather_bytes(step_bytes.gather);
    }
    if (config.peak_flops() > 0) {
      record->set_mfu(record->tokens_per_second() * FlopsPerTokenOf(shape) /
                      config.peak_flops());
    }
    if (!std::isfinite(stats.loss)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "step ", step + 1, "/", config.steps(), ": the loss is ",
          stats.loss, " on ", device.name));
    }
    if (config.log_every() > 0 && ranks.rank == 0 && (step + 1) % config.log_every() == 0) {
      LOG(INFO) << FormatProgressLine(
          *record, config.steps(),
          record->step_ms() / 1e3 * (config.steps() - step - 1));
    }
    if (plan.SavesAt(step + 1, config.steps())) RETURN_IF_ERROR(save(step + 1));
  }
  run->set_wall_seconds(run_clock.ElapsedMs() / 1e3);
  FinishRun(run, tokens_per_step);
  *result.mutable_summary() = SummarizeRuns(result);
  RankMemory* memory = result.add_memory();
  memory->set_rank(0);
  memory->set_peak_bytes(model->DeviceBytes());
  memory->set_counted(true);
  return result;
}

}  // namespace cuda
}  // namespace mtb
