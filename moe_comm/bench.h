// Benchmark mode: one configuration of the sweep timed on every rank. The
// layer's forward runs --warmup_iters untimed and --iters timed times
// (no autograd); each call's dispatch and combine all_to_allv are timed on the
// calling thread (wall time of the blocking call, so a rank that arrives early
// waits inside it: the slowest rank sets everyone's time). Bytes come from the
// dispatch counts, routing statistics from the layer's global all-reduce.
#ifndef MTB_MOE_COMM_BENCH_H_
#define MTB_MOE_COMM_BENCH_H_

#include "absl/status/statusor.h"
#include "common/collective/communicator.h"
#include "moe_comm/layer.h"
#include "moe_comm/moe_comm.pb.h"

namespace mtb::moe_comm {

// Collective: every rank calls it with the same arguments. Every rank returns
// the same ConfigResult (the per-rank figures are all-gathered).
// `before_phase` goes to every layer call (layer.h).
absl::StatusOr<ConfigResult> RunBenchmarkConfig(const MoeConfig& config,
                                                const MoeCommOptions& options,
                                                collective::Communicator& comm,
                                                const PhaseHook& before_phase = {});

}  // namespace mtb::moe_comm

#endif  // MTB_MOE_COMM_BENCH_H_
