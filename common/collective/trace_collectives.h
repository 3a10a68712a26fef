// A rank's collectives in its trace (common/trace): every completed
// collective as a span from issued to transfer completed on the comm track,
// the caller's blocked time on the comm-wait track; and the run's shared
// identity (rank 0's run id, each rank's clock offset) for the trace's
// otherData. Used by every tool with --trace_dir.
#ifndef MTB_COMMON_COLLECTIVE_TRACE_COLLECTIVES_H_
#define MTB_COMMON_COLLECTIVE_TRACE_COLLECTIVES_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/collective/communicator.h"
#include "common/trace/recorder.h"

namespace mtb::collective {

// Where a communicator's collectives go in the trace.
struct CollectiveTrack {
  int track = trace::kCommTrack;
  std::string category = "collective";  // what profiler_agg reads
  bool waits = true;                    // the caller's waits on kWaitTrack
};
// A tensor-parallel group's: its own track and category (profiler_agg keeps
// them out of the data-parallel overlap), no wait spans (every tp
// collective is waited for at once; its span is the blocked time).
CollectiveTrack TensorParallelTrack();

// Adds the observer; remove it (communicator.log().RemoveObserver) before
// `recorder` goes away. While the recorder is disabled (outside
// --trace_steps' window) the observer returns before building anything.
CollectiveLog::ObserverId TraceCollectives(Communicator& communicator,
                                           trace::TraceRecorder* recorder,
                                           const CollectiveTrack& where = {});
// The same on a log (what the Communicator overload uses).
CollectiveLog::ObserverId TraceCollectives(CollectiveLog& log,
                                           trace::TraceRecorder* recorder,
                                           const CollectiveTrack& where = {});

// rank, world size, tool, host, the run id rank 0 makes (host-pid-UTC time)
// shared through the store, and this rank's clock offset to rank 0's
// (EstimateClockOffset, 8 round trips). `communicator` nullptr: one rank.
absl::StatusOr<trace::TraceRunInfo> SharedTraceRunInfo(
    const Communicator* communicator, int rank, int world_size,
    const std::string& tool, absl::Duration timeout);

}  // namespace mtb::collective

#endif  // MTB_COMMON_COLLECTIVE_TRACE_COLLECTIVES_H_
