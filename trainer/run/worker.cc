#include "trainer/run/worker.h"

#include <unistd.h>

#include <malloc.h>

#include <cstdlib>
#include <iostream>
#include <limits>
#include <optional>
#include <utility>

#include "ATen/ATen.h"
#include "ATen/Parallel.h"
#include "absl/strings/str_cat.h"
#include "common/results/atomic_file.h"
#include "common/libtorch/counting_allocator.h"
#include "common/collective/mesh.h"
#include "common/collective/rendezvous.h"
#include "common/launch/rendezvous_env.h"
#include "common/base/flags.h"
#include "common/results/output_path.h"
#include "common/results/run_context.h"
#include "common/base/status.h"
#include "common/gemm/backend.h"
#include "common/libtorch/torch_info.h"
#include "glog/logging.h"
#include "common/collective/trace_collectives.h"
#include "common/trace/recorder.h"
#include "trainer/checkpoint/audit.h"
#include "trainer/checkpoint/agreement.h"
#include "trainer/checkpoint/checkpointer.h"
#include "trainer/data/data.h"
#include "trainer/model/init_from.h"
#include "trainer/memory/memory_estimate.h"
#include "trainer/output/metrics.h"
#include "trainer/output/metrics_stream.h"
#include "trainer/output/output.h"
#include "trainer/pipeline/pipeline_training.h"
#include "trainer/run/preemption.h"
#include "trainer/run/restart_history.h"
#include "trainer/strategy/factory.h"
#include "trainer/tp/bytes.h"
#include "trainer/tp/model_split.h"
#include "trainer/tp/strategy.h"
#include "trainer/run/trainer.h"

namespace mtb {
namespace {

constexpr char kProgram[] = "trainer";

int Fail(const absl::Status& status) {
  return ReportAndExitCode(kProgram, status);
}

// The communicator, and the job's store without the group's prefix: it
// outlives every attempt when the launcher hosts it (restart history).
struct Joined {
  std::unique_ptr<collective::Communicator> communicator;
  std::optional<collective::Store> job_store;
  // What the communicator was built from: a mesh builds its groups alike.
  collective::RendezvousOptions rendezvous;
};

// --tp > 1: the dp x tp mesh over the world communicator (its groups' flight
// recorders dump beside the world's).
absl::StatusOr<std::unique_ptr<collective::RankMesh>> MakeMesh(
    const TrainConfig& config, collective::Communicator* world,
    const collective::RendezvousOptions& rendezvous) {
  collective::MeshOptions options;
  options.tp = tp::TensorParallelSize(config);
  options.communicator = collective::CommunicatorOptionsFor(rendezvous);
  options.identity = world->flight_recorder().identity();
  options.flight_recorder_dir = rendezvous.flight_recorder_dir;
  return collective::RankMesh::Create(world, options);
}

absl::StatusOr<Joined> JoinGroup(const RankEnv& env, const WorkerOptions& options) {
  collective::RendezvousOptions rendezvous =
      RendezvousOptionsFor(env, options.timeouts);
  // The trainer reads totals (bytes per step) and the observer, never the
  // records: a long run would otherwise keep every collective's record.
  rendezvous.keep_records = false;
  rendezvous.transport = options.transport;
  // Without the launcher's --log_dir the flight recorder dumps go to one
  // folder per run beside the result, named by the run id (the launcher's
  // last line says where).
  if (rendezvous.flight_recorder_dir.empty()) {
    rendezvous.flight_recorder_dir = absl::StrCat(
        DirectoryOf(options.out.empty() ? DefaultResultPath(kProgram, "json") : options.out),
        "/flight_", env.run_id);
  }
  RETURN_IF_ERROR(collective::ValidateRendezvousOptions(rendezvous));
  Joined joined;
  ASSIGN_OR_RETURN(collective::Store store, collective::ConnectStore(rendezvous));
  ASSIGN_OR_RETURN(joined.communicator, collective::JoinGroup(store, rendezvous));
  joined.job_store = std::move(store);
  joined.rendezvous = rendezvous;
  return joined;
}

// The job's restarts as this (the final) attempt's rank 0 knows them: from
// the job's store when there is one, else from the launcher's lines alone.
absl::StatusOr<RestartHistory> HistoryOf(const RankEnv& env, AttemptLog* log,
                                         const AttemptRecord& this_start,
                                         int64_t last_completed_step) {
  if (log != nullptr) {
    return log->History(env.earlier_attempts, env.max_restarts, last_completed_step);
  }
  std::vector<AttemptRecord> attempts(env.restart_count + 1);
  for (int a = 0; a <= env.restart_count; ++a) {
    attempts[a].set_attempt(a);
    attempts[a].set_last_completed_step(-1);
    if (a < static_cast<int>(env.earlier_attempts.size())) {
      attempts[a].set_ended(env.earlier_attempts[a]);
    }
  }
  attempts.back() = this_start;
  attempts.back().set_attempt(env.restart_count);
  attempts.back().set_last_completed_step(last_completed_step);
  return AssembleHistory(std::move(attempts), env.max_restarts);
}

void KeepFreedMemoryInTheProcess() {
  // A training step allocates and frees the same activations every step.
  // With glibc's defaults, blocks above the (dynamic) mmap threshold are
  // mmapped and unmapped each time and the heap top is trimmed back to the
  // OS, so every step page-faults its working set in again (measured: ~2600
  // faults and ~7 ms of system time per step of the tiny benchmark model).
  // Serve blocks up to 32 MiB (glibc's maximum) from the heap and never trim
  // it: freed memory is reused by the next step.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

}  // namespace

absl::Status DumpParameters(const std::vector<NamedParameter>& parameters,
                            int rank, const std::string& directory) {
  RETURN_IF_ERROR(CreateDirectories(directory));
  std::string bytes;
  std::string manifest;
  int64_t offset = 0;
  for (const NamedParameter& p : parameters) {
    const at::Tensor values = p.tensor.detach().contiguous();
    bytes.append(static_cast<const char*>(values.data_ptr()), values.nbytes());
    absl::StrAppend(&manifest, p.name, " ", offset, " ", values.numel());
    for (int64_t size : values.sizes()) absl::StrAppend(&manifest, " ", size);
    absl::StrAppend(&manifest, "\n");
    offset += values.numel();
  }
  RETURN_IF_ERROR(WriteFileAtomically(
      absl::StrCat(directory, "/rank_", rank, ".f32"), bytes));
  if (rank != 0) return absl::OkStatus();
  return WriteFileAtomically(absl::StrCat(directory, "/manifest.txt"),
                             manifest);
}


int RunWorker(const TrainConfig& config, const RankEnv& env,
              const WorkerOptions& options) {
  KeepFreedMemoryInTheProcess();
  at::set_num_threads(config.intra_op_threads());
  // Validated with the configuration; oneDNN's threads follow the line above.
  gemm::SetDefaultBackend(
      gemm::ParseBackend(config.gemm().empty() ? "auto" : config.gemm()).value());
  InstallCountingCpuAllocator();
  absl::StatusOr<std::unique_ptr<DataSource>> data = TensorData(OpenSamplesFor(config));
  if (!data.ok()) {
    std::cerr << kProgram << ": --data: " << data.status().message() << "\n";
    return kExitUsage;
  }
  RunContext context = NewRunContext(kProgram, options.argc, options.argv);
  if (env.rank == 0) {
    for (const std::string& note : options.notes) LOG(WARNING) << note;
  }

  std::unique_ptr<collective::Communicator> communicator;
  std::optional<collective::Store> job_store;
  std::unique_ptr<collective::RankMesh> mesh;
  if (env.world_size > 1) {
    absl::StatusOr<Joined> joined = JoinGroup(env, options);
    if (!joined.ok()) {
      // A bad rank environment is found before joining: nothing ran.
      return Fail(Annotate(joined.status(),
                           absl::StrCat("rank ", env.rank, ": joining the "
                                        "group")));
    }
    communicator = std::move(joined->communicator);
    job_store = std::move(joined->job_store);
    LOG(INFO) << "joined a group of " << env.world_size << " ranks (Gloo on "
              << communicator->device_description() << ", local rank "
              << env.local_rank << ", " << config.intra_op_threads()
              << " intra-op thread(s))";
    // Every rank trains the same run, or none does: compared before step 1
    // (ranks started by hand or by torchrun were planned apart).
    if (absl::Status agreed = checkpoint::AgreeOnRun(
            communicator.get(), checkpoint::AgreementOf(config, options.checkpoint));
        !agreed.ok()) {
      return Fail(Annotate(agreed, absl::StrCat("rank ", env.rank)));
    }
    // Under --pp the stages build their pp x dp x tp groups themselves
    // (trainer/pipeline/pipeline_training.h).
    if (tp::TensorParallelSize(config) > 1 && !pipeline::IsPipelined(config)) {
      absl::StatusOr<std::unique_ptr<collective::RankMesh>> made =
          MakeMesh(config, communicator.get(), joined->rendezvous);
      if (!made.ok()) {
        return Fail(Annotate(made.status(),
                             absl::StrCat("rank ", env.rank, ": the mesh")));
      }
      mesh = *std::move(made);
      LOG(INFO) << "mesh: dp " << mesh->dp_size() << " x tp " << mesh->tp_size()
                << "; this rank is dp " << mesh->dp_rank() << ", tp "
                << mesh->tp_rank();
    }
  }
  // With a mesh the strategy runs over the dp group, wrapped for tp.
  absl::StatusOr<std::unique_ptr<Strategy>> strategy = MakeStrategy(
      config, mesh ? mesh->dp() : communicator.get(), options.sync_fault);
  if (!strategy.ok()) return Fail(strategy.status());
  std::unique_ptr<tp::TensorParallelSplit> model_split;
  if (mesh) {
    strategy = std::unique_ptr<Strategy>(
        new tp::TensorParallelStrategy(*std::move(strategy), mesh.get(),
                                       tp::ExpectedTensorParallelStepBytes(config)));
    model_split = std::make_unique<tp::TensorParallelSplit>(
        mesh->tp(), config.sequence_parallel(), options.tp_fault);
  }

  RunHooks hooks;
  hooks.faults = options.faults;
  hooks.model_split = model_split.get();
  hooks.attempt = env.restart_count;
  std::unique_ptr<checkpoint::Checkpointer> checkpointer;
  if (options.checkpoint.enabled()) {
    checkpointer = std::make_unique<checkpoint::Checkpointer>(
        options.checkpoint, config, env.rank, env.world_size, communicator.get());
    hooks.checkpointer = checkpointer.get();
  }
  if (communicator || options.checkpoint.enabled()) {
    // Where the rank is, for heartbeats and flight recorder dumps, and for
    // whether a save fits in a SIGTERM's grace.
    hooks.phase_observer = [recorder = communicator ? &communicator->flight_recorder() : nullptr,
                            preemptible = options.checkpoint.enabled()](
                               int64_t step, absl::string_view phase) {
      if (recorder != nullptr) recorder->SetPosition(step, phase);
      if (preemptible) NotePreemptionPhase(step, phase);
    };
  }
  if (communicator) {
    hooks.after_first_step = [&] {
      // Start-up is over: from here on a hung peer fails the run after the
      // steady-state timeout (and the launcher's heartbeat watch applies).
      // Every rank calls it after the same step, with no collective in
      // flight.
      if (mesh) {
        mesh->MarkSteady();
        return mesh->SetTimeout(options.timeouts.collective_timeout);
      }
      communicator->flight_recorder().MarkSteady();
      return communicator->SetTimeout(options.timeouts.collective_timeout);
    };
  }
  if (options.checkpoint.enabled()) {
    // A SIGTERM is now a preemption notice: the ranks finish the step,
    // save it and exit kExitPreempted. After the communicator exists (Note
    // [SIGTERM has two listeners] in trainer/run/preemption.h).
    // Our launcher's heartbeat grants a notice twice the last step and save.
    SetPreemptionGrace(options.kill_grace,
                       /*launcher_sizes_grace=*/env.heartbeat_fd >= 0 && communicator != nullptr);
    InstallPreemptionHandler(env.rank);
    hooks.stop_notice = [] { return PreemptionNoticeReceived(); };
  }
  // --max_restarts: rank 0 records where each attempt starts and how far it
  // gets in the job's store; the final attempt's result tells the history.
  const bool restartable = env.max_restarts > 0 || env.restart_count > 0;
  std::unique_ptr<AttemptLog> attempt_log;
  AttemptRecord this_start;
  int64_t last_completed_step = -1;
  if (restartable && env.rank == 0) {
    if (job_store.has_value() && env.agent_store) {
      attempt_log = std::make_unique<AttemptLog>(*job_store, env.restart_count);
    }
    if (env.restart_count > 0 && options.checkpoint.enabled()) {
      // What the failed attempt left, before anything writes there.
      *this_start.mutable_tree_at_start() =
          checkpoint::AuditCheckpointTree(options.checkpoint.options.dir);
      LOG(INFO) << "restart " << env.restart_count << ": checkpoint directory "
                << options.checkpoint.options.dir << ": "
                << checkpoint::DescribeAudit(this_start.tree_at_start());
    }
    hooks.on_start = [&](const std::string& resumed_from, int64_t resumed_step) {
      this_start.set_resumed_from(resumed_from);
      this_start.set_resumed_step(resumed_step);
      this_start.set_resumed_known(true);
      last_completed_step = resumed_step;
      return attempt_log ? attempt_log->RecordStart(this_start) : absl::OkStatus();
    };
    hooks.after_step = [&](int64_t step) {
      last_completed_step = step;
      return attempt_log ? attempt_log->RecordStep(step) : absl::OkStatus();
    };
  }
  if (!options.init_parameters.empty()) hooks.init_parameters = &options.init_parameters;
  std::unique_ptr<MetricsStream> metrics_stream;
  if (!options.metrics_jsonl.empty() && env.rank == 0) {
    absl::StatusOr<std::unique_ptr<MetricsStream>> opened =
        MetricsStream::Open(options.metrics_jsonl);
    if (!opened.ok()) return Fail(opened.status());
    metrics_stream = *std::move(opened);
    hooks.metrics_stream = metrics_stream.get();
  }
  if (!options.dump_parameters.empty()) {
    hooks.after_last_run = [&](const GptModel& model) -> absl::Status {
      if (!mesh) {
        return DumpParameters(model.parameters(), env.rank,
                              ResolveUserPath(options.dump_parameters));
      }
      // The logical global tensors, as one rank's model holds them.
      ASSIGN_OR_RETURN(const std::vector<NamedParameter> global,
                       model_split->GlobalParameters(model.parameters()));
      return DumpParameters(global, env.rank,
                            ResolveUserPath(options.dump_parameters));
    };
  }
  // --trace_dir: one recorder per rank; collectives come from the log's
  // observer (issued -> transfer done on the comm track, the caller's wait
  // on the comm-wait track), phases from the trainer.
  std::unique_ptr<trace::TraceRecorder> recorder;
  // (communicator, observer) pairs to remove before the recorder goes.
  std::vector<std::pair<collective::Communicator*, collective::CollectiveLog::ObserverId>>
      trace_observers;
  if (!options.trace_dir.empty()) {
    absl::StatusOr<trace::TraceRunInfo> info = collective::SharedTraceRunInfo(
        communicator.get(), env.rank, env.world_size, "trainer",
        options.timeouts.connect_timeout);
    if (!info.ok()) return Fail(info.status());
    recorder = std::make_unique<trace::TraceRecorder>(*info);
    hooks.trace = recorder.get();
    hooks.trace_first_step = options.trace_first_step;
    hooks.trace_last_step = options.trace_last_step;
    if (communicator) {
      trace_observers.emplace_back(
          communicator.get(), collective::TraceCollectives(*communicator, recorder.get()));
    }
    if (mesh) {
      // The strategy's collectives go over the dp group (the comm track as
      // without tp), the model's over the tp group (a track of its own).
      trace_observers.emplace_back(mesh->dp(),
                                   collective::TraceCollectives(*mesh->dp(), recorder.get()));
      trace_observers.emplace_back(
          mesh->tp(), collective::TraceCollectives(*mesh->tp(), recorder.get(),
                                                   collective::TensorParallelTrack()));
    }
  }
  // A pipelined run has its own loop (trainer/pipeline/pipeline_training.h);
  // main.cc refused the run components it does not have.
  absl::StatusOr<TrainResult> result =
      pipeline::IsPipelined(config)
          ? pipeline::RunPipelineTraining(config,
                                          RankInfo{env.rank, env.world_size},
                                          communicator.get(), **data, hooks,
                                          options.sync_fault, options.tp_fault,
                                          options.pp_resume_without_step)
          : RunTraining(config,
                        RankInfo{env.rank, env.world_size,
                                 tp::TensorParallelSize(config)},
                        **strategy, **data, hooks);
  if (recorder != nullptr) {
    for (const auto& [observed, id] : trace_observers) observed->log().RemoveObserver(id);
    if (absl::Status written = recorder->WriteTo(options.trace_dir); !written.ok()) {
      return Fail(written);
    }
    if (env.rank == 0) {
      LOG(INFO) << "traces: " << options.trace_dir << "/rank_<r>.trace.json (bazel run "
                << "//profiler_agg -- " << options.trace_dir << ")";
    }
  }
  if (!result.ok()) {
    const int code = ExitCodeFor(result.status());
    // A non-finite stop is decided collectively, so every rank would say the
    // same: rank 0 gives the job's verdict, the others stay quiet.
    const bool collective_verdict =
        result.status().code() == absl::StatusCode::kAborted && communicator;
    if (!collective_verdict || env.rank == 0) {
      std::cerr << kProgram << ": " << result.status().message() << std::endl;
    }
    // A non-finite stop is decided collectively: wait until every rank has
    // printed its error, so the launcher's teardown never cuts one short.
    if (result.status().code() == absl::StatusCode::kAborted && communicator) {
      (void)communicator->Barrier();
    } else if (communicator) {
      // Any other failure may leave bucket collectives in flight that the
      // peers never issue: exit now rather than after the collective
      // timeout (the launcher tears the others down).
      communicator->Abandon(result.status());
    }
    return code;
  }
  const int exit_code = result->has_preemption() ? kExitPreempted : kExitOk;
  if (env.rank != 0) return exit_code;
  if (result->has_preemption()) {
    Preemption* preemption = result->mutable_preemption();
    preemption->set_signal("SIGTERM");
    if (PreemptionNoticeReceived()) {
      preemption->set_notice_to_saved_seconds(
          absl::ToDoubleSeconds(absl::Now() - PreemptionNoticeTime()));
    }
  }
  if (restartable) {
    absl::StatusOr<RestartHistory> history =
        HistoryOf(env, attempt_log.get(), this_start, last_completed_step);
    if (!history.ok()) return Fail(history.status());
    for (const std::string& line : DescribeHistory(*history)) LOG(INFO) << line;
    *result->mutable_restarts() = *std::move(history);
  }

  *result->mutable_memory_estimate() =
      EstimateRankMemory(config, env.world_size);
  FillTorchInfo(&context);
  context.set_world_size(env.world_size);
  context.set_backend((*strategy)->backend());
  FinishRunContext(&context);
  *result->mutable_run_context() = context;
  const std::string out =
      options.out.empty() ? DefaultResultPath(kProgram, "json") : options.out;
  absl::StatusOr<std::vector<std::string>> written =
      WriteTrainOutputs(*result, out, options.markdown);
  if (!written.ok()) return Fail(written.status());
  std::cout << RenderSummaryTable(*result) << "\nresult: " << out << "\n";
  for (const std::string& line : *written) std::cout << line << "\n";
  if (result->summary().mfu() > 1) {
    LOG(WARNING) << MfuAboveOneWarning(result->summary().mfu(),
                                       result->peak_flops());
  }
  return exit_code;
}

}  // namespace mtb
