#include "moe_comm/run.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/base/status.h"
#include "common/collective/trace_collectives.h"
#include "common/trace/recorder.h"
#include "glog/logging.h"
#include "moe_comm/bench.h"
#include "moe_comm/options.h"

namespace mtb::moe_comm {

absl::StatusOr<MoeCommResult> RunMoeComm(
    const MoeCommOptions& options, collective::Communicator& comm,
    const MoeCheckHooks& hooks, const std::function<absl::Status()>& after_first,
    const MoeTraceOptions& trace,
    const std::function<void(int64_t, const char*)>& at_phase) {
  const std::vector<MoeConfig> configs = ExpandSweep(options, comm.world_size());
  MoeCommResult result;
  result.set_schema_version(1);
  result.set_mode(options.check() ? "check" : "benchmark");
  *result.mutable_options() = options;
  result.set_pass(true);
  const absl::Time start = absl::Now();
  const int total = static_cast<int>(configs.size());
  if (comm.rank() == 0) {
    LOG(INFO) << "moe_comm " << result.mode() << " on " << comm.world_size()
              << " ranks: " << total << " configuration(s), " << options.iters()
              << " timed + " << options.warmup_iters()
              << " warm-up layer calls each, seed " << options.seed()
              << (options.check() ? absl::StrCat(", rtol ", options.rtol(),
                                                 ", atol ", options.atol())
                                  : std::string());
  }
  // Tracing off: no recorder, no observer (nothing on the collectives' path).
  std::unique_ptr<trace::TraceRecorder> recorder;
  collective::CollectiveLog::ObserverId observer = -1;
  if (!trace.dir.empty()) {
    ASSIGN_OR_RETURN(trace::TraceRunInfo info,
                     collective::SharedTraceRunInfo(&comm, comm.rank(), comm.world_size(),
                                                    "moe_comm", trace.timeout));
    recorder = std::make_unique<trace::TraceRecorder>(info);
    observer = collective::TraceCollectives(comm, recorder.get());
  }
  // The observer goes before the recorder, also when a configuration fails.
  absl::Cleanup remove_observer = [&] {
    if (recorder != nullptr) comm.log().RemoveObserver(observer);
  };
  for (int i = 0; i < total; ++i) {
    const MoeConfig& config = configs[i];
    const bool traced = recorder != nullptr && trace.window.Contains(i + 1);
    if (recorder != nullptr) recorder->set_enabled(traced);
    const absl::Time config_begin = absl::Now();
    const std::string label =
        absl::StrCat(result.mode(), " ", i + 1, "/", total, " ",
                     DescribeConfig(config));
    if (comm.rank() == 0) LOG(INFO) << label << " on " << comm.world_size() << " ranks";
    PhaseHook before_phase;
    if (at_phase) {
      before_phase = [&at_phase, i](const char* phase) { at_phase(i + 1, phase); };
    }
    std::string summary;
    if (options.check()) {
      ASSIGN_OR_RETURN(ConfigCheck check,
                       RunMoeCheck(config, options, comm, hooks, before_phase));
      std::vector<std::string> failed;
      for (const auto& t : check.check().tensors()) {
        if (!t.ok()) failed.push_back(absl::StrCat(t.name(), " (", t.message(), ")"));
      }
      for (const auto& c : check.check().collectives()) {
        if (!c.ok()) failed.push_back(absl::StrCat(c.phase(), " ", c.op(), " count/bytes"));
      }
      summary = check.check().pass()
                    ? "pass"
                    : absl::StrCat("FAIL: ", absl::StrJoin(failed, "; "));
      if (!check.check().pass()) result.set_pass(false);
      *result.add_checks() = std::move(check);
    } else {
      ASSIGN_OR_RETURN(ConfigResult row,
                       RunBenchmarkConfig(config, options, comm, before_phase));
      summary = absl::StrFormat(
          "dispatch %.3f ms, combine %.3f ms, experts %.3f ms on the slowest "
          "rank (means), drop %.1f%%, imbalance %.2f, aux %.4f",
          row.dispatch().mean_ms(), row.combine().mean_ms(),
          row.expert_compute().slowest_rank_mean_ms(),
          100 * row.drop_rate(), row.imbalance(), row.aux_loss());
      *result.add_configs() = std::move(row);
    }
    if (traced) {
      recorder->AddSpan(absl::StrCat("ProfilerStep#", i + 1), "step", trace::kComputeTrack,
                        config_begin, absl::Now(),
                        {{"step", absl::StrCat(i + 1)},
                         {"mode", result.mode()},
                         {"config", DescribeConfig(config)}});
    }
    if (i == 0 && after_first) RETURN_IF_ERROR(after_first());
    if (comm.rank() == 0) {
      const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
      const double eta = elapsed / (i + 1) * (total - i - 1);
      LOG(INFO) << absl::StrFormat("%s: %s (%.1f s elapsed, ETA %.1f s)", label,
                                   summary, elapsed, eta);
    }
  }
  if (recorder != nullptr) {
    std::move(remove_observer).Invoke();
    RETURN_IF_ERROR(recorder->WriteTo(trace.dir));
    if (comm.rank() == 0) {
      LOG(INFO) << "traces: " << trace.dir << "/rank_<r>.trace.json (bazel run "
                << "//profiler_agg -- " << trace.dir << ")";
    }
  }
  return result;
}

}  // namespace mtb::moe_comm
