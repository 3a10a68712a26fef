// What a rank held at its memory peak: the counting
// allocator's peak (common/libtorch/counting_allocator.h) broken down into
// the parameter, gradient, optimizer-state and collective bytes the strategy
// held at that moment, found by walking its tensors (Strategy::Held), and
// the rest, "unattributed" (activations autograd saved, their gradients, the
// optimizer's and the norm's temporaries, leaks: nothing hides).
//
// Why intervals, not a walk at the peak: the peak happens inside an
// allocation, and walking tensors from the allocator's callback would
// re-enter LibTorch. Instead the strategy and the loop mark every point at
// which what the strategy holds may change (Strategy::set_memory_marks'
// contract), so Held() is constant between two marks. At each mark the
// allocator's interval peak is taken (TakeCpuIntervalPeak: the highest live
// bytes since the previous mark) and Held() is walked for the interval that
// starts there. The interval with the highest peak holds the step's peak, and
// what was held then is the walk at its opening mark: exact, not a sample
// near the peak. The step's largest interval peak equals the allocator's peak
// for the step (asserted by //trainer:memory_process_test).
//
// Limits (docs/trainer.md "Memory at the peak"): allocations of other
// threads (c10d's worker dropping the last reference to a finished
// collective's temporaries a moment after the wait returned) can fall inside
// the next interval.
//
// Not thread-safe: marks come from the training thread (gradient hooks run
// on it).
#ifndef MTB_TRAINER_MEMORY_MEMORY_PEAK_H_
#define MTB_TRAINER_MEMORY_MEMORY_PEAK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainer/run/strategy.h"
#include "trainer/train_result.pb.h"

namespace mtb {

class PeakAttribution final : public MemoryMarks {
 public:
  // `walk`: what the strategy holds now (Strategy::Held); called at every
  // mark, must not allocate tensors. The counting allocator must be
  // installed.
  explicit PeakAttribution(std::function<HeldMemory()> walk);

  // Opens the first interval (the step's start).
  void Begin(const char* what);
  // Closes the open interval and opens the next one here.
  void Mark(const char* what, int index) override;
  // Closes the last interval and returns the one with the highest peak
  // (the last of equal ones: see memory_peak.cc): run and step are left to
  // the caller.
  MemoryAtPeak End();

  // Marks since Begin, and the time spent walking at them (the mechanism's
  // cost: docs/trainer.md "Memory at the peak").
  int64_t marks() const { return marks_; }
  double walk_ms() const { return walk_ms_; }

 private:
  struct Interval {
    const char* what = "";
    int index = -1;
    int64_t live_bytes = 0;  // at the opening mark
    HeldMemory held;         // walked at the opening mark
  };
  void Close();

  std::function<HeldMemory()> walk_;
  Interval open_;
  Interval best_;
  int64_t best_peak_ = -1;
  int64_t marks_ = 0;
  double walk_ms_ = 0;
};

// The breakdown of every rank, rank by rank (collective: every rank calls it
// once, through the strategy's scalar gather; `where` travels too, cut to 66
// characters).
absl::StatusOr<std::vector<MemoryAtPeak>> GatherMemoryAtPeak(
    Strategy& strategy, const MemoryAtPeak& mine);

}  // namespace mtb

#endif  // MTB_TRAINER_MEMORY_MEMORY_PEAK_H_
