// The whole run on one rank: every configuration of the sweep, benchmarked or
// (--check) checked against the reference, with a progress line per
// configuration on rank 0.
#ifndef MTB_MOE_COMM_RUN_H_
#define MTB_MOE_COMM_RUN_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/collective/communicator.h"
#include "common/trace/window.h"
#include "moe_comm/check.h"
#include "moe_comm/moe_comm.pb.h"

namespace mtb::moe_comm {

// --trace_dir / --trace_steps (docs/traces.md): each rank writes
// <dir>/rank_<r>.trace.json with a "ProfilerStep#N" span per configuration in
// the window (N counts configurations from 1, as comm_bench counts sweep
// points; args: mode and the configuration) and every collective those
// configurations ran (common/collective/trace_collectives.h).
struct MoeTraceOptions {
  std::string dir;  // resolved; "" = no trace (no recorder at all)
  trace::TraceWindow window;
  // For the run id and clock-offset exchange through the store at start.
  absl::Duration timeout = absl::Minutes(5);
};

// `after_first` runs once the first configuration is done (the caller
// tightens the collective timeout there); `at_phase` hears the
// configuration's index (from 1) and the layer's phase ("dispatch",
// "combine") at the start of each (where --fault acts). Collective: every
// rank calls it. The result has mode, options, configs or checks and pass;
// run_context is the caller's.
absl::StatusOr<MoeCommResult> RunMoeComm(
    const MoeCommOptions& options, collective::Communicator& comm,
    const MoeCheckHooks& hooks = {},
    const std::function<absl::Status()>& after_first = {},
    const MoeTraceOptions& trace = {},
    const std::function<void(int64_t, const char*)>& at_phase = {});

}  // namespace mtb::moe_comm

#endif  // MTB_MOE_COMM_RUN_H_
