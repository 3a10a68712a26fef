#include "trainer/cuda/peak.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace mtb {
namespace cuda {

std::vector<GemmTiming> PeakShapes() {
  std::vector<GemmTiming> shapes(3);
  shapes[0].m = shapes[0].n = shapes[0].k = 8192;
  shapes[1].m = shapes[1].n = shapes[1].k = 4096;
  shapes[2].m = 8192;
  shapes[2].n = 8192;
  shapes[2].k = 4096;
  return shapes;
}

bool ApplyMeasuredPeak(const std::vector<GemmTiming>& timings, bool bf16, int repeats,
                       int calls, int world_size, TrainResult* result) {
  if (timings.empty()) return false;
  for (const GemmTiming& t : timings) {
    if (!(t.flops_per_second > 0)) return false;
  }
  const GemmTiming& best = *std::max_element(
      timings.begin(), timings.end(), [](const GemmTiming& a, const GemmTiming& b) {
        return a.flops_per_second < b.flops_per_second;
      });
  PeakFlops* peak = result->mutable_peak_flops();
  peak->Clear();
  peak->set_rank_flops_per_second(best.flops_per_second);
  const double job = best.flops_per_second * std::max(world_size, 1);
  peak->set_job_flops_per_second(job);
  std::vector<std::string> parts;
  for (const GemmTiming& t : timings) {
    parts.push_back(absl::StrFormat("%dx%dx%d %.1f TFLOP/s", t.m, t.n, t.k,
                                    t.flops_per_second / 1e12));
    GemmSpeedRecord* record = peak->add_gemms();
    record->set_library("cublaslt");
    record->set_precision(bf16 ? "bf16" : "fp32");
    record->set_m(t.m);
    record->set_n(t.n);
    record->set_k(t.k);
    record->set_flops_per_second(t.flops_per_second);
  }
  peak->set_source(absl::StrCat("measured: fastest of cuBLASLt ", bf16 ? "bf16" : "fp32",
                                " GEMMs (fp32 accumulation; best of ", repeats, " x ", calls,
                                " calls per shape): ", absl::StrJoin(parts, ", ")));
  const double flops_per_token = result->model().flops_per_token();
  for (TrainRun& run : *result->mutable_runs()) {
    for (StepRecord& step : *run.mutable_steps()) {
      step.set_mfu(step.tokens_per_second() * flops_per_token / job);
    }
  }
  if (result->has_summary()) {
    result->mutable_summary()->set_mfu(result->summary().model_flops_per_second() / job);
  }
  return true;
}

void AllocationWatch::Update(int64_t step, double lr, double max_grad_norm,
                             StepStats* stats) {
  model_->Update(step, lr, max_grad_norm, stats);
  const int64_t free_now = free_bytes_();
  if (++stats_->updates == 1) {
    stats_->free_after_first = free_now;
  } else if (stats_->lowest_later < 0 || free_now < stats_->lowest_later) {
    stats_->lowest_later = free_now;
  }
}

int64_t AllocationStats::BytesAllocatedAfterStep1() const {
  if (free_after_first < 0 || lowest_later < 0) return -1;
  return std::max<int64_t>(free_after_first - lowest_later, 0);
}

std::string AllocationLine(const AllocationStats& stats) {
  return absl::StrCat("device memory allocated after step 1: ",
                      stats.BytesAllocatedAfterStep1(), " bytes (free after step 1: ",
                      stats.free_after_first, " bytes, ", stats.updates, " updates)");
}

}  // namespace cuda
}  // namespace mtb
