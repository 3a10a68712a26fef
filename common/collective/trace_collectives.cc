#include "common/collective/trace_collectives.h"

#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/base/status.h"
#include "common/collective/clock_sync.h"
#include "common/collective/traffic.h"
#include "common/results/run_context.h"

namespace mtb::collective {

CollectiveTrack TensorParallelTrack() {
  CollectiveTrack where;
  where.track = trace::kTpCommTrack;
  where.category = "tp_collective";
  where.waits = false;
  return where;
}

CollectiveLog::ObserverId TraceCollectives(Communicator& communicator,
                                           trace::TraceRecorder* recorder,
                                           const CollectiveTrack& where) {
  return TraceCollectives(communicator.log(), recorder, where);
}

CollectiveLog::ObserverId TraceCollectives(CollectiveLog& log,
                                           trace::TraceRecorder* recorder,
                                           const CollectiveTrack& where) {
  return log.AddObserver(
      [recorder, where](CollectiveEvent event, const CollectiveRecord& r) {
        if (event != CollectiveEvent::kCompleted || !recorder->enabled()) return;
        const std::string op(CollectiveOpName(r.op));
        recorder->AddSpan(op, where.category, where.track, r.issue_time,
                          r.transfer_done_time,
                          {{"op", op},
                           {"bytes", absl::StrCat(r.size_bytes)},
                           {"seq", absl::StrCat(r.sequence)},
                           {"algorithm", r.algorithm}});
        if (where.waits && r.wait_time > absl::ZeroDuration()) {
          recorder->AddSpan(absl::StrCat("wait ", op), "wait", trace::kWaitTrack,
                            r.wait_return_time - r.wait_time, r.wait_return_time,
                            {{"seq", absl::StrCat(r.sequence)}});
        }
      });
}

absl::StatusOr<trace::TraceRunInfo> SharedTraceRunInfo(
    const Communicator* communicator, int rank, int world_size,
    const std::string& tool, absl::Duration timeout) {
  trace::TraceRunInfo info;
  info.set_rank(rank);
  info.set_world_size(world_size);
  info.set_tool(tool);
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  info.set_hostname(host);
  std::string run_id = NewRunId();
  if (communicator != nullptr && world_size > 1) {
    Store store = communicator->store();
    if (rank == 0) {
      RETURN_IF_ERROR(store.Set("trace/run_id", run_id));
    } else {
      ASSIGN_OR_RETURN(run_id, store.Get("trace/run_id", timeout));
    }
    const int64_t shift_us = absl::ToInt64Microseconds(trace::ClockShiftForTesting(rank));
    ASSIGN_OR_RETURN(const ClockOffset offset,
                     EstimateClockOffset(store, rank, world_size, /*rounds=*/8, timeout,
                                         [shift_us] { return SystemClockUs() + shift_us; }));
    info.set_clock_offset_us(offset.offset_us);
    info.set_clock_sync_rtt_us(offset.rtt_us);
  }
  info.set_run_id(run_id);
  return info;
}

}  // namespace mtb::collective
