// A rank's trace while it runs: spans on three tracks (compute, comm, comm
// wait) kept in memory and written at the end as Chrome trace-event JSON
// (trace.proto) to <dir>/rank_<r>.trace.json. Tracing off means no recorder:
// ScopedSpan on a null recorder does nothing, so the cost of tracing off is
// one pointer test per span.
#ifndef MTB_COMMON_TRACE_RECORDER_H_
#define MTB_COMMON_TRACE_RECORDER_H_

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/trace/trace.pb.h"

namespace mtb::trace {

inline constexpr int kComputeTrack = 0;
inline constexpr int kCommTrack = 1;
inline constexpr int kWaitTrack = 2;
// A tensor-parallel group's collectives (inside forward and backward,
// blocking), apart from the data-parallel ones on the comm track; named
// "tp comm" when a trace has any.
inline constexpr int kTpCommTrack = 3;
// Collectives overlapping in time get extra comm tracks 10, 11, ...
inline constexpr int kExtraCommTrackBase = 9;

class TraceRecorder {
 public:
  // `info` names the run and this rank (clock offset included); times are
  // microseconds since `start` (this rank's clock), which the file records
  // as info's start_unix_us (shifted by ClockShiftForTesting).
  explicit TraceRecorder(TraceRunInfo info, absl::Time start = absl::Now());

  // Thread-safe: collectives complete on Gloo's threads.
  void AddSpan(const std::string& name, const std::string& cat, int track,
               absl::Time begin, absl::Time end,
               const std::map<std::string, std::string>& args = {});

  // The trace so far, with the process and track names.
  TraceFile Build() const;

  // <directory>/rank_<rank>.trace.json, atomically (the directory is made).
  absl::Status WriteTo(const std::string& directory) const;

  const TraceRunInfo& info() const { return info_; }

  // Spans are kept only while enabled (--trace_steps' window); thread-safe.
  void set_enabled(bool enabled) { enabled_.store(enabled); }
  bool enabled() const { return enabled_.load(); }

 private:
  std::atomic<bool> enabled_{true};
  const TraceRunInfo info_;
  const absl::Time start_;
  mutable std::mutex mutex_;
  std::vector<TraceEvent> events_;
};

// --test_only_shift_clock_of_rank=R: rank R's clock reads 1 s ahead, as on a
// host whose clock differs; the trace's start time and the clock offset
// estimate both see it (so a merged trace must still align). Zero for
// every other rank, and without the flag.
absl::Duration ClockShiftForTesting(int rank);

// A compute-track span from construction to destruction; nothing at all
// when `recorder` is null.
class ScopedSpan {
 public:
  ScopedSpan(TraceRecorder* recorder, std::string name, std::string cat,
             std::map<std::string, std::string> args = {});
  ~ScopedSpan();
  ScopedSpan(const ScopedSpan&) = delete;
  ScopedSpan& operator=(const ScopedSpan&) = delete;

 private:
  TraceRecorder* recorder_;
  std::string name_, cat_;
  std::map<std::string, std::string> args_;
  absl::Time begin_;
};

}  // namespace mtb::trace

#endif  // MTB_COMMON_TRACE_RECORDER_H_
