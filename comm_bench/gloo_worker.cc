#include "comm_bench/gloo_worker.h"

#include <iostream>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "comm_bench/gloo_backend.h"
#include "comm_bench/report_files.h"
#include "comm_bench/table.h"
#include "common/collective/rendezvous.h"
#include "common/faults/fault_injector.h"
#include "common/results/atomic_file.h"
#include "common/collective/trace_collectives.h"
#include "common/results/output_path.h"
#include "common/trace/recorder.h"
#include "common/base/flags.h"
#include "common/launch/rendezvous_env.h"
#include "common/results/run_context.h"
#include "common/base/status.h"
#include "common/libtorch/torch_info.h"
#include "glog/logging.h"

namespace mtb::comm_bench {
namespace {

// Forwards to the table printer (rank 0) and records each sweep point as a
// "ProfilerStep#N" span (N counts points from 1, args: op and size), so a
// trace's steps are the sweep's points.
class TracingListener : public SweepListener {
 public:
  TracingListener(SweepListener* inner, trace::TraceRecorder* recorder)
      : inner_(inner), recorder_(recorder) {}
  void OpStarted(const Collective& op, const SweepOptions& options, int world_size,
                 const Support& support) override {
    point_begin_ = absl::Now();
    if (inner_ != nullptr) inner_->OpStarted(op, options, world_size, support);
  }
  void SizeFinished(const Collective& op, const std::vector<CommBenchRow>& rows) override {
    const absl::Time now = absl::Now();
    ++point_;
    recorder_->AddSpan(absl::StrCat("ProfilerStep#", point_), "step", trace::kComputeTrack,
                       point_begin_, now,
                       {{"step", absl::StrCat(point_)},
                        {"op", rows.empty() ? "" : rows[0].op()},
                        {"bytes", rows.empty() ? "" : absl::StrCat(rows[0].bytes())}});
    point_begin_ = now;
    if (inner_ != nullptr) inner_->SizeFinished(op, rows);
  }
  void Note(const std::string& note) override {
    if (inner_ != nullptr) inner_->Note(note);
  }
  void OpFinished(const CommBenchOpSummary& summary) override {
    if (inner_ != nullptr) inner_->OpFinished(summary);
  }

 private:
  SweepListener* inner_;
  trace::TraceRecorder* recorder_;
  absl::Time point_begin_ = absl::Now();
  int point_ = 0;
};

absl::StatusOr<CommBenchResult> Run(const GlooWorkerOptions& options) {
  collective::RendezvousOptions rendezvous =
      RendezvousOptionsFor(options.rank_env, options.timeouts);
  rendezvous.keep_records = false;  // the backend follows the observer
  // Validated by ResolveOptions.
  rendezvous.transport = *collective::ParseTransport(options.flags.transport);
  // Without the launcher's --log_dir the flight recorder dumps beside the
  // result.
  if (rendezvous.flight_recorder_dir.empty()) {
    rendezvous.flight_recorder_dir =
        DirectoryOf(ResolveOutputPaths(options.flags, "comm_bench").json);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<collective::Communicator> communicator,
                   collective::Rendezvous(rendezvous));
  std::unique_ptr<Backend> backend = NewGlooBackend(*communicator);
  const std::string transport(communicator->transport());
  RETURN_IF_ERROR(CheckSupported(*backend, options.sweep));

  std::unique_ptr<TablePrinter> printer;
  if (backend->rank() == 0) {
    printer = std::make_unique<TablePrinter>(
        std::cout, absl::StrCat("gloo, transport ", communicator->transport()));
  }
  SweepListener* listener = printer.get();
  std::unique_ptr<trace::TraceRecorder> recorder;
  std::unique_ptr<TracingListener> tracing;
  collective::CollectiveLog::ObserverId observer = -1;
  if (!options.flags.trace_dir.empty()) {
    ASSIGN_OR_RETURN(trace::TraceRunInfo info,
                     collective::SharedTraceRunInfo(
                         communicator.get(), options.rank_env.rank,
                         options.rank_env.world_size, "comm_bench",
                         options.timeouts.connect_timeout));
    recorder = std::make_unique<trace::TraceRecorder>(info);
    tracing = std::make_unique<TracingListener>(printer.get(), recorder.get());
    listener = tracing.get();
    observer = collective::TraceCollectives(*communicator, recorder.get());
  }
  collective::FlightRecorder& flight = communicator->flight_recorder();
  FaultInjector faults(options.faults, options.rank_env.rank,
                       options.rank_env.restart_count);
  SweepHooks hooks;
  hooks.before_point = [&](int64_t point, const std::string& op) {
    // --trace_steps: outside the window the recorder drops the point's span
    // and the observer returns before building anything.
    if (recorder != nullptr) recorder->set_enabled(options.trace_window.Contains(point));
    flight.SetPosition(point, op);
    (void)faults.At(point, op);
  };
  hooks.after_first_point = [&] {
    // Start-up is over: the steady-state timeout, and the heartbeat watch.
    flight.MarkSteady();
    return communicator->SetTimeout(options.timeouts.collective_timeout);
  };
  SweepOptions sweep = options.sweep;
  sweep.transport = transport;
  ASSIGN_OR_RETURN(CommBenchResult result, RunSweep(*backend, sweep, listener, hooks));
  if (recorder != nullptr) {
    communicator->log().RemoveObserver(observer);
    RETURN_IF_ERROR(recorder->WriteTo(ResolveUserPath(options.flags.trace_dir)));
  }
  // Everyone is done with the group before rank 0 (which may host the store)
  // writes files and leaves.
  RETURN_IF_ERROR(communicator->Barrier());
  result.mutable_options()->set_transport(transport);  // kept by RunGlooWorker
  return result;
}

}  // namespace

int RunGlooWorker(const GlooWorkerOptions& options) {
  absl::StatusOr<CommBenchResult> result = Run(options);
  if (!result.ok()) return ReportAndExitCode("comm_bench", result.status());
  // The verdict is rank 0's to report, once it has written the results: a
  // peer exiting non-zero on its own copy of it first would make the
  // launcher stop rank 0 before it writes them.
  if (options.rank_env.rank != 0) return kExitOk;

  RunContext context = options.context;
  FillTorchInfo(&context);
  context.set_world_size(options.rank_env.world_size);
  context.set_backend("gloo");
  FinishRunContext(&context);
  *result->mutable_context() = context;
  const std::string transport = result->options().transport();
  *result->mutable_options() = OptionsForResult(
      options.sweep, options.flags, options.rank_env.world_size, "gloo");
  result->mutable_options()->set_transport(transport);
  const OutputPaths paths = ResolveOutputPaths(options.flags, "comm_bench");
  absl::Status written = WriteOutputs(*result, paths);
  if (!written.ok()) return ReportAndExitCode("comm_bench", written);
  std::cout << "# result: " << paths.json << "\n# verdict: " << result->verdict()
            << std::endl;
  return VerdictExitCode(*result);
}

}  // namespace mtb::comm_bench
