#include "common/trace/recorder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/base/status.h"
#include "common/results/atomic_file.h"
#include "common/results/json_io.h"

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

TraceRecorder::TraceRecorder(TraceRunInfo info, absl::Time start)
    : info_(std::move(info)), start_(start) {}

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
  std::lock_guard<std::mutex> lock(mutex_);
  for (const TraceEvent& event : events_) *file.add_traceevents() = event;
  return file;
}

absl::Status TraceRecorder::WriteTo(const std::string& directory) const {
  RETURN_IF_ERROR(CreateDirectories(directory));
  return WriteJsonFile(Build(), absl::StrCat(directory, "/rank_", info_.rank(),
                                             ".trace.json"));
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
