#include "trainer/output/metrics.h"

#include <time.h>

#include <vector>

#include "absl/strings/str_format.h"
#include "common/base/stats.h"
#include "glog/logging.h"

namespace mtb {

double ProcessCpuMs() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e3 +
         static_cast<double>(now.tv_nsec) / 1e6;
}
namespace {

std::string FormatRate(double tokens_per_second) {
  if (tokens_per_second >= 1e6) {
    return absl::StrFormat("%.2fM", tokens_per_second / 1e6);
  }
  if (tokens_per_second >= 1e3) {
    return absl::StrFormat("%.1fk", tokens_per_second / 1e3);
  }
  return absl::StrFormat("%.0f", tokens_per_second);
}

MeanStd MeanStdOf(const std::vector<double>& values) {
  MeanStd result;
  result.set_count(static_cast<int32_t>(values.size()));
  if (values.empty()) return result;
  result.set_mean(Mean(values));
  result.set_std(SampleStd(values));
  return result;
}

}  // namespace

std::string FormatProgressLine(const StepRecord& step, int64_t total_steps,
                               double eta_seconds) {
  return absl::StrFormat(
      "step %d/%d | loss %.4f | lr %.3e | %s tok/s | %.1f ms/step | ETA %.1f s",
      step.step(), total_steps, step.loss(), step.lr(),
      FormatRate(step.tokens_per_second()), step.step_ms(), eta_seconds);
}

std::string MfuAboveOneWarning(double mfu, const PeakFlops& peak) {
  if (peak.source() != "--peak_flops") {
    // The peak is the fastest GEMM measured on these threads at the model's
    // shapes: no step can beat it unless the measurement is wrong.
    return absl::StrFormat(
        "MFU %.0f%% exceeds 100%% of the measured peak (%.3g GFLOP/s per "
        "rank, %s): a product ran faster than every GEMM the probe measured, "
        "which is a bug of the probe (common/libtorch/matmul_peak.h: a "
        "library, shape or thread count it did not measure), not a result",
        100 * mfu, peak.rank_flops_per_second() / 1e9, peak.source());
  }
  return absl::StrFormat(
      "MFU %.0f%% exceeds 100%%: the peak it divides by (%.3g GFLOP/s per "
      "rank, %s) is below what this run achieves, so every MFU figure of this "
      "run is meaningless; give the device's real peak with --peak_flops, or "
      "leave it 0 to measure one",
      100 * mfu, peak.rank_flops_per_second() / 1e9, peak.source());
}

void FinishRun(TrainRun* run, int64_t tokens_per_step) {
  CHECK_GT(run->steps_size(), 0);
  run->set_first_loss(run->steps(0).loss());
  run->set_final_loss(run->steps(run->steps_size() - 1).loss());
  run->set_loss_drop_fraction(1.0 - run->final_loss() / run->first_loss());
  bool any_timed = false;
  for (const StepRecord& step : run->steps()) any_timed |= step.timed();
  double total_ms = 0;
  int timed_steps = 0;
  for (const StepRecord& step : run->steps()) {
    if (any_timed && !step.timed()) continue;
    total_ms += step.step_ms();
    ++timed_steps;
  }
  run->set_mean_step_ms(total_ms / timed_steps);
  run->set_tokens_per_second(static_cast<double>(tokens_per_step) *
                             timed_steps / (total_ms / 1000.0));
}

TrainSummary SummarizeRuns(const TrainResult& result) {
  std::vector<double> final_loss, tokens_per_second, step_ms, drop;
  for (const TrainRun& run : result.runs()) {
    final_loss.push_back(run.final_loss());
    tokens_per_second.push_back(run.tokens_per_second());
    step_ms.push_back(run.mean_step_ms());
    drop.push_back(run.loss_drop_fraction());
  }
  TrainSummary summary;
  *summary.mutable_final_loss() = MeanStdOf(final_loss);
  *summary.mutable_tokens_per_second() = MeanStdOf(tokens_per_second);
  *summary.mutable_step_ms() = MeanStdOf(step_ms);
  *summary.mutable_loss_drop_fraction() = MeanStdOf(drop);
  summary.set_model_flops_per_second(result.model().flops_per_token() *
                                     summary.tokens_per_second().mean());
  if (result.peak_flops().job_flops_per_second() > 0) {
    summary.set_mfu(summary.model_flops_per_second() /
                    result.peak_flops().job_flops_per_second());
  }
  if (result.peak_flops().blas_job_flops_per_second() > 0) {
    summary.set_blas_mfu(summary.model_flops_per_second() /
                         result.peak_flops().blas_job_flops_per_second());
  }
  // Communication means over the timed steps of every run.
  double wait_ms = 0, sent = 0, expected = 0, in_flight = 0, hidden = 0;
  int steps = 0;
  for (const TrainRun& run : result.runs()) {
    bool any_timed = false;
    for (const StepRecord& step : run.steps()) any_timed |= step.timed();
    for (const StepRecord& step : run.steps()) {
      if (any_timed && !step.timed()) continue;
      wait_ms += step.comm_wait_ms();
      sent += static_cast<double>(step.grad_bytes_sent());
      expected += static_cast<double>(step.expected_grad_bytes());
      in_flight += step.param_gather_in_flight_ms();
      hidden += step.param_gather_hidden_ms();
      ++steps;
    }
  }
  if (steps > 0) {
    summary.set_comm_wait_ms(wait_ms / steps);
    summary.set_grad_bytes_sent_per_step(sent / steps);
    summary.set_expected_grad_bytes_per_step(expected / steps);
    summary.set_param_gather_in_flight_ms(in_flight / steps);
    summary.set_param_gather_hidden_ms(hidden / steps);
  }
  return summary;
}

std::string ParameterGatherLine(const TrainResult& result) {
  const TrainSummary& s = result.summary();
  const double in_flight = s.param_gather_in_flight_ms();
  return absl::StrFormat(
      "parameter all-gathers: %.2f ms in flight per step, %.2f ms (%.0f%%) "
      "hidden behind computation (--fsdp_prefetch %s)",
      in_flight, s.param_gather_hidden_ms(),
      in_flight > 0 ? 100 * s.param_gather_hidden_ms() / in_flight : 0.0,
      result.config().fsdp_prefetch() ? "on" : "off");
}

}  // namespace mtb
