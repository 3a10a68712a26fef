#include "trainer/model/init_from.h"
#include "trainer/output/metrics_stream.h"
#include "trainer/run/components.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/flags.h"
#include "common/base/host_memory.h"
#include "common/base/status.h"
#include "common/faults/fault_injector.h"
#include "common/libtorch/counting_allocator.h"
#include "glog/logging.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/checkpointer.h"
#include "trainer/exact/exact.h"
#include "trainer/memory/memory_peak.h"
#include "trainer/output/metrics.h"
#include "trainer/run/run_report.h"
#include "trainer/strategy/scalars.h"

namespace mtb {
namespace {

class ProgressComponent : public RunComponent {
 public:
  absl::Status OnRunStart(RunState& state) override {
    const TrainConfig& config = *state.config;
    total_steps_ = static_cast<int64_t>(config.steps()) * config.repeat() -
                   state.start_step;
    return absl::OkStatus();
  }
  absl::Status AfterStep(RunState& state, StepRecord& record) override {
    const TrainConfig& config = *state.config;
    const TrainResult& result = *state.result;
    record.set_mfu(record.tokens_per_second() *
                   result.model().flops_per_token() /
                   result.peak_flops().job_flops_per_second());
    if (record.mfu() > 1 && !warned_mfu_above_one_ && state.rank.rank == 0) {
      warned_mfu_above_one_ = true;
      LOG(WARNING) << MfuAboveOneWarning(record.mfu(), result.peak_flops());
    }
    ++steps_done_;
    elapsed_ms_ += record.step_ms();
    const double eta_seconds =
        (elapsed_ms_ / steps_done_) *
        static_cast<double>(total_steps_ - steps_done_) / 1000.0;
    if (state.rank.rank == 0 && (record.step() % config.log_every() == 0 ||
                                 record.step() == config.steps())) {
      LOG(INFO) << (config.repeat() > 1
                        ? absl::StrCat("run ", state.repeat + 1, "/",
                                       config.repeat(), " ")
                        : "")
                << FormatProgressLine(record, config.steps(), eta_seconds);
    }
    return absl::OkStatus();
  }

 private:
  int64_t total_steps_ = 0;
  int64_t steps_done_ = 0;
  double elapsed_ms_ = 0;
  bool warned_mfu_above_one_ = false;
};

// Where each step's memory peaks (counted only when the counting allocator
// is installed) and what the strategy holds there; every rank's at the end.
class MemoryComponent : public RunComponent {
 public:
  MemoryComponent() : process_at_start_(ReadProcessMemory()) {}
  absl::Status OnRunStart(RunState& state) override {
    strategy_ = state.strategy;
    return absl::OkStatus();
  }
  void OnStepBegin(int64_t) override {
    attribution_.reset();
    if (strategy_ == nullptr || !CountingCpuAllocatorInstalled()) return;
    ResetCpuPeak();
    attribution_.emplace([this] { return strategy_->Held(); });
    attribution_->Begin("step begins");
  }
  void OnMark(const char* what, int index) override {
    if (attribution_) attribution_->Mark(what, index);
  }
  void OnStepEnd(int64_t step, StepRecord& record) override {
    if (!attribution_) return;
    record.set_live_bytes(CpuMemory().current_bytes);
    record.set_unattributed_bytes(
        record.live_bytes() -
        (record.held_parameter_bytes() + record.held_gradient_bytes() +
         record.held_optimizer_state_bytes() + record.held_collective_bytes()));
    record.set_peak_memory_bytes(CpuMemory().peak_bytes);
    *record.mutable_memory_at_peak() = attribution_->End();
    record.mutable_memory_at_peak()->set_step(static_cast<int32_t>(step));
    VLOG(1) << "step " << step << ": " << attribution_->marks()
            << " memory marks, " << attribution_->walk_ms()
            << " ms walking what the strategy holds";
    attribution_.reset();
  }
  absl::Status AfterStep(RunState& state, StepRecord& record) override {
    peak_memory_bytes_ = std::max(peak_memory_bytes_, record.peak_memory_bytes());
    if (record.memory_at_peak().peak_bytes() > memory_at_peak_.peak_bytes()) {
      memory_at_peak_ = record.memory_at_peak();
      memory_at_peak_.set_run(state.repeat);
    }
    return absl::OkStatus();
  }
  // Every rank's peak (exact in fp64 up to 2^53 bytes).
  absl::Status OnTrainingEnd(RunState& state) override;

 private:
  Strategy* strategy_ = nullptr;
  const absl::StatusOr<ProcessMemory> process_at_start_;
  std::optional<PeakAttribution> attribution_;
  int64_t peak_memory_bytes_ = 0;
  MemoryAtPeak memory_at_peak_;  // this rank's, over every run
};

absl::Status MemoryComponent::OnTrainingEnd(RunState& state) {
  const absl::StatusOr<ProcessMemory> process_at_end = ReadProcessMemory();
  StepScalars scalars;
  scalars.Add("peak_bytes", static_cast<double>(peak_memory_bytes_));
  scalars.Add("counted", CountingCpuAllocatorInstalled() ? 1.0 : 0.0);
  scalars.Add("vm_hwm_bytes",
              process_at_end.ok()
                  ? static_cast<double>(process_at_end->hwm_bytes)
                  : 0.0);
  scalars.Add("vm_rss_at_start_bytes",
              process_at_start_.ok()
                  ? static_cast<double>(process_at_start_->rss_bytes)
                  : 0.0);
  ASSIGN_OR_RETURN(const StepScalars::Gathered peaks,
                   scalars.Gather(strategy_->communicator()));
  ASSIGN_OR_RETURN(const std::vector<MemoryAtPeak> at_peaks,
                   GatherMemoryAtPeak(*strategy_, memory_at_peak_));
  for (int r = 0; r < state.rank.world_size; ++r) {
    RankMemory* memory = state.result->add_memory();
    memory->set_rank(r);
    memory->set_peak_bytes(static_cast<int64_t>(peaks.One(r, "peak_bytes")));
    memory->set_counted(peaks.One(r, "counted") != 0);
    memory->set_vm_hwm_bytes(static_cast<int64_t>(peaks.One(r, "vm_hwm_bytes")));
    memory->set_vm_rss_at_start_bytes(
        static_cast<int64_t>(peaks.One(r, "vm_rss_at_start_bytes")));
    if (memory->counted()) *memory->mutable_at_peak() = at_peaks[r];
  }
  return absl::OkStatus();
}

// RunHooks::phase_observer and after_first_step.
class ObserverComponent : public RunComponent {
 public:
  explicit ObserverComponent(const RunHooks& hooks) : hooks_(hooks) {}
  bool OnPhaseBegin(int64_t step, const char* phase) override {
    if (hooks_.phase_observer) hooks_.phase_observer(step, phase);
    return false;
  }
  absl::Status AfterStep(RunState&, StepRecord&) override {
    if (++steps_done_ == 1 && hooks_.after_first_step) {
      return hooks_.after_first_step();
    }
    return absl::OkStatus();
  }

 private:
  const RunHooks& hooks_;
  int64_t steps_done_ = 0;
};

// --fault=: kill, exit and hang do not return; slow sleeps (once per step);
// nan poisons the forward's loss.
class FaultComponent : public RunComponent {
 public:
  FaultComponent(std::vector<Fault> faults, int rank, int attempt)
      : injector_(faults, rank, attempt),
        faults_(injector_.empty() ? std::vector<Fault>() : std::move(faults)) {}
  bool OnPhaseBegin(int64_t step, const char* phase) override {
    return injector_.At(step, phase);
  }
  std::string NonFiniteNote(int64_t step) const override {
    std::string note;
    for (const Fault& fault : faults_) {
      if (fault.kind == FaultKind::kNan && fault.step == step) {
        absl::StrAppend(&note, " (injected by --fault=", FaultToString(fault),
                        ")");
      }
    }
    return note;
  }

 private:
  FaultInjector injector_;
  std::vector<Fault> faults_;
};

// --trace_dir: the steps of --trace_steps' window in the first run.
class TraceComponent : public RunComponent {
 public:
  explicit TraceComponent(const RunHooks& hooks) : hooks_(hooks) {}
  absl::Status OnRunStart(RunState& state) override {
    state_ = &state;
    return absl::OkStatus();
  }
  void OnStepBegin(int64_t step) override {
    traced_ = state_ != nullptr && state_->repeat == 0 &&
              step >= hooks_.trace_first_step && step <= hooks_.trace_last_step;
    hooks_.trace->set_enabled(traced_);
    if (state_ != nullptr) state_->trainer->set_trace(traced_ ? hooks_.trace : nullptr);
    step_begin_ = absl::Now();
  }
  absl::Status AfterStep(RunState&, StepRecord& record) override {
    if (traced_) {
      hooks_.trace->AddSpan(absl::StrCat("ProfilerStep#", record.step()),
                            "step", trace::kComputeTrack, step_begin_,
                            absl::Now(), {{"step", absl::StrCat(record.step())}});
    }
    return absl::OkStatus();
  }

 private:
  const RunHooks& hooks_;
  RunState* state_ = nullptr;
  bool traced_ = false;
  absl::Time step_begin_;
};

// --checkpoint_dir: resume, saves, preemption and corrupt faults.
class CheckpointComponent : public RunComponent {
 public:
  CheckpointComponent(const RunHooks& hooks, int rank)
      : hooks_(hooks),
        checkpointer_(*hooks.checkpointer),
        corruptions_(hooks.faults, rank, hooks.attempt),
        // A background save injects its faults on an injector of its own
        // (FaultInjector is not thread-safe).
        background_faults_(checkpointer_.plan().options.async_save
                               ? std::make_shared<FaultInjector>(
                                     hooks.faults, rank, hooks.attempt)
                               : nullptr) {}
  // Before the first step: the checkpointer started and a planned resume
  // loaded (ResumeComponent calls it ahead of the others).
  absl::Status Resume(RunState& state);
  // A resume that trains nothing and saves at once: an offline reshard.
  absl::Status OnRunStart(RunState& state) override;
  // A preemption notice rides on the step's gather, so every rank learns of
  // it after the same step (trainer/run/preemption.h).
  void ContributeScalars(int64_t, StepScalars& scalars) override {
    scalars.Add("stop_notice",
                hooks_.stop_notice && hooks_.stop_notice() ? 1.0 : 0.0);
  }
  void ReadScalars(int64_t step, const StepScalars::Gathered& all) override {
    for (int r = 0; r < all.ranks(); ++r) {
      if (all.One(r, "stop_notice") != 0 && stop_after_step_ == 0) {
        stop_after_step_ = step;
      }
    }
  }
  absl::Status AfterStep(RunState& state, StepRecord& record) override;
  absl::Status OnRunEnd(RunState& state) override { return FinishAsync(state); }

 private:
  // Saves after `step` (every rank, no collective in flight): at once, or
  // with --async_checkpoint a snapshot now and the rest in the background;
  // finished saves go into the result.
  absl::Status SaveAfter(RunState& state, int64_t step, bool traced);
  // The async save in flight, if any, waited for and recorded.
  absl::Status FinishAsync(RunState& state);
  void Record(RunState& state, std::vector<CheckpointSave> finished);

  const RunHooks& hooks_;
  checkpoint::Checkpointer& checkpointer_;
  FaultInjector corruptions_;
  const std::shared_ptr<FaultInjector> background_faults_;
  int64_t stop_after_step_ = 0;
};

absl::Status CheckpointComponent::Resume(RunState& state) {
  const TrainConfig& config = *state.config;
  RETURN_IF_ERROR(checkpointer_.Start());
  // The plan after the load: a torchrun rank's --resume=latest may fall
  // back past a checkpoint that fails at load (Checkpointer::Resume).
  const checkpoint::CheckpointPlan& plan = checkpointer_.plan();
  double load_ms = 0;
  if (plan.resuming()) {
    const Stopwatch load_watch;
    RETURN_IF_ERROR(checkpointer_.Resume(*state.strategy, [&](int64_t step) {
      return ProgressState(config, state.rank, step);
    }));
    load_ms = load_watch.ElapsedMs();
    state.start_step = plan.start_step;
    state.resumed_from = plan.resume_dir;
    state.trainer->RestoreProgress(state.start_step);
    if (state.rank.rank == 0) {
      LOG(INFO) << "resumed from " << plan.resume_dir << " (run "
                << checkpointer_.run_id() << "): "
                << (state.start_step == config.steps()
                        ? std::string("nothing to train")
                        : absl::StrCat("steps ", state.start_step + 1, "..",
                                       config.steps()))
                << (plan.resume_exact
                        ? ", exact"
                        : absl::StrCat(", not exact: ", plan.inexact_reason));
    }
  }
  *state.result->mutable_checkpoint() = checkpointer_.Info();
  state.result->mutable_checkpoint()->set_load_ms(load_ms);
  return absl::OkStatus();
}

absl::Status CheckpointComponent::OnRunStart(RunState& state) {
  const TrainConfig& config = *state.config;
  const checkpoint::CheckpointPlan& plan = checkpointer_.plan();
  if (plan.trains_nothing(config.steps()) &&
      plan.SavesAt(state.start_step, config.steps())) {
    // An offline reshard: the loaded state, saved in this run's layout.
    RETURN_IF_ERROR(SaveAfter(state, state.start_step, /*traced=*/false));
  }
  return absl::OkStatus();
}

absl::Status CheckpointComponent::AfterStep(RunState& state,
                                            StepRecord& record) {
  const int64_t step = record.step();
  // The ranks agreed on a preemption notice during this step: it ends the
  // run once a checkpoint of it is published.
  const bool preempted = stop_after_step_ == step;
  if (!preempted && !checkpointer_.plan().SavesAt(step, state.config->steps())) {
    return absl::OkStatus();
  }
  // The save of a traced step is traced too.
  RETURN_IF_ERROR(SaveAfter(state, step,
                            hooks_.trace != nullptr && hooks_.trace->enabled()));
  const Fault* corrupt = corruptions_.Corruption(step);
  // Both act on the published checkpoint: an async save is waited for.
  if (preempted || corrupt != nullptr) RETURN_IF_ERROR(FinishAsync(state));
  const std::string saved = absl::StrCat(checkpointer_.plan().options.dir, "/",
                                         checkpoint::StepDirName(step));
  if (corrupt != nullptr) {
    ASSIGN_OR_RETURN(const std::string file,
                     checkpoint::CorruptShardFile(saved, state.rank.rank));
    LOG(ERROR) << "--fault=" << FaultToString(*corrupt)
               << ": flipped a byte of " << file;
  }
  if (preempted) {
    Preemption* preemption = state.result->mutable_preemption();
    preemption->set_step(static_cast<int32_t>(step));
    preemption->set_checkpoint(saved);
    state.stop = true;
    if (state.rank.rank == 0) {
      LOG(WARNING) << "preemption notice: stopped after step " << step
                   << " of " << state.config->steps() << " with checkpoint "
                   << preemption->checkpoint()
                   << " (resume with --resume=latest)";
    }
  }
  return absl::OkStatus();
}

absl::Status CheckpointComponent::SaveAfter(RunState& state, int64_t step,
                                            bool traced) {
  const checkpoint::RankState progress = ProgressState(*state.config, state.rank, step);
  trace::TraceRecorder* trace = traced ? hooks_.trace : nullptr;
  std::vector<CheckpointSave> finished;
  if (checkpointer_.plan().options.async_save) {
    ASSIGN_OR_RETURN(finished,
                     checkpointer_.SaveAsync(
                         step, *state.strategy, progress, trace,
                         [injector = background_faults_, step](const char* phase) {
                           injector->At(step, phase);
                         }));
  } else {
    ASSIGN_OR_RETURN(CheckpointSave save,
                     checkpointer_.Save(step, *state.strategy, progress, trace,
                                        [&](const char* phase) {
                                          (void)state.components->PhaseBegin(
                                              step, phase);
                                        }));
    finished.push_back(std::move(save));
  }
  Record(state, std::move(finished));
  return absl::OkStatus();
}

absl::Status CheckpointComponent::FinishAsync(RunState& state) {
  ASSIGN_OR_RETURN(std::vector<CheckpointSave> finished,
                   checkpointer_.FinishAsync());
  Record(state, std::move(finished));
  return absl::OkStatus();
}

void CheckpointComponent::Record(RunState& state,
                                 std::vector<CheckpointSave> finished) {
  for (CheckpointSave& save : finished) {
    LogSave(save, state.rank);
    *state.result->mutable_checkpoint()->add_saves() = std::move(save);
  }
}

// The checkpoint component's resume, ahead of the components that read the
// start step (the progress line, the restart history).
class ResumeComponent : public RunComponent {
 public:
  explicit ResumeComponent(CheckpointComponent* checkpoints)
      : checkpoints_(checkpoints) {}
  absl::Status OnRunStart(RunState& state) override {
    return checkpoints_->Resume(state);
  }

 private:
  CheckpointComponent* checkpoints_;
};

// RunHooks::on_start and after_step (the restart history).
class HistoryComponent : public RunComponent {
 public:
  explicit HistoryComponent(const RunHooks& hooks) : hooks_(hooks) {}
  absl::Status OnRunStart(RunState& state) override {
    if (!hooks_.on_start) return absl::OkStatus();
    return hooks_.on_start(state.resumed_from, state.start_step);
  }
  absl::Status AfterStep(RunState&, StepRecord& record) override {
    if (!hooks_.after_step) return absl::OkStatus();
    return hooks_.after_step(record.step());
  }

 private:
  const RunHooks& hooks_;
};

// The last run's parameters: digest and RunHooks::after_last_run.
class DigestComponent : public RunComponent {
 public:
  explicit DigestComponent(const RunHooks& hooks) : hooks_(hooks) {}
  absl::Status OnRunEnd(RunState& state) override {
    if (state.stop || state.repeat != state.config->repeat() - 1) {
      return absl::OkStatus();
    }
    // Sharded parameters (fsdp) are gathered for the digest and the hook.
    RETURN_IF_ERROR(state.strategy->GatherFullParameters());
    const GptModel& model = state.trainer->model();
    // Split across a tp group: the logical model's digest (gathered over
    // the group), so digests compare across layouts.
    if (hooks_.model_split != nullptr) {
      ASSIGN_OR_RETURN(const std::vector<NamedParameter> global,
                       hooks_.model_split->GlobalParameters(
                           model.store().parameters()));
      state.result->set_parameter_digest(ParameterDigest(global));
    } else {
      state.result->set_parameter_digest(
          ParameterDigest(model.store().parameters()));
    }
    if (hooks_.after_last_run) RETURN_IF_ERROR(hooks_.after_last_run(model));
    return absl::OkStatus();
  }

 private:
  const RunHooks& hooks_;
};

}  // namespace

std::unique_ptr<RunComponent> MakeFaultComponent(std::vector<Fault> faults,
                                                 int rank, int attempt) {
  return std::make_unique<FaultComponent>(std::move(faults), rank, attempt);
}

RunComponents StandardComponents(const TrainConfig& config,
                                 const RankInfo& rank, const RunHooks& hooks) {
  RunComponents components;
  // The observer first: a fault at a phase acts after the flight recorder
  // knows where the rank is.
  components.Add(std::make_unique<ObserverComponent>(hooks));
  components.Add(MakeFaultComponent(hooks.faults, rank.rank, hooks.attempt));
  if (hooks.trace != nullptr) {
    components.Add(std::make_unique<TraceComponent>(hooks));
  }
  components.Add(std::make_unique<MemoryComponent>());
  std::unique_ptr<CheckpointComponent> checkpoints;
  if (hooks.checkpointer != nullptr) {
    checkpoints = std::make_unique<CheckpointComponent>(hooks, rank.rank);
    components.Add(std::make_unique<ResumeComponent>(checkpoints.get()));
  }
  // After a resume, which it then leaves alone; before anything reads the
  // model.
  if (hooks.init_parameters != nullptr) {
    components.Add(MakeInitFromComponent(hooks.init_parameters));
  }
  components.Add(std::make_unique<ProgressComponent>());
  // The history records a step before its checkpoint is saved (a step
  // whose save fails was still trained).
  components.Add(std::make_unique<HistoryComponent>(hooks));
  if (checkpoints != nullptr) components.Add(std::move(checkpoints));
  components.Add(std::make_unique<DigestComponent>(hooks));
  if (hooks.metrics_stream != nullptr) {
    components.Add(MakeMetricsStreamComponent(hooks.metrics_stream));
  }
  return components;
}

absl::Status DescribeRun(RunState& state, const DataSource& data) {
  const TrainConfig& config = *state.config;
  const Trainer& trainer = *state.trainer;
  ModelInfo* model = state.result->mutable_model();
  model->set_parameter_count(trainer.model().ParameterCount());
  model->set_flops_parameter_count(trainer.model().FlopsParameterCount());
  model->set_flops_per_token(trainer.model().FlopsPerToken());
  model->set_tokens_per_step(trainer.tokens_per_step());
  LogStart(config, state.rank, *state.strategy, data, trainer.model(),
           trainer.tokens_per_step());
  FillStrategyInfo(*state.strategy, trainer.model(),
                   state.result->mutable_strategy());
  ASSIGN_OR_RETURN(*state.result->mutable_peak_flops(),
                   JobPeakFlops(config, state.rank, *state.strategy));
  return absl::OkStatus();
}

}  // namespace mtb
