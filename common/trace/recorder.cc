#include "common/trace/recorder.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"
#include "common/results/output_path.h"

ABSL_FLAG(int, test_only_shift_clock_of_rank, -1,
          "tests only: this rank's clock reads 1s ahead in its trace and its "
          "clock offset estimate, as on a host whose clock differs");

namespace mtb::trace {
namespace {

TraceEvent Metadata(const std::string& what, int pid, int tid,
                    const std::string& name) {
  TraceEvent event;
  event.set_name(what);
  event.set_ph("M");
  event.set_pid(pid);
  event.set_tid(tid);
  (*event.mutable_args())["name"] = name;
  return event;
}

}  // namespace

absl::Duration ClockShiftForTesting(int rank) {
  return rank >= 0 && rank == absl::GetFlag(FLAGS_test_only_shift_clock_of_rank)
             ? absl::Seconds(1)
             : absl::ZeroDuration();
}

namespace {

TraceRunInfo WithStart(TraceRunInfo info, absl::Time start) {
  info.set_start_unix_us(absl::ToUnixMicros(start + ClockShiftForTesting(info.rank())));
  return info;
}

}  // namespace

TraceRecorder::TraceRecorder(TraceRunInfo info, absl::Time start)
    : info_(WithStart(std::move(info), start)), start_(start) {}

void TraceRecorder::AddSpan(const std::string& name, const std::string& cat,
                            int track, absl::Time begin, absl::Time end,
                            const std::map<std::string, std::string>& args) {
  if (!enabled()) return;
  TraceEvent event;
  event.set_name(name);
  event.set_cat(cat);
  event.set_ph("X");
  event.set_ts(absl::ToDoubleMicroseconds(begin - start_));
  event.set_dur(absl::ToDoubleMicroseconds(end - begin));
  event.set_pid(info_.rank());
  event.set_tid(track);
  for (const auto& [key, value] : args) (*event.mutable_args())[key] = value;
  std::lock_guard<std::mutex> lock(mutex_);
  events_.push_back(std::move(event));
}

TraceFile TraceRecorder::Build() const {
  TraceFile file;
  file.set_displaytimeunit("ms");
  *file.mutable_otherdata() = info_;
  const int pid = info_.rank();
  *file.add_traceevents() =
      Metadata("process_name", pid, 0, absl::StrCat("rank ", pid));
  *file.add_traceevents() = Metadata("thread_name", pid, kComputeTrack, "compute");
  *file.add_traceevents() = Metadata("thread_name", pid, kCommTrack, "comm");
  *file.add_traceevents() = Metadata("thread_name", pid, kWaitTrack, "comm wait");
  std::vector<TraceEvent> events;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    events = events_;
  }
  if (std::any_of(events.begin(), events.end(),
                  [](const TraceEvent& e) { return e.tid() == kTpCommTrack; })) {
    *file.add_traceevents() = Metadata("thread_name", pid, kTpCommTrack, "tp comm");
  }
  // Collectives in flight at once (two buckets, say) would overlap on one
  // track, which trace viewers cannot nest: each goes to the first comm lane
  // free at its start (lane 0 is the comm track, lane k > 0 track
  // kExtraCommTrackBase + k), so spans on every track nest or are disjoint.
  std::stable_sort(events.begin(), events.end(),
                   [](const TraceEvent& a, const TraceEvent& b) { return a.ts() < b.ts(); });
  std::vector<double> lane_free_at;
  for (TraceEvent& event : events) {
    if (event.tid() != kCommTrack) continue;
    size_t lane = 0;
    while (lane < lane_free_at.size() && lane_free_at[lane] > event.ts()) ++lane;
    if (lane == lane_free_at.size()) {
      lane_free_at.push_back(0);
      if (lane > 0) {
        *file.add_traceevents() =
            Metadata("thread_name", pid, kExtraCommTrackBase + static_cast<int>(lane),
                     absl::StrCat("comm (", lane + 1, ")"));
      }
    }
    lane_free_at[lane] = event.ts() + event.dur();
    if (lane > 0) event.set_tid(kExtraCommTrackBase + static_cast<int>(lane));
  }
  for (TraceEvent& event : events) *file.add_traceevents() = std::move(event);
  return file;
}

absl::Status TraceRecorder::WriteTo(const std::string& directory) const {
  RETURN_IF_ERROR(CreateDirectories(directory));
  return WriteJsonFile(Build(), RankTracePath(directory, info_.rank()));
}

ScopedSpan::ScopedSpan(TraceRecorder* recorder, std::string name, std::string cat,
                       std::map<std::string, std::string> args)
    : recorder_(recorder != nullptr && recorder->enabled() ? recorder : nullptr) {
  if (recorder_ == nullptr) return;
  name_ = std::move(name);
  cat_ = std::move(cat);
  args_ = std::move(args);
  begin_ = absl::Now();
}

ScopedSpan::~ScopedSpan() {
  if (recorder_ == nullptr) return;
  recorder_->AddSpan(name_, cat_, kComputeTrack, begin_, absl::Now(), args_);
}

}  // namespace mtb::trace
