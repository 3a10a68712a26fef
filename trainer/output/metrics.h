// Per-step and per-run figures of a training run.
#ifndef MTB_TRAINER_OUTPUT_METRICS_H_
#define MTB_TRAINER_OUTPUT_METRICS_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "trainer/train_result.pb.h"

namespace mtb {

// Milliseconds since construction (steady clock).
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double ElapsedMs() const {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - start_)
        .count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// CPU time this process has used, all its threads (CLOCK_PROCESS_CPUTIME_ID),
// in milliseconds: a cost that, unlike wall time, hardly moves when other
// processes share the cores.
double ProcessCpuMs();

// "step 12/200 | loss 3.2145 | lr 9.87e-04 | 41.2k tok/s | 48.9 ms/step |
// ETA 9.3 s".
std::string FormatProgressLine(const StepRecord& step, int64_t total_steps,
                               double eta_seconds);

// The loud warning for an MFU above 1 (a --peak_flops below what the run
// achieves, or a noisy measured peak): names the MFU, the peak and its source
// so the user can fix the denominator instead of trusting "400%".
std::string MfuAboveOneWarning(double mfu, const PeakFlops& peak);

// Fills first/final loss, loss drop and the timed means of a finished run from
// its steps (timed steps only for times; all steps when none is timed).
void FinishRun(TrainRun* run, int64_t tokens_per_step);

// Mean +- sample std over the runs, and model FLOP/s.
TrainSummary SummarizeRuns(const TrainResult& result);

// fsdp's parameter all-gathers per timed step, from the summary: "parameter
// all-gathers: 12.3 ms in flight per step, 4.5 ms (37%) hidden behind
// computation (--fsdp_prefetch on)".
std::string ParameterGatherLine(const TrainResult& result);

}  // namespace mtb

#endif  // MTB_TRAINER_OUTPUT_METRICS_H_
